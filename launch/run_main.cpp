// megacpp-run entry point: argument errors exit 2, everything else is
// run_launcher's exit code.
#include <exception>
#include <iostream>
#include <stdexcept>

#include "launcher.h"

int main(int argc, char** argv) {
  using namespace megacpp::launch;
  LaunchOptions opts;
  try {
    opts = parse_launch_options(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::cerr << "megacpp-run: error: " << e.what() << "\n"
              << "(see 'megacpp-run --help')\n";
    return 2;
  }
  if (opts.help) {
    std::cout << launch_usage();
    return 0;
  }
  try {
    return run_launcher(opts);
  } catch (const std::exception& e) {
    std::cerr << "megacpp-run: error: " << e.what() << "\n";
    return 1;
  }
}
