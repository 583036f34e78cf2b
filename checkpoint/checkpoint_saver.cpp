#include "checkpoint/checkpoint_saver.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "io/checkpoint/index_checksums.h"
#include "parallel/store_values.h"

namespace megacpp::checkpoint {
namespace fs = std::filesystem;
namespace {

// How a rank tells the others through the store that its part of a save failed.
const std::string kFailed = "failed: ";

// Removes a save's .tmp directory after a failure; a failure to remove it is only logged (the
// next save removes it: tidy_save_directory).
void remove_failed_save(const std::string& tmp_dir) {
  std::error_code error;
  fs::remove_all(tmp_dir, error);
  if (error) spdlog::warn("could not remove {} after the failed save: {}", tmp_dir, error.message());
}

// Tidies what killed or failed saves left in SAVE: iter_N.tmp directories are removed, and so
// are iter_N.old ones whose iter_N exists again; an iter_N.old without its iter_N (Note
// [Re-saving an iteration]) is the complete earlier copy and is renamed back.
void tidy_save_directory(const std::string& root) {
  if (!fs::is_directory(root)) return;
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(root)) {
    const auto extension = entry.path().extension();
    if (entry.is_directory() && (extension == ".tmp" || extension == ".old")) leftovers.push_back(entry.path());
  }
  for (const auto& path : leftovers) {
    const fs::path whole = path.parent_path() / path.stem();
    if (path.extension() == ".old" && !fs::exists(whole)) {
      spdlog::info("renaming {} back to {}: a second save of it was interrupted", path.string(), whole.string());
      fs::rename(path, whole);
    } else {
      spdlog::info("removing {}, left by an earlier save", path.string());
      fs::remove_all(path);
    }
  }
  io::serialization::fsync_directory(root);
}

// Tests make saves slow on purpose to kill a rank in the middle of one.
void test_delay() {
  if (const char* ms = std::getenv("MEGACPP_TEST_SAVE_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(ms)));
  }
}

// Tests kill the process at a named step of publish_checkpoint (MEGACPP_TEST_KILL_AT=step), as
// a power cut or `kill -9` would.
void test_kill_at(const char* step) {
  const char* wanted = std::getenv("MEGACPP_TEST_KILL_AT");
  if (wanted && std::string(wanted) == step) std::raise(SIGKILL);
}

}  // namespace

void SaveJob::add_unsharded(const std::string& key, io::serialization::PyValue value) {
  format.add_unsharded(items, common, key, std::move(value));
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
  const std::string final_dir = io::checkpoint::checkpoint_dir(job.root, job.iteration);
  const std::string tmp_dir = final_dir + ".tmp";
  if (rank_ == 0) {
    try {
      tidy_save_directory(job.root);
      fs::create_directories(tmp_dir);
      if (world_size_ > 1) store_->set(prefix + "ready", parallel::store_bytes("ok"));
    } catch (const std::exception& e) {
      if (world_size_ > 1) store_->set(prefix + "ready", parallel::store_bytes(std::string("error: ") + e.what()));
      throw std::runtime_error("--save: cannot create " + tmp_dir + ": " + e.what());
    }
  } else {
    const std::string ready = parallel::store_text(store_->get(prefix + "ready"));
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

// A failed save removes its directory (rank 0): nothing half-written stays behind, and the
// previous checkpoint stays the latest. Every rank learns of a failure through the store.
void CheckpointSaver::write(const SaveJob& job, const std::string& tmp_dir, const std::string& prefix) {
  const std::string part_key = prefix + "part/" + std::to_string(rank_);
  const std::string done_key = prefix + "done";
  io::checkpoint::DcpMetadata part;
  try {
    part = write_rank_file(tmp_dir, rank_, job.items);
    test_delay();
    if (world_size_ == 1) {  // a process on its own may have no store at all
      publish_checkpoint(job, tmp_dir, part);
      return;
    }
    store_->set(part_key, parallel::store_bytes(part.serialize()));
    if (rank_ == 0) {
      collect_and_publish(job, tmp_dir, prefix);
      store_->set(done_key, parallel::store_bytes("ok"));
      return;
    }
  } catch (const std::exception& e) {
    if (world_size_ > 1) store_->set(rank_ == 0 ? done_key : part_key, parallel::store_bytes(kFailed + e.what()));
    if (rank_ == 0) remove_failed_save(tmp_dir);
    throw;
  }
  const std::string done = parallel::store_text(store_->get(done_key));
  if (done != "ok") {
    throw std::runtime_error("checkpoint at iteration " + std::to_string(job.iteration) + " failed: " + done.substr(kFailed.size()));
  }
}

void CheckpointSaver::collect_and_publish(const SaveJob& job, const std::string& tmp_dir, const std::string& prefix) {
  io::checkpoint::DcpMetadata merged;
  for (int r = 0; r < world_size_; ++r) {
    const std::string key = prefix + "part/" + std::to_string(r);
    const std::string text = parallel::store_text(store_->get(key));
    if (text.rfind(kFailed, 0) == 0) {
      throw std::runtime_error("rank " + std::to_string(r) + " could not write its part: " + text.substr(kFailed.size()));
    }
    merge_metadata(merged, io::checkpoint::DcpMetadata::parse(text, "rank " + std::to_string(r) + "'s checkpoint index"));
    store_->deleteKey(key);
  }
  publish_checkpoint(job, tmp_dir, merged);
}

// Note [Re-saving an iteration]
// The tracker names an iteration, not a directory, so a second save of iteration N (after
// --ckpt-step, say) has to swap iter_N itself: iter_N -> iter_N.old, iter_N.tmp -> iter_N, then
// iter_N.old is removed. A kill between the two renames leaves no iter_N; CheckpointReader
// then loads iter_N.old, the copy the tracker named when it was written, and says so. Each
// rename is made durable (the directory fsync'ed) before the next step.
void publish_checkpoint(const SaveJob& job, const std::string& tmp_dir, const io::checkpoint::DcpMetadata& index) {
  write_metadata_file(tmp_dir, index);
  job.format.write_index_files(job.common, tmp_dir);
  io::checkpoint::write_index_checksums(tmp_dir, job.iteration);
  io::serialization::fsync_directory(tmp_dir);
  const std::string final_dir = io::checkpoint::checkpoint_dir(job.root, job.iteration);
  if (fs::exists(final_dir)) {
    const std::string old = io::checkpoint::previous_copy_dir(final_dir);
    fs::remove_all(old);
    fs::rename(final_dir, old);
    io::serialization::fsync_directory(job.root);
    test_kill_at("after-rename-to-old");  // iter_N.old and iter_N.tmp, no iter_N
    fs::rename(tmp_dir, final_dir);
    io::serialization::fsync_directory(job.root);
    test_kill_at("after-rename-into-place");  // iter_N and iter_N.old
    fs::remove_all(old);
  } else {
    fs::rename(tmp_dir, final_dir);
    io::serialization::fsync_directory(job.root);
  }
  io::checkpoint::write_tracker(job.root, job.iteration);
  spdlog::info("saved checkpoint at iteration {} to {} ({})", job.iteration, final_dir, job.format.name());
}

}  // namespace megacpp::checkpoint
