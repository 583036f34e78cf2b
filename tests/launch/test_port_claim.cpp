// Unit tests for launch/port_claim: how megacpp-run takes a port for --master-port 0.
#include "launch/port_claim.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using megacpp::launch::claim_free_port;
using megacpp::launch::pick_free_port;
using megacpp::launch::PortClaim;
using megacpp::launch::PortTaken;

// Another launcher picked the same free port a moment earlier and holds its claim while its
// ranks start: the second launcher takes the next port it is given instead of refusing.
TEST(PortClaim, APortPickedTwiceIsTradedForAnotherByTheLauncherThatLosesTheClaim) {
  const int held_port = pick_free_port();
  const PortClaim other_job("127.0.0.1", held_port, 1, 0);
  int other_port = pick_free_port();
  while (other_port == held_port) other_port = pick_free_port();
  std::vector<int> picks{held_port, other_port};
  size_t next = 0;
  std::optional<PortClaim> claim;
  EXPECT_EQ(claim_free_port("127.0.0.1", &claim, [&] { return picks.at(next++); }), other_port);
  EXPECT_EQ(next, 2u);
  ASSERT_TRUE(claim.has_value());
  EXPECT_THROW(PortClaim("127.0.0.1", other_port, 1, 0), PortTaken) << "the traded port is not held";
}

// A port named by the user is refused, naming it, rather than traded.
TEST(PortClaim, ANamedPortHeldByAnotherJobIsRefusedNamingIt) {
  const int port = pick_free_port();
  const PortClaim other_job("127.0.0.1", port, 1, 0);
  try {
    PortClaim("127.0.0.1", port, 1, 0);
    FAIL() << "a second claim on port " << port << " was taken";
  } catch (const PortTaken& taken) {
    EXPECT_NE(std::string(taken.what()).find("--master-port " + std::to_string(port) + " is taken on this host"), std::string::npos)
        << taken.what();
  }
}

// Sixteen picks that all land on held ports end in the refusal, not in a loop.
TEST(PortClaim, PicksThatNeverFindAFreePortEndInTheRefusal) {
  const int port = pick_free_port();
  const PortClaim other_job("127.0.0.1", port, 1, 0);
  int picks = 0;
  std::optional<PortClaim> claim;
  EXPECT_THROW(claim_free_port("127.0.0.1", &claim, [&] { ++picks; return port; }), PortTaken);
  EXPECT_EQ(picks, 16);
  EXPECT_FALSE(claim.has_value());
}

}  // namespace
