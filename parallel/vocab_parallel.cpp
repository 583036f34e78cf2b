#include "parallel/vocab_parallel.h"

#include <memory>

#include <torch/torch.h>

#include "parallel/collectives.h"
#include "parallel/group_capsule.h"
#include "parallel/sequence_parallel.h"
#include "parallel/tensor_parallel.h"

namespace megacpp::parallel {
namespace {

thread_local bool logits_kept_split = false;

// The rows [first, first + count) of the vocabulary that a rank of `group` holds of `vocab`.
struct VocabSlice {
  int64_t first, count;
};
VocabSlice vocab_slice(int64_t vocab, const Group& group) {
  const int64_t count = vocab / group.size();
  return {group.rank * count, count};
}

// All-gathered along the last dimension; backward: this rank's slice of the gradient.
struct GatheredLogits : torch::autograd::Function<GatheredLogits> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& local,
                            const c10::intrusive_ptr<GroupHolder>& holder) {
    ctx->saved_data["group"] = c10::IValue::make_capsule(holder);
    return all_gather_along(holder->group, local, local.dim() - 1);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    const auto holder = c10::static_intrusive_pointer_cast<GroupHolder>(ctx->saved_data["group"].toCapsule());
    const at::Tensor& grad = grads[0];
    const VocabSlice slice = vocab_slice(grad.size(-1), holder->group);
    return {grad.narrow(-1, slice.first, slice.count).contiguous(), at::Tensor()};
  }
};

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits, const at::Tensor& labels,
                            const c10::intrusive_ptr<GroupHolder>& holder) {
    const auto wide = logits.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    at::Tensor grad;
    const at::Tensor loss = vocab_parallel_cross_entropy_with_grad(logits.to(wide), labels, holder->group, &grad);
    ctx->save_for_backward({grad});
    ctx->saved_data["dtype"] = logits.scalar_type();
    return loss;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::tensor_list grads) {
    at::Tensor grad = ctx->get_saved_variables()[0];
    grad = grad * grads[0].to(grad.scalar_type()).unsqueeze(1);
    return {grad.to(ctx->saved_data["dtype"].toScalarType()), at::Tensor(), at::Tensor()};
  }
};

thread_local const Group* model_vocab_group = nullptr;

// `group` is the thread's vocabulary group while one lives; the one before it after, also when the
// forward it spans throws.
class VocabGroupScope {
 public:
  explicit VocabGroupScope(const Group* group) : before_(model_vocab_group) { model_vocab_group = group; }
  ~VocabGroupScope() { model_vocab_group = before_; }
  VocabGroupScope(const VocabGroupScope&) = delete;
  VocabGroupScope& operator=(const VocabGroupScope&) = delete;

 private:
  const Group* before_;
};

}  // namespace

void split_vocab_embedding(Module& embedding, const std::string& slot, const Group& group, bool scatter_sequence) {
  const int64_t vocab = embedding.param_slot(slot).member->size(0);
  split_parameter(embedding, slot, 0, group);
  const VocabSlice slice = vocab_slice(vocab, group);
  // The ids not this rank's, from the pre-hook to the post-hook of the same call.
  auto others = std::make_shared<at::Tensor>();
  embedding.add_pre_hook([slice, others](Module&, const Module::Tensors& inputs) {
    TORCH_CHECK(inputs.size() == 1, "vocabulary parallelism: the embedding takes one tensor of ids, got ", inputs.size());
    const at::Tensor& ids = inputs[0];
    *others = ids.lt(slice.first).logical_or(ids.ge(slice.first + slice.count));
    return Module::Tensors{(ids - slice.first).masked_fill(*others, 0)};
  });
  embedding.add_post_hook([others](Module&, const Module::Tensors&, const Module::Tensors& outputs) {
    TORCH_CHECK(others->defined(), "vocabulary parallelism: the embedding's output without its ids");
    const Module::Tensors out{outputs.at(0).masked_fill(others->unsqueeze(-1), 0)};
    *others = at::Tensor();
    return out;
  });
  // Then (post-hooks run in order) the group's sum of the vectors.
  if (scatter_sequence) return reduce_scatter_output_sequence(embedding, group);
  all_reduce_output(embedding, group);
}

void split_model_vocabulary(Module& model, const Group& group) {
  auto held = std::make_shared<Group>(group);
  model.add_forward_wrapper([held](const Module::Forward& forward, const Module::Tensors& inputs) {
    const VocabGroupScope scope(held.get());
    return forward(inputs);
  });
  model.add_post_hook([held](Module&, const Module::Tensors&, const Module::Tensors& outputs) {
    if (logits_kept_split || outputs.empty() || !outputs[0].defined() || outputs[0].dim() == 0) return outputs;
    Module::Tensors out = outputs;
    out[0] = GatheredLogits::apply(outputs[0], c10::make_intrusive<GroupHolder>(*held));
    return out;
  });
}

KeepLogitsSplit::KeepLogitsSplit() : before_(logits_kept_split) { logits_kept_split = true; }
KeepLogitsSplit::~KeepLogitsSplit() { logits_kept_split = before_; }

const Group* vocab_parallel_group() { return model_vocab_group; }

at::Tensor vocab_parallel_cross_entropy_with_grad(const at::Tensor& logits, const at::Tensor& labels, const Group& group,
                                                  at::Tensor* grad) {
  TORCH_CHECK(logits.scalar_type() == torch::kFloat || logits.scalar_type() == torch::kDouble,
              "vocab_parallel_cross_entropy_with_grad: fp32 or fp64 logits expected, got ", logits.scalar_type());
  at::Tensor max = std::get<0>(logits.max(-1)).contiguous();
  all_reduce(group, max, ReduceOp::kMax).wait();
  const at::Tensor x = logits - max.unsqueeze(1);
  at::Tensor exp = x.exp();
  const VocabSlice slice = vocab_slice(x.size(1) * group.size(), group);
  const at::Tensor mine = labels.ge(slice.first).logical_and(labels.lt(slice.first + slice.count));
  const at::Tensor local = (labels - slice.first).masked_fill(mine.logical_not(), 0);
  const at::Tensor target = x.gather(1, local.unsqueeze(1)).squeeze(1).masked_fill(mine.logical_not(), 0);
  at::Tensor sums = torch::stack({exp.sum(-1), target});  // [2, tokens]: one all-reduce for both
  all_reduce(group, sums, ReduceOp::kSum).wait();
  if (grad) {  // this rank's slice of the softmax, less the one-hot
    *grad = exp.div_(sums[0].unsqueeze(1));
    grad->scatter_add_(1, local.unsqueeze(1), mine.to(grad->scalar_type()).neg().unsqueeze(1));
  }
  return sums[0].log() - sums[1];
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& labels, const Group& group) {
  TORCH_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
              "vocab_parallel_cross_entropy: logits [tokens, vocab / p] and labels [tokens] expected, got ", logits.sizes(),
              " and ", labels.sizes());
  return VocabParallelCrossEntropy::apply(logits, labels.to(torch::kLong), c10::make_intrusive<GroupHolder>(group));
}

}  // namespace megacpp::parallel
