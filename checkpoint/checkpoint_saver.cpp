#include "checkpoint/checkpoint_saver.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/Store.hpp>


namespace megacpp::checkpoint {
namespace fs = std::filesystem;
namespace {

std::string as_string(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> as_bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

// Tests make saves slow on purpose to kill a rank in the middle of one.
void test_delay() {
  if (const char* ms = std::getenv("MEGACPP_TEST_SAVE_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(ms)));
  }
}

}  // namespace

void SaveJob::add_unsharded(const std::string& key, serialization::PyValue value) {
  format.add_unsharded(*this, key, std::move(value));
}

CheckpointSaver::CheckpointSaver(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size)
    : store_(std::move(store)), rank_(rank), world_size_(world_size) {}

CheckpointSaver::~CheckpointSaver() {
  try {
    finish();
  } catch (const std::exception& e) {
    spdlog::error("checkpoint save failed: {}", e.what());
  }
}

void CheckpointSaver::finish() {
  if (worker_.joinable()) worker_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CheckpointSaver::save(SaveJob job, bool async) {
  finish();
  const std::string prefix = "megacpp/checkpoint/" + std::to_string(saves_++) + "/";
  const std::string final_dir = checkpoint_dir(job.root, job.iteration);
  const std::string tmp_dir = final_dir + ".tmp";
  if (rank_ == 0) {
    try {
      fs::remove_all(tmp_dir);  // left by a save that was killed
      fs::create_directories(tmp_dir);
      if (world_size_ > 1) store_->set(prefix + "ready", as_bytes("ok"));
    } catch (const std::exception& e) {
      if (world_size_ > 1) store_->set(prefix + "ready", as_bytes(std::string("error: ") + e.what()));
      throw std::runtime_error("--save: cannot create " + tmp_dir + ": " + e.what());
    }
  } else {
    const std::string ready = as_string(store_->get(prefix + "ready"));
    if (ready != "ok") throw std::runtime_error("rank 0 could not prepare the checkpoint directory: " + ready);
  }
  if (!async) {
    write(job, tmp_dir, prefix);
    return;
  }
  job.items = job.items.snapshot();
  worker_ = std::thread([this, job = std::move(job), tmp_dir, prefix] {
    try {
      write(job, tmp_dir, prefix);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void CheckpointSaver::write(const SaveJob& job, const std::string& tmp_dir, const std::string& prefix) {
  const DcpMetadata part = write_rank_file(tmp_dir, rank_, job.items);
  test_delay();
  if (world_size_ == 1) {  // a process on its own may have no store at all
    publish_checkpoint(job, tmp_dir, part);
    return;
  }
  store_->set(prefix + "part/" + std::to_string(rank_), as_bytes(part.serialize()));
  if (rank_ == 0) {
    try {
      collect_and_publish(job, tmp_dir, prefix);
      store_->set(prefix + "done", as_bytes("ok"));
    } catch (const std::exception& e) {
      store_->set(prefix + "done", as_bytes(std::string("error: ") + e.what()));
      throw;
    }
    return;
  }
  const std::string done = as_string(store_->get(prefix + "done"));
  if (done != "ok") throw std::runtime_error("checkpoint at iteration " + std::to_string(job.iteration) + " failed on rank 0: " + done);
}

void CheckpointSaver::collect_and_publish(const SaveJob& job, const std::string& tmp_dir, const std::string& prefix) {
  DcpMetadata merged;
  for (int r = 0; r < world_size_; ++r) {
    const std::string key = prefix + "part/" + std::to_string(r);
    merge_metadata(merged, DcpMetadata::parse(as_string(store_->get(key)), "rank " + std::to_string(r) + "'s checkpoint index"));
    store_->deleteKey(key);
  }
  publish_checkpoint(job, tmp_dir, merged);
}

void publish_checkpoint(const SaveJob& job, const std::string& tmp_dir, const DcpMetadata& index) {
  write_metadata_file(tmp_dir, index);
  job.format.write_index_files(job, tmp_dir);
  const std::string final_dir = checkpoint_dir(job.root, job.iteration);
  if (fs::exists(final_dir)) {  // saving an iteration again: replace the old copy
    const std::string old = final_dir + ".old";
    fs::remove_all(old);
    fs::rename(final_dir, old);
    fs::rename(tmp_dir, final_dir);
    fs::remove_all(old);
  } else {
    fs::rename(tmp_dir, final_dir);
  }
  write_tracker(job.root, job.iteration);
  spdlog::info("saved checkpoint at iteration {} to {} ({})", job.iteration, final_dir, job.format.name());
}

}  // namespace megacpp::checkpoint
