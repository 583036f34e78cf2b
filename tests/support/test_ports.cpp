// Ports for the tests' jobs. A port the kernel picks for bind(0) is free only until it is
// closed: the kernel can hand it to a megacpp-run started with --master-port 0 by a test beside
// this one (ctest -j) before this test's job binds it, and megacpp-run then refuses the job
// (Note [One job per port]). So a test's port comes from below the kernel's ephemeral range,
// which bind(0) and connect() never hand out, and this process holds a claim on it (an
// abstract Unix socket) while it runs, so no other test process takes it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "launch/port_claim.h"
#include "tests/support/distributed_test.h"

namespace megacpp::testing {
namespace {

// [first, last) of the ports to choose from: the 16384 below the ephemeral range, or the whole
// range above 1024 when the ephemeral range leaves no room below it.
std::pair<int, int> test_port_range() {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  if (low - 1024 >= 4096) return {std::max(1024, low - 16384), low};
  return {1024, 65536};
}

// Holds "megacpp-tests/port/P" for the rest of this process; false when another process does.
bool claim_for_this_process(int port) {
  return launch::listen_on_abstract_name("megacpp-tests/port/" + std::to_string(port)) >= 0;  // never closed
}

bool bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

int free_port() {
  static std::mutex mutex;
  static std::mt19937 random(std::random_device{}());
  const std::lock_guard<std::mutex> lock(mutex);
  const auto [first, last] = test_port_range();
  std::uniform_int_distribution<int> pick(first, last - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = pick(random);
    if (claim_for_this_process(port) && bindable(port)) return port;
  }
  throw std::runtime_error("free_port: no free port in " + std::to_string(first) + "-" + std::to_string(last - 1) +
                           " after 1000 tries");
}

}  // namespace megacpp::testing
