// A communication group: a c10d backend plus the global ranks it spans.
#pragma once

#include <string>
#include <vector>

#include "parallel/compat.h"

namespace megacpp::parallel {

struct Group {
  // Null when the group has one member (no communication needed) or when this rank is not
  // a member of it.
  c10::intrusive_ptr<compat::CommBackend> backend;
  std::vector<int> global_ranks;  // [size], ascending
  int rank = 0;                   // this process's index in global_ranks, -1 if not a member

  int size() const { return static_cast<int>(global_ranks.size()); }
  bool contains_me() const { return rank >= 0; }
  bool is_gloo() const;
  std::string describe() const;  // e.g. "[0, 2]"

  // A one-member group for process `global_rank`.
  static Group single(int global_rank);
};

// "0, 2": ranks for messages.
std::string rank_list(const std::vector<int>& ranks);

}  // namespace megacpp::parallel
