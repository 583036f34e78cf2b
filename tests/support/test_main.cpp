// megacpp-tests' main: GoogleTest's, ending as megacpp's programs do (Note [Ending a process]).
// Each test runs in a process of its own (ctest), as does each rank of a multi-process test, so
// skipping libtorch's static destructors saves a tenth of a second on every one of them.
#include <gtest/gtest.h>

#include "megacpp/process_end.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  megacpp::end_process(RUN_ALL_TESTS());
}
