// What the trainer needs of a model: token ids in, logits out, shardable and initializable.
#pragma once

#include "models/fsdp2_mixin.h"
#include "models/weight_init_mixin.h"
#include "parallel/module.h"

namespace megacpp::models {

class LanguageModel : public parallel::Module, public FSDP2Mixin, public WeightInitMixin {
 public:
  using parallel::Module::Module;
  // forward: ids [batch, seq] int64 -> logits [batch, seq, vocab]
  virtual int64_t vocab_size() const = 0;
  virtual double flops_per_token(int64_t seq_length) const = 0;
};

}  // namespace megacpp::models
