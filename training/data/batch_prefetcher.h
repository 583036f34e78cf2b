// --num-workers: while an iteration computes, worker threads read the training micro-batches of
// the next one (what Megatron's DataLoader workers do). With 0 workers each iteration reads its
// own when it starts. The batches are the same either way.
#pragma once

#include <cstdint>
#include <future>
#include <vector>

#include <ATen/ATen.h>

#include "io/data/sample_source.h"
#include "settings/batch_rampup.h"
#include "training/data/training_data.h"

namespace megacpp::training::data {

class BatchPrefetcher {
 public:
  // Nothing past the source's last sample is read ahead. `source` and `batches` (each
  // iteration's global batch) must outlive this.
  BatchPrefetcher(const io::data::SampleSource& source, BatchSlice slice, const settings::BatchRampup& batches, int64_t vocab_size,
                  int workers, DocumentBoundaries documents = {});
  ~BatchPrefetcher();

  // The micro-batches of the iteration that starts at sample `consumed`; starts reading the next
  // iteration's. Errors of a worker (a token outside the vocabulary) are thrown here.
  std::vector<MicroBatch> take(int64_t consumed);

 private:
  std::vector<MicroBatch> read(int64_t consumed) const;  // on up to `workers_` threads

  const io::data::SampleSource& source_;
  BatchSlice slice_;
  const settings::BatchRampup& batches_;
  int64_t vocab_size_;
  int workers_;
  DocumentBoundaries documents_;
  std::future<std::vector<MicroBatch>> next_;
  int64_t next_consumed_ = -1;
};

}  // namespace megacpp::training::data
