#include "rl/weight_broadcast.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <stdexcept>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/object_collectives.h"

namespace megacpp::rl {
namespace {

constexpr int64_t kAlignment = 8;

int64_t round_up(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
int64_t chunk_capacity(const WeightBroadcastOptions& options) { return std::max(kAlignment, options.chunk_bytes / kAlignment * kAlignment); }

void lay_out(std::vector<SentParameter>& stream) {
  int64_t offset = 0;
  for (SentParameter& p : stream) {
    p.offset = round_up(offset);
    offset = p.offset + p.bytes();
  }
}

int64_t stream_bytes(const std::vector<SentParameter>& stream) { return stream.empty() ? 0 : stream.back().offset + stream.back().bytes(); }

// The weights the rollout takes (rl::rollout_weights: LoRA's adapters merged), a line each.
std::string encode(torch::nn::Module& trainer) {
  std::ostringstream text;
  for (const RolloutWeight& w : rollout_weights(trainer)) {
    text << w.name << '\t' << c10::toString(w.dtype) << '\t';
    for (size_t d = 0; d < w.shape.size(); ++d) text << (d ? "," : "") << w.shape[d];
    text << '\n';
  }
  return text.str();
}

c10::ScalarType dtype_named(const std::string& name) {
  for (c10::ScalarType t : {c10::kFloat, c10::kDouble, c10::kHalf, c10::kBFloat16}) {
    if (name == c10::toString(t)) return t;
  }
  throw std::invalid_argument("weight sync: the trainer sends a parameter of dtype " + name + ", which is not floating point");
}

std::vector<SentParameter> decode(const std::string& text) {
  std::vector<SentParameter> stream;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string dtype, dims, dim;
    SentParameter p;
    std::getline(fields, p.name, '\t');
    std::getline(fields, dtype, '\t');
    std::getline(fields, dims);
    p.dtype = dtype_named(dtype);
    std::istringstream sizes(dims);
    while (std::getline(sizes, dim, ',')) p.shape.push_back(std::stoll(dim));
    stream.push_back(std::move(p));
  }
  lay_out(stream);
  return stream;
}

// "" when `rollout` can load every sent parameter and has no other; else what is wrong.
std::string refusal(const std::vector<SentParameter>& stream, torch::nn::Module& rollout) {
  std::vector<RolloutWeight> weights;
  for (const SentParameter& p : stream) weights.push_back({p.name, p.shape, p.dtype});
  try {
    check_rollout_model(weights, rollout);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  const auto params = rollout.named_parameters(/*recurse=*/true);
  for (const SentParameter& p : stream) {
    const at::Tensor& target = params[p.name];
    if (!target.is_floating_point() || !target.is_contiguous()) return "parameter " + p.name + " of the rollout model is not a contiguous floating-point tensor";
  }
  return "";
}

// Collective over every rank of the job: the manifest goes to the workers, their verdicts come
// back, and every rank learns them. Returns the stream's layout (on the sync group's members).
std::vector<SentParameter> handshake(const RolloutGroups& groups, torch::nn::Module* trainer, torch::nn::Module* rollout,
                                     const c10::Device& device) {
  std::vector<SentParameter> stream;
  std::string verdict;
  if (groups.sync.contains_me()) {
    const std::string manifest = parallel::broadcast_text(groups.sync, trainer ? encode(*trainer) : "", 0, device);
    std::string mine;
    try {
      stream = decode(manifest);
      if (rollout) mine = refusal(stream, *rollout);
    } catch (const std::exception& e) {
      mine = e.what();
    }
    const std::vector<std::string> verdicts = parallel::all_gather_texts(groups.sync, mine, device);
    for (int r = 1; r < groups.sync.size(); ++r) {
      if (!verdicts[r].empty() && verdict.empty()) verdict = "rollout worker rank " + std::to_string(groups.sync.global_ranks[r]) + " refused the trained model: " + verdicts[r];
    }
  }
  if (groups.trainers.contains_me()) verdict = parallel::broadcast_text(groups.trainers, verdict, 0, device);
  if (!verdict.empty()) throw std::invalid_argument("weight sync: " + verdict);
  return stream;
}

std::string where(int64_t chunk, int64_t chunks, const std::string& parameter, bool acknowledging) {
  if (acknowledging) return "at the end of the sync (the workers' acknowledgment)";
  return "at chunk " + std::to_string(chunk + 1) + " of " + std::to_string(chunks) + " (parameter " + parameter + ")";
}

int64_t chunk_count(int64_t total, int64_t capacity) { return (total + capacity - 1) / capacity; }

void acknowledge(const parallel::Group& sync, const c10::Device& device) {
  at::Tensor one = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  parallel::all_reduce(sync, one, parallel::ReduceOp::kSum).wait();
}

}  // namespace

int64_t SentParameter::bytes() const { return c10::multiply_integers(shape) * static_cast<int64_t>(c10::elementSize(dtype)); }

namespace {

// The stream cut into chunks: chunk k holds bytes [k * capacity, min((k + 1) * capacity, total)).
// The sender fills a chunk, then broadcasts it; a receiver receives a chunk, then reads it.
class ChunkedStream {
 public:
  ChunkedStream(const parallel::Group& sync, int64_t total, int64_t capacity, const c10::Device& device)
      : sync_(sync), total_(total), capacity_(capacity),
        buffer_(torch::empty({std::min(total, capacity)}, torch::TensorOptions().dtype(torch::kUInt8).device(device))) {}

  int64_t chunks() const { return chunk_count(total_, capacity_); }
  int64_t current() const { return current_; }  // the chunk in the buffer (-1 before the first)

  // Sender: `bytes` (uint8) at stream offset `offset`; each chunk is broadcast once filled.
  void put(const at::Tensor& bytes, int64_t offset) {
    for (int64_t done = 0; done < bytes.numel();) {
      const int64_t pos = offset + done, n = std::min(capacity_ - pos % capacity_, bytes.numel() - done);
      while (current_ < pos / capacity_) {
        if (current_ >= 0) move_current();
        ++current_;
      }
      buffer_.narrow(0, pos % capacity_, n).copy_(bytes.narrow(0, done, n));
      done += n;
    }
  }
  // Sender: broadcasts the chunks not yet sent (the last, partly filled one).
  void finish_sending() {
    for (current_ = std::max<int64_t>(current_, 0); current_ < chunks(); ++current_) move_current();
  }

  // Receiver: the stream's bytes [offset, offset + length) of `dtype` into `target` (flat).
  void get(const at::Tensor& target, c10::ScalarType dtype, int64_t offset, int64_t length, const ChunkObserver& on_chunk) {
    const int64_t element = static_cast<int64_t>(c10::elementSize(dtype));
    for (int64_t done = 0; done < length;) {
      const int64_t pos = offset + done, n = std::min(capacity_ - pos % capacity_, length - done);
      while (current_ < pos / capacity_) receive_next(on_chunk);
      target.narrow(0, done / element, n / element).copy_(buffer_.narrow(0, pos % capacity_, n).view(dtype));
      done += n;
    }
  }
  // Receiver: receives the chunks not yet received (none unless the stream ends in padding).
  void finish_receiving(const ChunkObserver& on_chunk) {
    while (current_ + 1 < chunks()) receive_next(on_chunk);
  }

 private:
  // Broadcasts chunk current_ from the sender into every receiver's buffer.
  void move_current() {
    const int64_t length = std::min(capacity_, total_ - current_ * capacity_);
    parallel::broadcast(sync_, buffer_.narrow(0, 0, length), 0).wait();
  }
  void receive_next(const ChunkObserver& on_chunk) {
    ++current_;
    move_current();
    if (on_chunk) on_chunk(current_, chunks());
  }

  const parallel::Group& sync_;
  int64_t total_, capacity_;
  at::Tensor buffer_;
  int64_t current_ = -1;
};

}  // namespace

WeightSender::WeightSender(torch::nn::Module& trainer, const RolloutGroups& groups, const WeightBroadcastOptions& options)
    : trainer_(trainer), groups_(groups), options_(options) {
  if (!groups.is_trainer()) throw std::invalid_argument("weight sync: a WeightSender on rollout worker rank " + std::to_string(groups.workers.global_ranks.at(groups.workers.rank)));
  stream_ = handshake(groups_, &trainer_, nullptr, options_.device);
}

WeightSyncStats WeightSender::send() {
  const auto start = std::chrono::steady_clock::now();
  const bool sender = groups_.sync.contains_me();
  WeightSyncStats stats;
  torch::NoGradGuard no_grad;
  ChunkedStream chunks(groups_.sync, stream_bytes(stream_), chunk_capacity(options_), options_.device);
  std::string failure, parameter;
  size_t i = 0;
  for_each_rollout_weight(trainer_, stats, [&](const std::string& name, const at::Tensor& full) {
    stats.bytes += full.numel() * static_cast<int64_t>(full.element_size());
    if (!sender || !failure.empty()) return;
    const SentParameter& sent = stream_.at(i++);
    try {
      parameter = sent.name;
      if (sent.name != name || full.scalar_type() != sent.dtype) throw std::logic_error("the parameter changed since the handshake");
      chunks.put(full.contiguous().view({-1}).view(torch::kUInt8), sent.offset);
    } catch (const std::exception& e) {
      failure = where(chunks.current(), chunks.chunks(), parameter, false) + ": " + e.what();
    }
  });
  bool acknowledging = false;
  if (sender && failure.empty()) {
    try {
      chunks.finish_sending();
      acknowledging = true;
      acknowledge(groups_.sync, options_.device);
    } catch (const std::exception& e) {
      failure = where(chunks.current(), chunks.chunks(), parameter, acknowledging) + ": " + e.what();
    }
  }
  if (sender && !failure.empty()) {
    failure = "weight sync to the rollout workers (rank(s) " + parallel::rank_list(groups_.workers.global_ranks) + ") failed " + failure;
  }
  failure = parallel::broadcast_text(groups_.trainers, failure, 0, options_.device);
  if (!failure.empty()) throw std::runtime_error(failure);
  stats.chunks = sender ? chunks.chunks() : 0;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

WeightReceiver::WeightReceiver(torch::nn::Module& rollout, const RolloutGroups& groups, const WeightBroadcastOptions& options)
    : rollout_(rollout), groups_(groups), options_(options) {
  if (!groups.is_worker()) throw std::invalid_argument("weight sync: a WeightReceiver on trainer rank " + std::to_string(groups.trainers.global_ranks.at(groups.trainers.rank)));
  stream_ = handshake(groups_, nullptr, &rollout_, options_.device);
}

WeightSyncStats WeightReceiver::receive(const ChunkObserver& on_chunk) {
  const auto start = std::chrono::steady_clock::now();
  WeightSyncStats stats;
  torch::NoGradGuard no_grad;
  ChunkedStream chunks(groups_.sync, stream_bytes(stream_), chunk_capacity(options_), options_.device);
  auto params = rollout_.named_parameters(/*recurse=*/true);
  std::string parameter;
  bool acknowledging = false;
  try {
    for (const SentParameter& sent : stream_) {
      parameter = sent.name;
      chunks.get(params[sent.name].view({-1}), sent.dtype, sent.offset, sent.bytes(), on_chunk);
      stats.tensors += 1;
      stats.bytes += sent.bytes();
    }
    chunks.finish_receiving(on_chunk);
    acknowledging = true;
    acknowledge(groups_.sync, options_.device);
  } catch (const std::exception& e) {
    throw std::runtime_error("weight sync from trainer rank 0 to rollout worker rank " + std::to_string(groups_.sync.global_ranks.at(groups_.sync.rank)) +
                             " failed " + where(chunks.current(), chunks.chunks(), parameter, acknowledging) + ": " + e.what());
  }
  stats.chunks = chunks.chunks();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

}  // namespace megacpp::rl
