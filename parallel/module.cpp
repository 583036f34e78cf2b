#include "parallel/module.h"

#include <stdexcept>

namespace megacpp::parallel {

at::Tensor Module::operator()(const at::Tensor& input) {
  at::Tensor x = input;
  for (auto& hook : pre_hooks_) x = hook(*this, x);
  at::Tensor out;
  if (forward_wrapper_) {
    out = forward_wrapper_([this](const at::Tensor& in) { return forward(in); }, x);
  } else {
    out = forward(x);
  }
  for (auto& hook : post_hooks_) out = hook(*this, x, out);
  return out;
}

void Module::register_slot(const std::string& name, at::Tensor& member, at::Tensor value,
                           bool requires_grad) {
  member = register_parameter(name, std::move(value), requires_grad);
  slots_.push_back({name, &member});
}

Module::ParamSlot& Module::slot(const std::string& name) {
  for (auto& s : slots_) {
    if (s.name == name) return s;
  }
  throw std::out_of_range("module '" + this->name() + "' has no parameter slot '" + name + "'");
}

void Module::replace_parameter(const std::string& name, const at::Tensor& value) {
  *slot(name).member = value;
  parameters_[name] = value;
}

void Module::set_compute_tensor(const std::string& name, const at::Tensor& value) {
  *slot(name).member = value;
}

std::vector<std::pair<std::string, Module*>> named_hookable_modules(torch::nn::Module& root) {
  std::vector<std::pair<std::string, Module*>> out;
  for (auto& item : root.named_modules(/*name_prefix=*/"", /*include_self=*/true)) {
    if (auto* m = dynamic_cast<Module*>(item.value().get())) out.emplace_back(item.key(), m);
  }
  return out;
}

}  // namespace megacpp::parallel
