#include "training/data/batch_prefetcher.h"

#include <algorithm>

namespace megacpp::training::data {

BatchPrefetcher::BatchPrefetcher(const io::data::SampleSource& source, BatchSlice slice, const settings::BatchRampup& batches,
                                 int64_t vocab_size, int workers, DocumentBoundaries documents)
    : source_(source), slice_(slice), batches_(batches), vocab_size_(vocab_size), workers_(workers), documents_(documents) {}

BatchPrefetcher::~BatchPrefetcher() {
  if (next_.valid()) next_.wait();  // a worker still reading must not outlive the source
}

std::vector<MicroBatch> BatchPrefetcher::take(int64_t consumed) {
  std::vector<MicroBatch> batches;
  if (next_.valid() && next_consumed_ == consumed) {
    batches = next_.get();
  } else {
    if (next_.valid()) next_.wait();  // read ahead for another position (a resumed run): dropped
    batches = read(consumed);
  }
  next_ = {};
  const int64_t following = consumed + batches_.batch_at(consumed);
  if (workers_ > 0 && following + batches_.batch_at(following) <= source_.size()) {
    next_consumed_ = following;
    next_ = std::async(std::launch::async, [this, following] { return read(following); });
  }
  return batches;
}

std::vector<MicroBatch> BatchPrefetcher::read(int64_t consumed) const {
  const int64_t accumulation = batches_.accumulation_at(consumed);
  std::vector<MicroBatch> batches(static_cast<size_t>(accumulation));
  auto read_some = [&](int64_t first, int64_t step) {
    for (int64_t m = first; m < accumulation; m += step) batches[m] = load_micro_batch(source_, consumed, m, slice_, vocab_size_, documents_);
  };
  const int64_t threads = std::min<int64_t>(std::max(workers_, 1), accumulation);
  std::vector<std::future<void>> others;
  for (int64_t t = 1; t < threads; ++t) others.push_back(std::async(std::launch::async, read_some, t, threads));
  read_some(0, threads);
  for (auto& other : others) other.get();
  return batches;
}

}  // namespace megacpp::training::data
