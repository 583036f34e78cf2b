#include "parallel/fsdp/group_reads.h"

#include <regex>
#include <set>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include <c10/util/StringUtil.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

namespace megacpp::parallel::fsdp {
namespace {

// Whether the modules read `param`'s shard now (its group is not computing).
bool reads_shard_now(const FSDPParam& param) {
  const FSDPParam::Use& use = param.uses().front();
  for (const auto& slot : use.module->param_slots()) {
    if (slot.name == use.name) return slot.member->unsafeGetTensorImpl() == param.sharded().unsafeGetTensorImpl();
  }
  return false;
}

std::string rule(const GroupParam& read) {
  const std::string group = read.group.empty() ? "the root's" : "'" + read.group + "'";
  return "parameter '" + read.path + "' was read while its FSDP group (" + group + ") was not computing, so as this "
         "rank's shard " + c10::str(read.param->sharded().sizes()) + " of " + c10::str(c10::IntArrayRef(read.param->layout().shape)) +
         ": a module may read only the parameters of its own FSDP group or of a group around it (Note [Reading another "
         "group's parameter] in parallel/fsdp/group_reads.h). A module that reads another's parameter, as an output "
         "layer tied to the embedding does, must share the owner's group: do not wrap the owner apart from its reader "
         "(sub_modules_to_wrap), or give the reader a parameter of its own";
}

}  // namespace

void check_no_sharded_reads(const std::vector<GroupParam>& params, const Module::Tensors& outputs) {
  std::vector<torch::autograd::Node*> pending;
  for (const auto& t : outputs) {
    if (t.defined() && t.grad_fn()) pending.push_back(t.grad_fn().get());
  }
  std::unordered_set<torch::autograd::Node*> seen;
  std::unordered_set<const FSDPParam*> read;
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (!seen.insert(node).second) continue;
    if (auto* leaf = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      if (const FSDPParam* p = find_fsdp_param(leaf->variable)) read.insert(p);
      continue;
    }
    for (const auto& edge : node->next_edges()) {
      if (edge.function) pending.push_back(edge.function.get());
    }
  }
  if (read.empty()) return;
  for (const GroupParam& p : params) {
    if (read.count(p.param)) throw std::invalid_argument("fully_shard: " + rule(p));
  }
}

std::string explain_sharded_read(const std::vector<GroupParam>& params, const std::string& error) {
  // Only an error about sizes, and only shards that differ from the whole in rows; each shard
  // shape once and at most three, since many parameters of a model share one.
  if (error.find("size") == std::string::npos && error.find("shape") == std::string::npos) return "";
  std::set<int64_t> sizes;
  static const std::regex number("\\b[0-9]+\\b");
  for (std::sregex_iterator it(error.begin(), error.end(), number), end; it != end; ++it) sizes.insert(std::stoll(it->str()));
  std::set<std::vector<int64_t>> shapes;
  std::string explained;
  for (const GroupParam& p : params) {
    const int64_t rows = p.param->sharded().size(0);
    if (rows < 2 || rows == p.param->layout().rows || !sizes.count(rows) || !reads_shard_now(*p.param)) continue;
    if (!shapes.insert(p.param->sharded().sizes().vec()).second || shapes.size() > 3) continue;
    explained += "\nthe sizes may be a shard's: " + rule(p);
  }
  return explained;
}

}  // namespace megacpp::parallel::fsdp
