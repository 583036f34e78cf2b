#include "parallel/forward_context.h"

#include <vector>


namespace megacpp::parallel {
namespace {

thread_local std::vector<torch::nn::Module*> calls_in_progress;

}  // namespace

ForwardScope::ForwardScope(torch::nn::Module* module) : module_(module) { calls_in_progress.push_back(module); }

ForwardScope::~ForwardScope() { calls_in_progress.pop_back(); }

std::string ForwardScope::describe_failure(const std::string& what) const {
  std::string path = "the outermost module";
  if (!calls_in_progress.empty() && calls_in_progress.front() != module_) {
    for (const auto& item : calls_in_progress.front()->named_modules("", /*include_self=*/false)) {
      if (item.value().get() == module_) path = item.key();
    }
  }
  return "the forward of " + path + " (" + module_->name() + "): " + what;
}

bool is_allocation_failure(const std::string& what) {
  return what.find("can't allocate memory") != std::string::npos || what.find("out of memory") != std::string::npos;
}

}  // namespace megacpp::parallel
