#include "tests/support/pytorch2.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

namespace megacpp::testing {
namespace fs = std::filesystem;

std::optional<Pytorch2> Pytorch2::find(std::string& why) {
  const char* env = std::getenv("MEGACPP_PYTORCH2_ROOT");
  const std::string root = env && *env ? env : MEGACPP_SOURCE_DIR "/.cache/pytorch2";
  if (!fs::exists(root + "/.megacpp-ready")) {
    why = root + " is not set up (run scripts/setup_pytorch2.sh)";
    return std::nullopt;
  }
  if (geteuid() != 0) {
    why = "chroot into " + root + " needs root";
    return std::nullopt;
  }
  return Pytorch2(fs::canonical(root).string());
}

std::string Pytorch2::scratch_dir() const {
  std::string pattern = root_ + "/tmp/megacpp-test-XXXXXX";
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp under " + root_ + "/tmp failed");
  return pattern;
}

std::string Pytorch2::inside(const std::string& path) const {
  const std::string absolute = fs::absolute(path).string();
  if (absolute.rfind(root_ + "/", 0) != 0) throw std::invalid_argument(path + " is not under " + root_);
  return absolute.substr(root_.size());
}

CommandResult Pytorch2::python(const std::string& args, int timeout_s) const {
  // Gloo binds to loopback by name instead of resolving a hostname the root does not know;
  // Debian's torch has no libuv TCPStore.
  return run_command("timeout -k 10 " + std::to_string(timeout_s) + " chroot " + root_ +
                     " /usr/bin/env USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo PYTHONUNBUFFERED=1 python3 " + args);
}

}  // namespace megacpp::testing
