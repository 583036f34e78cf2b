#include "inference/fsdp2_infer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "inference/sequence_log_probs.h"
#include "megacpp/logging.h"
#include "parallel/collectives.h"
#include "runtime/heartbeat.h"
#include "runtime/model_setup.h"
#include "runtime/model_weights.h"

namespace megacpp::inference {
namespace {

using Clock = std::chrono::steady_clock;
using Sequence = std::vector<int64_t>;

// One line's token ids: [ids...] or {"input_ids": [ids...]}, each inside the vocabulary, at most
// `context` of them. `where` names the file and line.
Sequence parse_sequence(const std::string& line, const std::string& where, int64_t vocab, int64_t context) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(where + ": not JSON (" + e.what() + ")");
  }
  const nlohmann::json* ids = j.is_array() ? &j : j.is_object() && j.contains("input_ids") ? &j["input_ids"] : nullptr;
  if (!ids || !ids->is_array()) throw std::invalid_argument(where + ": expected a list of token ids or an object with \"input_ids\"");
  Sequence sequence;
  for (const auto& id : *ids) {
    if (!id.is_number_integer()) throw std::invalid_argument(where + ": token ids are integers, got " + id.dump());
    const auto value = id.get<int64_t>();
    if (value < 0 || (vocab > 0 && value >= vocab)) {
      throw std::invalid_argument(where + ": token id " + std::to_string(value) + " is outside the model's vocabulary of " +
                                  std::to_string(vocab));
    }
    sequence.push_back(value);
  }
  if (sequence.empty()) throw std::invalid_argument(where + ": no token ids");
  if (static_cast<int64_t>(sequence.size()) > context) {
    throw std::invalid_argument(where + ": " + std::to_string(sequence.size()) + " tokens, longer than the context of " +
                                std::to_string(context) + " (--seq-length)");
  }
  return sequence;
}

// Every sequence of the JSON-lines file (blank lines skipped), checked before any is scored.
std::vector<Sequence> read_sequences(const std::string& path, int64_t vocab, int64_t context) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--input " + path + ": cannot be read");
  std::vector<Sequence> sequences;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    sequences.push_back(parse_sequence(line, "--input " + path + " line " + std::to_string(number), vocab, context));
  }
  if (sequences.empty()) throw std::invalid_argument("--input " + path + ": no sequences");
  return sequences;
}

// "[-1.5, -0.25]": the shortest text that reads back as the same float; null where not finite
// (JSON has no infinity).
std::string json_numbers(const at::Tensor& values) {
  std::string text = "[";
  const float* v = values.data_ptr<float>();
  for (int64_t i = 0; i < values.numel(); ++i) {
    if (i) text += ", ";
    text += std::isfinite(v[i]) ? fmt::format("{}", v[i]) : "null";
  }
  return text + "]";
}

class InferRun {
 public:
  InferRun(const settings::JobConfig& job, const InferOptions& options) : job_(job), options_(options) {}
  // A failed run leaves no temporary output behind.
  ~InferRun() {
    if (temporary_.empty() || finished_) return;
    out_.close();
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
  }

  void run() {
    heartbeat_.beat("starting: rendezvous and model");
    setup_ = runtime::start_processes(job_);
    const int64_t vocab = args_.model->to_args().value("padded_vocab_size", int64_t{0});
    sequences_ = read_sequences(options_.input, vocab, args_.seq_length);
    if (setup_.runtime->rank() == 0) open_output();
    heartbeat_.beat("building, sharding and loading the model");
    model_ = runtime::build_model(args_, setup_.device);
    runtime::parallelize_model(*model_, setup_, job_, /*initialize=*/false);  // the weights are loaded
    runtime::load_model_weights(args_, *setup_.mesh, *model_);
    log_start();
    const auto start = Clock::now();
    score_all();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (setup_.runtime->rank() == 0) finish_output(seconds);
    setup_.runtime->barrier();
  }

 private:
  void open_output() {
    temporary_ = options_.output + ".tmp";
    out_.open(temporary_, std::ios::trunc);
    if (!out_) throw std::invalid_argument("--output " + options_.output + ": cannot write " + temporary_);
  }

  void log_start() {
    for (const auto& note : args_.notes) spdlog::info("{}", note);
    spdlog::info("megacpp-infer | model {} | {} ranks, {} | device {} | {} sequences from {}, {} per forward per rank, "
                 "temperature {}{}",
                 args_.model_type, setup_.runtime->world_size(),
                 args_.use_torch_fsdp2 ? setup_.mesh->describe() : std::string("no FSDP"), setup_.device.str(),
                 sequences_.size(), options_.input, options_.batch_size, options_.temperature,
                 options_.entropy ? ", with entropies" : "");
  }

  // Rounds of batch_size sequences per data-parallel rank: each rank scores its rows, the round's
  // table is summed over the world (each row from the first rank of its Ulysses group, zeros
  // elsewhere) and rank 0 writes it.
  void score_all() {
    const parallel::DeviceMesh& mesh = *setup_.mesh;
    const int64_t n = static_cast<int64_t>(sequences_.size()), per_rank = options_.batch_size;
    const int64_t round = per_rank * mesh.data_parallel_size();
    // With --sequence-parallel each forward's positions are padded to a multiple of the TP size.
    const SequenceScoring scoring{per_rank, options_.temperature, options_.entropy, 1024, setup_.device, setup_.runtime->world(),
                                  mesh.cp(), args_.sequence_parallel ? mesh.tp().size() : 1};
    for (int64_t start = 0; start < n; start += round) {
      heartbeat_.beat(fmt::format("scoring sequences {} to {} of {}", start + 1, std::min(n, start + round), n));
      const int64_t count = std::min(round, n - start);
      int64_t width = 0;
      for (int64_t i = start; i < start + count; ++i) width = std::max<int64_t>(width, sequences_[i].size());
      const int64_t first = start + mesh.data_parallel_rank() * per_rank;
      const int64_t mine = std::clamp<int64_t>(start + count - first, 0, per_rank);
      at::Tensor ids = torch::zeros({mine, width}, torch::kLong), lengths = torch::empty({mine}, torch::kLong);
      for (int64_t i = 0; i < mine; ++i) {
        const Sequence& s = sequences_[first + i];
        ids[i].narrow(0, 0, static_cast<int64_t>(s.size())).copy_(torch::tensor(s, torch::kLong));
        lengths[i] = static_cast<int64_t>(s.size());
      }
      const TokenLogProbs scored = sequence_log_probs(*model_, ids, lengths, scoring);  // collective
      const int64_t kinds = options_.entropy ? 2 : 1;
      at::Tensor table = torch::zeros({kinds, count, std::max<int64_t>(width - 1, 0)});
      if (mesh.cp().rank == 0 && mesh.tp().rank == 0 && mine > 0) {  // one copy of each group's result
        table[0].narrow(0, first - start, mine).copy_(scored.log_probs);
        if (options_.entropy) table[1].narrow(0, first - start, mine).copy_(scored.entropy);
      }
      if (width > 1) {
        at::Tensor summed = table.to(setup_.device);
        parallel::all_reduce(setup_.runtime->world(), summed, parallel::ReduceOp::kSum).wait();
        table = summed.to(torch::kCPU);
      }
      if (setup_.runtime->rank() == 0) write_round(table, start, count);
    }
  }

  void write_round(const at::Tensor& table, int64_t start, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t scored = static_cast<int64_t>(sequences_[start + i].size()) - 1;
      out_ << "{\"log_probs\": " << json_numbers(table[0][i].narrow(0, 0, scored).contiguous());
      if (options_.entropy) out_ << ", \"entropy\": " << json_numbers(table[1][i].narrow(0, 0, scored).contiguous());
      out_ << "}\n";
      tokens_ += scored;
    }
  }

  // The whole output in place at once: a failure before leaves an earlier one untouched.
  void finish_output(double seconds) {
    out_.close();
    if (!out_) throw std::runtime_error("--output " + options_.output + ": writing " + temporary_ + " failed");
    std::filesystem::rename(temporary_, options_.output);
    finished_ = true;
    spdlog::info("scored {} sequences ({} tokens) in {:.2f} s, {:.1f} tokens/s -> {}", sequences_.size(), tokens_, seconds,
                 seconds > 0 ? tokens_ / seconds : 0.0, options_.output);
  }

  const settings::JobConfig& job_;  // resolved once (Note [Job configuration])
  const settings::TrainingArguments& args_ = job_.args;
  const InferOptions options_;
  runtime::Heartbeat heartbeat_;  // progress for megacpp-run's hang detection
  runtime::ProcessSetup setup_;
  std::vector<Sequence> sequences_;
  std::shared_ptr<models::LanguageModel> model_;
  std::ofstream out_;  // rank 0: the output's temporary file
  std::string temporary_;
  bool finished_ = false;
  int64_t tokens_ = 0;
};

}  // namespace

int run_fsdp2_infer(const settings::TrainingArguments& args, const InferOptions& options, const char* program) {
  try {
    if (options.input.empty() || options.output.empty()) {
      throw std::invalid_argument("--input (JSON lines of token ids) and --output (where their log-probs go) are required");
    }
    if (options.batch_size <= 0) throw std::invalid_argument("--infer-batch-size must be positive");
    if (!(options.temperature > 0)) throw std::invalid_argument("--temperature must be positive");
    if (!args.save.empty()) throw std::invalid_argument("--save: megacpp-infer saves no checkpoint (it only reads --load)");
    if (args.load.empty() && args.init_from_hf_path.empty()) {
      throw std::invalid_argument("the weights come from --load (a checkpoint) or --init-from-hf-path (a Hugging Face folder); neither is given");
    }
    runtime::use_kernel_fusion(args);
    const settings::JobConfig job = runtime::resolve_job(args);
    InferRun run(job, options);
    run.run();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, error_message(e).c_str());
    std::fflush(stderr);
    return 1;
  }
}

}  // namespace megacpp::inference
