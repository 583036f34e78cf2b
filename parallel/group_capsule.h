// A group held by an autograd function for its backward (autograd's saved data takes IValues).
#pragma once

#include <torch/custom_class.h>

#include "parallel/group.h"

namespace megacpp::parallel {

struct GroupHolder : torch::CustomClassHolder {
  explicit GroupHolder(Group g) : group(std::move(g)) {}
  Group group;
};

}  // namespace megacpp::parallel
