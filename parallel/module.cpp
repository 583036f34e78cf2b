#include "parallel/module.h"

#include <algorithm>
#include <new>
#include <stdexcept>

#include <c10/util/Exception.h>

#include "parallel/forward_context.h"

namespace megacpp::parallel {

Module::Tensors Module::operator()(const Tensors& inputs) {
  const ForwardScope scope(this);  // Note [Out of memory in a forward]
  try {
    Tensors x = inputs;
    for (auto& hook : pre_hooks_) x = hook(*this, x);
    Tensors out;
    if (forward_wrapper_) {
      out = forward_wrapper_([this](const Tensors& in) { return forward_tensors(in); }, x);
    } else {
      out = forward_tensors(x);
    }
    for (auto& hook : post_hooks_) out = hook(*this, x, out);
    return out;
  } catch (const ModuleOutOfMemory&) {
    throw;  // an inner module named it
  } catch (const c10::Error& e) {
    if (!is_allocation_failure(e.what_without_backtrace())) throw;
    throw ModuleOutOfMemory(scope.describe_failure(e.what_without_backtrace()));
  } catch (const std::bad_alloc& e) {
    throw ModuleOutOfMemory(scope.describe_failure(std::string("std::bad_alloc: ") + e.what()));
  }
}

void Module::add_forward_wrapper(ForwardWrapper wrapper) {
  if (!forward_wrapper_) {
    forward_wrapper_ = std::move(wrapper);
    return;
  }
  // By value: a recomputing wrapper keeps the forward it was given until backward.
  forward_wrapper_ = [outer = std::move(wrapper), inner = std::move(forward_wrapper_)](const Forward& forward,
                                                                                       const Tensors& inputs) {
    return outer([inner, forward](const Tensors& in) { return inner(forward, in); }, inputs);
  };
}

at::Tensor Module::operator()(const at::Tensor& input) {
  Tensors out = (*this)(Tensors{input});
  if (out.size() != 1) {
    throw std::invalid_argument("module '" + name() + "' returns " + std::to_string(out.size()) +
                                " tensors; call it with a list of inputs to get them all");
  }
  return out.front();
}

Module::Tensors Module::forward_tensors(const Tensors& inputs) {
  if (inputs.size() != 1) {
    throw std::invalid_argument("module '" + name() + "' takes one tensor, got " + std::to_string(inputs.size()));
  }
  return {forward(inputs.front())};
}

at::Tensor Module::forward(const at::Tensor&) {
  throw std::logic_error("module '" + name() + "' overrides neither forward nor forward_tensors");
}

void Module::register_slot(const std::string& name, at::Tensor& member, at::Tensor value,
                           bool requires_grad) {
  member = register_parameter(name, std::move(value), requires_grad);
  slots_.push_back({name, &member});
}

const Module::ParamSlot& Module::param_slot(const std::string& name) const {
  for (const auto& s : slots_) {
    if (s.name == name) return s;
  }
  throw std::out_of_range("module '" + this->name() + "' has no parameter slot '" + name + "'");
}

void Module::replace_parameter(const std::string& name, const at::Tensor& value) {
  *param_slot(name).member = value;
  parameters_[name] = value;
}

void Module::set_compute_tensor(const std::string& name, const at::Tensor& value) {
  *param_slot(name).member = value;
}

std::vector<std::pair<std::string, Module*>> named_hookable_modules(torch::nn::Module& root) {
  std::vector<std::pair<std::string, Module*>> out;
  for (auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    if (auto* m = dynamic_cast<Module*>(item.value().get())) out.emplace_back(item.key(), m);
  }
  return out;
}

void require_parameters_in_slots(torch::nn::Module& root) {
  for (auto& [path, module] : named_hookable_modules(root)) {
    const auto& slots = module->param_slots();
    for (auto& item : module->named_parameters(/*recurse=*/false)) {
      const std::string& name = item.key();
      if (std::any_of(slots.begin(), slots.end(), [&](const Module::ParamSlot& s) { return s.name == name; })) continue;
      const std::string where = (path.empty() ? "the root module" : "module '" + path + "'") + " (" + module->name() + ")";
      throw std::invalid_argument(where + " holds parameter '" + name + "' outside a slot (torch's register_parameter): a "
                                  "megacpp parallel::Module keeps each parameter in a slot, which FSDP points at the gathered "
                                  "tensor during forward; register it with register_slot(\"" + name + "\", member, tensor) and "
                                  "read the member in forward");
    }
  }
}

}  // namespace megacpp::parallel
