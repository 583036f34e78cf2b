#include "parallel/group.h"

#include <sstream>

namespace megacpp::parallel {

bool Group::is_gloo() const {
  return backend && backend->getBackendName() == "gloo";
}

std::string Group::describe() const {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < global_ranks.size(); ++i) out << (i ? ", " : "") << global_ranks[i];
  out << "]";
  return out.str();
}

Group Group::single(int global_rank) {
  Group group;
  group.global_ranks = {global_rank};
  group.rank = 0;
  return group;
}

}  // namespace megacpp::parallel
