// How a language model splits its layers over tensor-parallel ranks (Note [Tensor parallelism]
// in parallel/tensor_parallel.h), applied to the layers the model is built from, as Megatron
// splits its transformer layer.
#pragma once

#include <string>

#include "models/language_model.h"
#include "parallel/group.h"

namespace megacpp::models {

// Splits the models::Linear layers of the model's FSDP2Mixin::tensor_parallel_plan over `group`
// (size > 1), or without a plan every models::Attention and dense models::SwiGLUMLP (experts
// stay whole on each rank): q/k/v and gate/up column-parallel (whole heads and query groups per
// rank), o_proj and down_proj row-parallel, one all-reduce of the block's input gradient in
// backward and of its output in forward; Qwen3's q/k norms replicated with gradients summed over the group. The token
// embedding and the output layer (or the embedding tied to it) are split by vocabulary rows and
// the model's logits gathered unless the caller keeps them split (Note [Vocabulary parallelism]
// in parallel/vocab_parallel.h); the other norms stay replicated. Throws std::invalid_argument
// starting with `setting` (how the size was given, e.g. "--tensor-model-parallel-size 2") when
// the model does not say it can be split (FSDP2Mixin::tensor_parallel_refusal), or when heads,
// query groups, the FFN or the padded vocabulary do not divide by the size (naming them). LoRA
// adapters are split like their base layer. With `sequence_parallel` (Megatron's
// --sequence-parallel, Note [Sequence parallelism] in parallel/sequence_parallel.h) the blocks
// all-gather their input and reduce-scatter their output along the sequence, which is sliced
// after the model's embeddings and gathered after its final norm
// (FSDP2Mixin::sequence_parallel_region; refused for a model that does not name them), and
// mixture-of-experts layers run on the whole sequences (parallel::whole_sequence_inside).
void apply_tensor_parallel(LanguageModel& model, const parallel::Group& group, const std::string& setting,
                           bool sequence_parallel = false);

}  // namespace megacpp::models
