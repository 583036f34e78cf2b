#include "launch_options.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <stdexcept>

namespace megacpp::launch {
namespace {

struct IntFlag {
  const char* name;
  int LaunchOptions::*field;
  long long lo, hi;
};

const IntFlag kIntFlags[] = {
    {"--nproc-per-node", &LaunchOptions::nproc_per_node, 1, 1024},
    {"--nnodes", &LaunchOptions::nnodes, 1, 1000000},
    {"--node-rank", &LaunchOptions::node_rank, 0, 999999},
    {"--master-port", &LaunchOptions::master_port, 0, 65535},
    {"--grace-seconds", &LaunchOptions::grace_seconds, 0, 86400},
    {"--omp-num-threads", &LaunchOptions::omp_num_threads, 0, 1024},
    {"--hang-timeout-seconds", &LaunchOptions::hang_timeout_seconds, 0, 7 * 86400},
};

const IntFlag* find_int_flag(const std::string& name) {
  for (const IntFlag& f : kIntFlags)
    if (name == f.name) return &f;
  return nullptr;
}

std::string range_text(long long lo, long long hi) {
  return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

int parse_int(const std::string& flag, const std::string& text, const IntFlag& f) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < f.lo || v > f.hi)
    throw std::invalid_argument(flag + ": expected " + range_text(f.lo, f.hi) +
                                ", got '" + text + "'");
  return static_cast<int>(v);
}

// One option token: `typed` is the spelling given (kept for error messages),
// `name` the canonical dash spelling, `value` the part after '=' if any.
struct OptionToken {
  std::string typed, name;
  std::optional<std::string> value;
};

OptionToken split_option(const std::string& arg) {
  OptionToken t;
  const size_t eq = arg.find('=');
  t.typed = arg.substr(0, eq);
  if (eq != std::string::npos) t.value = arg.substr(eq + 1);
  t.name = t.typed;
  if (t.name.rfind("--", 0) == 0) std::replace(t.name.begin() + 2, t.name.end(), '_', '-');
  return t;
}

std::string take_value(const OptionToken& t, const std::vector<std::string>& args, size_t& i) {
  if (t.value) return *t.value;
  if (i >= args.size()) throw std::invalid_argument(t.typed + ": missing value");
  return args[i++];
}

// Applies one option; returns false for --help (which ends parsing).
bool apply_option(LaunchOptions& opts, const OptionToken& t,
                  const std::vector<std::string>& args, size_t& i) {
  if (t.name == "-h" || t.name == "--help") {
    if (t.value) throw std::invalid_argument(t.typed + ": does not take a value");
    opts.help = true;
    return false;
  }
  if (t.name == "--master-addr") {
    opts.master_addr = take_value(t, args, i);
    if (opts.master_addr.empty()) throw std::invalid_argument(t.typed + ": must not be empty");
    return true;
  }
  const IntFlag* f = find_int_flag(t.name);
  if (f == nullptr) throw std::invalid_argument("unknown option '" + t.typed + "'");
  opts.*(f->field) = parse_int(t.typed, take_value(t, args, i), *f);
  return true;
}

}  // namespace

LaunchOptions parse_launch_options(const std::vector<std::string>& args) {
  LaunchOptions opts;
  size_t i = 0;
  while (i < args.size()) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // PROGRAM: the rest belongs to it
    ++i;
    if (!apply_option(opts, split_option(arg), args, i)) return opts;
  }
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  validate_launch_options(opts);
  return opts;
}

LaunchOptions parse_launch_options(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_launch_options(args);
}

void validate_launch_options(const LaunchOptions& opts) {
  for (const IntFlag& f : kIntFlags) {
    const int v = opts.*(f.field);
    if (v < f.lo || v > f.hi)
      throw std::invalid_argument(std::string(f.name) + ": expected " + range_text(f.lo, f.hi) +
                                  ", got " + std::to_string(v));
  }
  if (opts.node_rank >= opts.nnodes)
    throw std::invalid_argument("--node-rank: " + std::to_string(opts.node_rank) +
                                " must be less than --nnodes (" + std::to_string(opts.nnodes) +
                                ")");
  if (opts.master_port == 0 && opts.nnodes > 1)
    throw std::invalid_argument(
        "--master-port: 0 (pick a free port) is only allowed with --nnodes 1");
  if (opts.master_addr.empty()) throw std::invalid_argument("--master-addr: must not be empty");
  if (opts.command.empty()) throw std::invalid_argument("missing PROGRAM to run");
}

std::string launch_usage() {
  return R"(usage: megacpp-run [options] PROGRAM [ARGS...]

Starts one process per local rank with the torchrun environment (RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR,
MASTER_PORT). Output lines are prefixed with "[rank<R>]: ". When a rank fails
the others get SIGTERM, then SIGKILL after the grace period.

options (also --opt=VALUE and underscore spellings such as --nproc_per_node):
  --nproc-per-node N   processes on this node (default 1)
  --nnodes N           number of nodes (default 1)
  --node-rank R        rank of this node, 0 <= R < nnodes (default 0)
  --master-addr ADDR   rendezvous address (default 127.0.0.1)
  --master-port P      rendezvous port (default 29500; 0 picks a free port,
                       single node only)
  --grace-seconds S    wait after SIGTERM before SIGKILL on teardown (default 5)
  --omp-num-threads N  OMP_NUM_THREADS of every rank (default: the environment's,
                       else 1 when --nproc-per-node > 1, as torchrun); ranks also
                       get OMP_WAIT_POLICY=PASSIVE unless it is set
  --hang-timeout-seconds S
                       stop the job when a rank of megacpp-train makes no progress
                       for S seconds, naming it (default 300; 0: off)
  -h, --help           show this help
  --                   end of options: the next token is PROGRAM

exit status: 0 if every rank exits 0, 1 if a rank fails, 2 on usage errors,
128+N if the launcher receives signal N.
)";
}

std::vector<std::pair<std::string, std::string>> thread_environment(const LaunchOptions& opts) {
  std::vector<std::pair<std::string, std::string>> vars;
  if (opts.omp_num_threads > 0) {
    vars.emplace_back("OMP_NUM_THREADS", std::to_string(opts.omp_num_threads));
  } else if (std::getenv("OMP_NUM_THREADS") == nullptr && opts.nproc_per_node > 1) {
    vars.emplace_back("OMP_NUM_THREADS", "1");
  }
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) vars.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  return vars;
}

}  // namespace megacpp::launch
