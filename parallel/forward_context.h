// Note [Out of memory in a forward]
// An allocation that fails in a module's forward ("can't allocate memory", "out of memory",
// std::bad_alloc) is rethrown by the innermost Module call it happened in as ModuleOutOfMemory,
// naming that module by its path from the outermost module being called ("layers.3.mlp") and
// its class; outer calls let it through. The calls in progress on this thread are kept on a
// stack of pointers (ForwardScope), so a forward that succeeds pays only a push and a pop.
#pragma once

#include <stdexcept>
#include <string>

#include <torch/nn/module.h>

namespace megacpp::parallel {

class ModuleOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// While alive, `module`'s call is in progress on this thread.
class ForwardScope {
 public:
  explicit ForwardScope(torch::nn::Module* module);
  ~ForwardScope();
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

  // "the forward of layers.3.mlp (LlamaMLP): WHAT": this scope's module, named from the
  // outermost call in progress.
  std::string describe_failure(const std::string& what) const;

 private:
  torch::nn::Module* module_;
};

// Whether `what` (an exception's message) reports a failed allocation.
bool is_allocation_failure(const std::string& what);

}  // namespace megacpp::parallel
