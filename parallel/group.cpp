#include "parallel/group.h"

#include <string>

namespace megacpp::parallel {

bool Group::is_gloo() const {
  return backend && backend->getBackendName() == "gloo";
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string Group::describe() const { return "[" + rank_list(global_ranks) + "]"; }

Group Group::single(int global_rank) {
  Group group;
  group.global_ranks = {global_rank};
  group.rank = 0;
  return group;
}

}  // namespace megacpp::parallel
