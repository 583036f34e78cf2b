// PyTorch 2.x for the tests that check megacpp's checkpoints against torch.distributed.checkpoint
// itself: Debian trixie's python3-torch in a root made by scripts/setup_pytorch2.sh (this
// machine's own PyTorch is Debian bookworm's 1.13). Its Python runs with `chroot ROOT`, so the
// files it reads live under ROOT/tmp.
#pragma once

#include <optional>
#include <string>

#include "tests/support/command.h"

namespace megacpp::testing {

class Pytorch2 {
 public:
  // The root named by $MEGACPP_PYTORCH2_ROOT, else SOURCE/.cache/pytorch2; nullopt (with the
  // reason in `why`) when it is not set up or this process cannot chroot.
  static std::optional<Pytorch2> find(std::string& why);

  // A new empty directory under ROOT/tmp: its path here, and as the root's Python sees it.
  std::string scratch_dir() const;
  std::string inside(const std::string& path) const;
  // `python3 ARGS` in the root (ARGS use inside() paths), killed after `timeout_s` seconds.
  CommandResult python(const std::string& args, int timeout_s = 600) const;

 private:
  explicit Pytorch2(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace megacpp::testing

// Skips the test, saying why, where PyTorch 2.x is not at hand.
#define MEGACPP_REQUIRE_PYTORCH2(var)                                   \
  std::string var##_why;                                                \
  const auto var = ::megacpp::testing::Pytorch2::find(var##_why);       \
  if (!var) GTEST_SKIP() << "PyTorch 2.x not at hand: " << var##_why
