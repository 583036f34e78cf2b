// Tensor parallelism beside FSDP2 (Note [Tensor parallelism] in parallel/tensor_parallel.h):
// megacpp-train's losses, validation losses and final parameters on one rank without parallelism
// equal those of TP 2 alone, TP 2 x FSDP 2, TP 2 x HSDP, with recompute on the meta device and
// with the per-token loss; bad sizes and what is not split yet are refused by name.
#include <gtest/gtest.h>

#include <regex>
#include <tuple>

#include <torch/torch.h>

#include "models/layers/embedding.h"
#include "models/llama/llama_model.h"
#include "models/parallelize.h"
#include "parallel/device_mesh.h"
#include "parallel/fsdp/fully_shard.h"
#include "parallel/collectives.h"
#include "parallel/tensor_parallel_rng.h"
#include "parallel/vocab_parallel.h"
#include "tests/support/distributed_test.h"
#include "tests/support/lora_runs.h"
#include "tests/support/tiny_llama.h"
#include "tests/support/train_run.h"

namespace megacpp {
namespace {

using testing::expect_same_losses;
using testing::expect_same_params;
using testing::iterations_after;
using testing::train;
using testing::TrainRun;
using testing::write_file;

// Qwen3's layer (q/k norms: replicated weights with partial gradients), grouped-query attention
// (4 heads, 2 query groups), clipping that always acts (the gradient norm over TP slices counts);
// the vocabulary padded to 128 at TP 1 and 2 alike (Megatron pads to a multiple of
// --make-vocab-size-divisible-by x TP).
const std::string kTpFlags =
    "--model-type llama --mock-data --seed 1234 --num-layers 2 --hidden-size 40 --num-attention-heads 4 --num-query-groups 2 "
    "--qk-layernorm --ffn-hidden-size 62 --tokenizer-type NullTokenizer --vocab-size 127 --seq-length 16 --micro-batch-size 2 "
    "--global-batch-size 8 --train-iters 8 --eval-interval 4 --eval-iters 2 --log-interval 1 --lr 2e-3 --lr-warmup-iters 2 "
    "--clip-grad 0.05 --untie-embeddings-and-output-weights --make-vocab-size-divisible-by 64";

// Megatron's GPT (its dropout given by each test).
const std::string kGptFlags =
    "--model-type gpt --mock-data --seed 1234 --tokenizer-type NullTokenizer --vocab-size 127 --make-vocab-size-divisible-by 64 "
    "--num-layers 2 --hidden-size 32 --num-attention-heads 4 --ffn-hidden-size 48 --seq-length 16 --max-position-embeddings 16 "
    "--micro-batch-size 2 --global-batch-size 8 --train-iters 8 --eval-interval 4 --eval-iters 2 --log-interval 1 --lr 2e-3 "
    "--lr-warmup-iters 2 --clip-grad 0.05";

// The "grad norm:" of each iteration line (printed to 3 decimals). Adam hardly notices a wrong
// clipping factor, so the norm is compared on its own.
std::vector<double> grad_norms(const TrainRun& run) {
  std::vector<double> norms;
  const std::regex pattern("grad norm: ([0-9.]+)");
  const std::string& out = run.result.output;
  for (std::sregex_iterator it(out.begin(), out.end(), pattern), end; it != end; ++it) norms.push_back(std::stod((*it)[1]));
  return norms;
}

// A checkpoint saved at TP 2 x FSDP 2 (`wrap`: its --fsdp2-config-path flags) after 4 of `flags`'
// 8 iterations resumes at FSDP 4, at TP 2 and on one rank with the uninterrupted run's losses; one
// rank's (torch_dist) resumes at TP 2 x FSDP 2; its Hugging Face export loads at TP 2 x FSDP 2
// with one rank's losses.
void expect_checkpoints_move_between_layouts(const std::string& flags, const std::string& wrap, const std::string& dir) {
  const std::string tp2 = " --tensor-model-parallel-size 2";
  const TrainRun straight = train(4, flags + tp2 + wrap + " --save " + dir + "/tp2-fsdp2 --save-interval 4 --ckpt-format torch_dcp");
  ASSERT_EQ(straight.result.status, 0) << straight.result.output;
  const TrainRun reference = iterations_after(straight, 4);
  const std::string from_tp = " --load " + dir + "/tp2-fsdp2 --ckpt-step 4";
  expect_same_losses(reference, train(4, flags + wrap + from_tp), "tp2 x fsdp2 -> fsdp4", 1e-5);
  expect_same_losses(reference, train(2, flags + tp2 + from_tp), "tp2 x fsdp2 -> tp2", 1e-5);
  expect_same_losses(reference, train(1, flags + from_tp), "tp2 x fsdp2 -> 1 rank", 1e-5);

  const TrainRun one = train(1, flags + " --save " + dir + "/one --save-interval 4 --ckpt-format torch_dist");
  expect_same_losses(iterations_after(one, 4), train(4, flags + tp2 + wrap + " --load " + dir + "/one --ckpt-step 4"),
                     "1 rank (torch_dist) -> tp2 x fsdp2", 1e-5);

  const auto exported = testing::convert("export --load " + dir + "/tp2-fsdp2 --output " + dir + "/hf");
  ASSERT_EQ(exported.status, 0) << exported.output;
  const std::string from_hf = " --init-from-hf-path " + dir + "/hf";
  expect_same_losses(train(1, flags + from_hf), train(4, flags + tp2 + wrap + from_hf), "hf -> tp2 x fsdp2", 1e-5);
}

TEST(TensorParallel, SameLossesAndParametersAsOneRankOnEveryLayout) {
  const std::string dir = testing::scratch_dir();
  const std::string layers = write_file(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  const std::string hsdp = write_file(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['layers.{*}']\n");
  const TrainRun reference = train(1, kTpFlags + " --dump-final-params " + dir + "/ref.pt");
  ASSERT_EQ(reference.result.status, 0) << reference.result.output;
  ASSERT_EQ(reference.losses.size(), 8u) << reference.result.output;
  ASSERT_EQ(reference.validation.size(), 4u) << reference.result.output;
  struct Layout {
    const char* name;
    int ranks;
    std::string flags;
  };
  const std::vector<Layout> layouts = {
      {"tp2", 2, "--tensor-model-parallel-size 2"},
      {"tp2-fsdp2", 4, "--tensor-model-parallel-size 2 --use-torch-fsdp2 --fsdp2-config-path " + layers},
      {"tp2-fsdp2-recompute-meta", 4, "--tensor-model-parallel-size 2 --use-torch-fsdp2 --fsdp2-config-path " + layers +
                                          testing::kRecomputeOnMetaDevice},
      {"tp2-sp", 2, "--tensor-model-parallel-size 2 --sequence-parallel"},
      {"tp2-sp-fsdp2-recompute-meta", 4, "--tensor-model-parallel-size 2 --sequence-parallel --use-torch-fsdp2 --fsdp2-config-path " +
                                             layers + testing::kRecomputeOnMetaDevice},
      {"tp2-hsdp2x2", 8, "--tensor-model-parallel-size 2 --use-torch-fsdp2 --fsdp2-config-path " + hsdp},
  };
  for (const auto& layout : layouts) {
    const std::string dump = dir + "/" + layout.name + ".pt";
    const TrainRun run = train(layout.ranks, kTpFlags + " " + layout.flags + " --dump-final-params " + dump);
    expect_same_losses(reference, run, layout.name, 1e-5);
    expect_same_params(dir + "/ref.pt", dump, layout.name);
    EXPECT_EQ(grad_norms(run), grad_norms(reference)) << layout.name;
    const bool sequence_parallel = layout.flags.find("--sequence-parallel") != std::string::npos;
    EXPECT_NE(run.result.output.find(std::string("tensor parallel: 2 attention layer(s), 2 MLP(s) and the vocabulary split over 2 ranks") +
                                     (sequence_parallel ? " [0, 1], sequence parallel between them" : "")),
              std::string::npos)
        << run.result.output;
  }

  // An output layer tied to the embedding: each sees whole sequences, their gradients whole.
  std::string tied = kTpFlags;
  const std::string untie = " --untie-embeddings-and-output-weights";
  tied.erase(tied.find(untie), untie.size());
  expect_same_losses(train(1, tied), train(2, tied + " --tensor-model-parallel-size 2 --sequence-parallel"), "tp2-sp-tied", 1e-5);

  const std::string per_token = " --calculate-per-token-loss";
  const TrainRun reference_per_token = train(1, kTpFlags + per_token);
  expect_same_losses(reference_per_token, train(4, kTpFlags + per_token + " --tensor-model-parallel-size 2"), "tp2-per-token", 1e-5);
}

// The sharded masters hold a quarter of the model at TP 2 x FSDP 2 (the norms, replicated over
// TP, a half: FSDP2 alone shards them), and a layer gathered for its forward is half of the layer
// (its replicated norms whole).
TEST(TensorParallel, EachRankHoldsAQuarterOfTheModelAndGathersHalfALayer) {
  testing::run_on_ranks(4, [](parallel::DistributedRuntime& rt) {
    parallel::ParallelDims dims = parallel::ParallelDims::resolve(4, -1, 1, "sharding_size", "ulysses_size", 2);
    const auto mesh = parallel::DeviceMesh::build(rt, dims);
    models::LlamaConfig config = testing::tiny_llama(/*tied=*/false, /*qwen3=*/true);
    config.ffn_hidden_size = 64;
    config.vocab_size = 64;  // 16 rows per rank
    auto shared = std::make_shared<models::LlamaModel>(config, torch::TensorOptions().dtype(torch::kFloat));
    models::LlamaModel& model = *shared;
    std::map<std::string, int64_t> full;
    for (const auto& item : model.named_parameters()) full[item.key()] = item.value().numel();
    models::ParallelizeSettings settings;
    settings.wrap.sub_modules_to_wrap = {"layers.{*}"};
    models::parallelize(model, mesh, settings);
    int64_t layers_full = 0, layers_norms = 0, layers_held = 0, layer0_full = 0, layer0_gathered = 0, layer0_norms = 0;
    int64_t other_full = 0, other_norms = 0, other_held = 0;
    for (const auto& item : model.named_parameters()) {
      const std::string& name = item.key();
      const auto* sharded = parallel::fsdp::find_fsdp_param(item.value());
      ASSERT_NE(sharded, nullptr) << name;
      const bool layer = name.rfind("layers.", 0) == 0;
      (layer ? layers_full : other_full) += full.at(name);
      (layer ? layers_held : other_held) += item.value().numel();
      const bool norm = name.find("norm") != std::string::npos;  // replicated over TP
      (layer ? layers_norms : other_norms) += norm ? full.at(name) : 0;
      if (name.rfind("layers.0.", 0) != 0) continue;
      layer0_full += full.at(name);
      layer0_gathered += sharded->layout().rows * sharded->layout().row_numel;
      if (norm) layer0_norms += full.at(name);
    }
    EXPECT_EQ(layers_held * 4, layers_full + layers_norms) << "rank " << rt.rank();  // the norms: a half, not a quarter
    EXPECT_EQ(other_held * 4, other_full + other_norms) << "rank " << rt.rank();  // the embedding and output layer too
    const int64_t held = layers_held + other_held, whole = layers_full + other_full;
    EXPECT_LT(std::abs(static_cast<double>(held) / whole - 0.25), 0.01) << "rank " << rt.rank() << ": " << held << " of " << whole;
    EXPECT_EQ(layer0_gathered * 2, layer0_full + layer0_norms) << "rank " << rt.rank();
  });
}

// Megatron's GPT by its plan (FSDP2Mixin::tensor_parallel_plan): c_attn in its three parts
// [q; k; v], c_fc column-parallel, both c_proj row-parallel with their biases added once, the
// vocabulary of the tied embedding split. The same losses, gradient norms and final parameters
// as one rank on every layout; checkpoints (c_attn's rows written as a block per part) and the
// Hugging Face export (c_attn gathered in order) move between layouts.
TEST(TensorParallel, GptSplitsAsMegatronsWithTheSameLossesAndCheckpoints) {
  const std::string dir = testing::scratch_dir();
  const std::string gpt = kGptFlags + " --attention-dropout 0 --hidden-dropout 0";
  const std::string blocks = testing::fsdp_flags(dir, "blocks.yaml", "sub_modules_to_wrap: ['h.{*}']\n");
  const std::string hsdp = testing::fsdp_flags(dir, "hsdp.yaml", "sharding_size: 2\nsub_modules_to_wrap: ['h.{*}']\n");
  const std::string tp2 = " --tensor-model-parallel-size 2";
  const TrainRun reference = train(1, gpt + " --dump-final-params " + dir + "/ref.pt");
  ASSERT_EQ(reference.result.status, 0) << reference.result.output;
  for (const auto& [name, ranks, flags] : std::vector<std::tuple<std::string, int, std::string>>{
           {"tp2", 2, tp2},
           {"tp2-sp", 2, tp2 + " --sequence-parallel"},
           {"tp2-sp-fsdp2-recompute-meta", 4, tp2 + " --sequence-parallel" + blocks + testing::kRecomputeOnMetaDevice},
           {"tp2-hsdp2x2", 8, tp2 + hsdp}}) {
    const TrainRun run = train(ranks, gpt + flags + " --dump-final-params " + dir + "/" + name + ".pt");
    expect_same_losses(reference, run, name, 1e-5);
    expect_same_params(dir + "/ref.pt", dir + "/" + name + ".pt", name);
    EXPECT_EQ(grad_norms(run), grad_norms(reference)) << name;
    EXPECT_NE(run.result.output.find("tensor parallel: 8 Linear layer(s) of its plan and the vocabulary split over 2 ranks"),
              std::string::npos)
        << run.result.output;
  }

  expect_checkpoints_move_between_layouts(gpt, blocks, dir);
}

// Mixture-of-experts layers (Qwen3-MoE's, here every other layer) stay whole on each TP rank:
// the same losses and load-balancing losses as one rank, beside the split attention and dense MLP;
// with sequence parallelism they gather the whole sequences (the load-balancing loss is theirs).
TEST(TensorParallel, ExpertsAreReplicatedOnEachRank) {
  const std::string moe = kTpFlags + " --num-experts 4 --moe-router-topk 2 --moe-layer-freq 2 --moe-aux-loss-coeff 0.01";
  const TrainRun reference = train(1, moe);
  ASSERT_EQ(reference.result.status, 0) << reference.result.output;
  ASSERT_EQ(reference.balance_losses.size(), 8u) << reference.result.output;
  for (const auto& [name, ranks, flags] : std::vector<std::tuple<std::string, int, std::string>>{
           {"tp2", 2, " --tensor-model-parallel-size 2"},
           {"tp2-sp", 2, " --tensor-model-parallel-size 2 --sequence-parallel"},
           {"tp2-fsdp2", 4, " --tensor-model-parallel-size 2 --use-torch-fsdp2"}}) {
    const TrainRun run = train(ranks, moe + flags);
    expect_same_losses(reference, run, name, 1e-5);
    EXPECT_EQ(grad_norms(run), grad_norms(reference)) << name;
    EXPECT_NE(run.result.output.find("tensor parallel: 2 attention layer(s), 1 MLP(s) (1 mixture-of-experts layer(s) replicated "
                                     "on each) and the vocabulary split over 2 ranks [0, 1]"),
              std::string::npos)
        << run.result.output;
  }
}

// A module that drops half its input in training mode.
class HalfDropout : public parallel::Module {
 public:
  HalfDropout() : parallel::Module("HalfDropout") {}

 protected:
  at::Tensor forward(const at::Tensor& x) override { return torch::dropout(x, 0.5, is_training()); }
};

// Note [Tensor-parallel random numbers]: a forked module's masks differ between the TP ranks and
// repeat from the same generator state; the default stream stays in step over the group after
// it; in eval mode nothing is drawn.
TEST(TensorParallel, DropoutOnARanksShareDrawsFromItsOwnStream) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const parallel::Group& group = rt.world();
    auto forked = std::make_shared<HalfDropout>(), plain = std::make_shared<HalfDropout>();
    parallel::fork_random_numbers(*forked, group);
    const at::Tensor ones = torch::ones({64});
    torch::manual_seed(11);
    const at::Tensor own = (*forked)(ones), after = (*plain)(ones);
    const at::Tensor owns = parallel::all_gather_along(group, own.unsqueeze(0), 0);
    const at::Tensor afters = parallel::all_gather_along(group, after.unsqueeze(0), 0);
    EXPECT_FALSE(owns[0].equal(owns[1])) << "each rank its own mask";
    EXPECT_TRUE(afters[0].equal(afters[1])) << "the default stream in step after the fork";
    torch::manual_seed(11);
    EXPECT_TRUE((*forked)(ones).equal(own)) << "the same mask from the same state (what recompute replays)";
    forked->eval();
    torch::manual_seed(11);
    EXPECT_TRUE((*forked)(ones).equal(ones));
    torch::manual_seed(11);
    const at::Tensor unforked = (*plain)(ones);
    torch::manual_seed(11);
    forked->train();
    (*forked)(ones);
    EXPECT_FALSE((*plain)(ones).equal(unforked)) << "training mode draws one number from the default stream";
  });
}

// GPT's dropout beside TP (attention dropout on each rank's heads, with sequence parallelism all
// of it on each rank's slices) is replayed by recompute: the same losses with and without it.
TEST(TensorParallel, RecomputeReplaysEachRanksDropout) {
  const std::string gpt = kGptFlags + " --attention-dropout 0.1 --hidden-dropout 0.1 --tensor-model-parallel-size 2 --use-torch-fsdp2";
  const std::string recompute = " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  for (const std::string& layout : {std::string(""), std::string(" --sequence-parallel")}) {
    const TrainRun run = train(2, gpt + layout);
    ASSERT_EQ(run.result.status, 0) << run.result.output;
    expect_same_losses(run, train(2, gpt + layout + recompute), "recompute" + layout, 1e-6);
  }
}

// MindSpeed's chunk loss beside TP: each chunk's cross-entropy is the vocabulary-parallel one of
// the rank's slice of its logits; an untied output layer (lm_head) and one tied to the embedding,
// with and without sequence parallelism: one rank's losses and gradient norms.
TEST(TensorParallel, ChunkedLossIsVocabularyParallel) {
  const std::string chunk = " --loss-compute-mode chunk --loss-chunk-size 12";
  std::string tied = kTpFlags;
  const std::string untie = " --untie-embeddings-and-output-weights";
  tied.erase(tied.find(untie), untie.size());
  for (const auto& [name, flags] : std::vector<std::pair<std::string, std::string>>{{"untied", kTpFlags}, {"tied", tied}}) {
    const TrainRun reference = train(1, flags + chunk);
    ASSERT_EQ(reference.result.status, 0) << reference.result.output;
    for (const auto& [layout, ranks, parallel] : std::vector<std::tuple<std::string, int, std::string>>{
             {"tp2", 2, " --tensor-model-parallel-size 2"},
             {"tp2-sp-fsdp2", 4, " --tensor-model-parallel-size 2 --sequence-parallel --use-torch-fsdp2"}}) {
      const TrainRun run = train(ranks, flags + chunk + parallel);
      expect_same_losses(reference, run, name + " " + layout, 1e-5);
      EXPECT_EQ(grad_norms(run), grad_norms(reference)) << name << " " << layout;
    }
  }
}

// The vocabulary-parallel cross-entropy of each rank's slice of the logits is the cross-entropy
// of the whole logits, its gradient the rank's slice of the whole one; labels on either rank and
// logits far apart (a shift the maximum must absorb) included.
TEST(TensorParallel, VocabParallelCrossEntropyIsTheWholeOnesOnEachSlice) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const parallel::Group& group = rt.world();
    torch::manual_seed(7);  // the same whole logits on both ranks
    const at::Tensor whole = torch::randn({6, 10}, torch::kDouble) * 4 + torch::arange(10, torch::kDouble) * 3;
    const at::Tensor labels = torch::tensor({0, 4, 5, 9, 2, 7}, torch::kLong), upstream = torch::rand({6}, torch::kDouble);
    const at::Tensor reference_logits = whole.clone().requires_grad_(true);
    const at::Tensor reference = torch::cross_entropy_loss(reference_logits, labels, {}, at::Reduction::None);
    (reference * upstream).sum().backward();
    const at::Tensor slice = whole.narrow(1, group.rank * 5, 5).clone().requires_grad_(true);
    const at::Tensor loss = parallel::vocab_parallel_cross_entropy(slice, labels, group);
    (loss * upstream).sum().backward();
    EXPECT_TRUE(loss.allclose(reference, 1e-12, 1e-12)) << loss << reference;
    EXPECT_TRUE(slice.grad().allclose(reference_logits.grad().narrow(1, group.rank * 5, 5), 1e-12, 1e-12));
  });
}

// The vocabulary-parallel embedding gives the whole embedding's vectors (summed, or with
// sequence parallelism each rank's slice of the sequence) and each rank's rows their gradient.
TEST(TensorParallel, VocabParallelEmbeddingIsTheWholeOnes) {
  testing::run_on_ranks(2, [](parallel::DistributedRuntime& rt) {
    const parallel::Group& group = rt.world();
    for (const bool scatter : {false, true}) {
      torch::manual_seed(3);
      models::Embedding whole(10, 4, torch::TensorOptions(torch::kDouble)), split(10, 4, torch::TensorOptions(torch::kDouble));
      {
        torch::NoGradGuard no_grad;
        split.parameters()[0].copy_(whole.parameters()[0]);
      }
      parallel::split_vocab_embedding(split, "weight", group, scatter);
      const at::Tensor ids = torch::tensor({{0, 4, 5, 9}, {2, 7, 7, 1}}, torch::kLong);
      const at::Tensor upstream = torch::rand({2, 4, 4}, torch::kDouble);
      const at::Tensor reference = whole(ids);
      (reference * upstream).sum().backward();
      const at::Tensor out = split(ids);
      const at::Tensor mine = scatter ? upstream.narrow(1, group.rank * 2, 2) : upstream;
      (out * mine).sum().backward();
      const at::Tensor expected = scatter ? reference.narrow(1, group.rank * 2, 2) : reference;
      EXPECT_TRUE(out.allclose(expected, 1e-12, 1e-12)) << "scatter " << scatter << "\n" << out << expected;
      EXPECT_TRUE(split.parameters()[0].grad().allclose(whole.parameters()[0].grad().narrow(0, group.rank * 5, 5), 1e-12, 1e-12))
          << "scatter " << scatter;
    }
  });
}

// LoRA adapters split like their base layers (lora_B of a column-parallel layer by rows, lora_A
// of a row-parallel one by columns, the other factor replicated with partial gradients): the
// adapters train as on one rank, with sequence parallelism too.
TEST(TensorParallel, LoraAdaptersTrainAsOnOneRank) {
  const std::string lora =
      testing::kLoraTestModel + "--lr 1e-2" + testing::kLoraTestAdapters + " --clip-grad 0.05 --make-vocab-size-divisible-by 64";
  const TrainRun reference = train(1, lora);
  ASSERT_EQ(reference.result.status, 0) << reference.result.output;
  for (const auto& [name, ranks, flags] : std::vector<std::tuple<std::string, int, std::string>>{
           {"tp2", 2, " --tensor-model-parallel-size 2"},
           {"tp2-sp-fsdp2", 4, " --tensor-model-parallel-size 2 --sequence-parallel --use-torch-fsdp2"}}) {
    const TrainRun run = train(ranks, lora + flags);
    expect_same_losses(reference, run, name, 1e-5);
    EXPECT_EQ(grad_norms(run), grad_norms(reference)) << name;
  }
}

// Checkpoints record the whole parameters (each TP rank writes its slice's block at its offsets),
// so any layout resumes any other, in both formats, and a Hugging Face export loads at TP 2.
TEST(TensorParallel, CheckpointsResumeOnEveryLayoutAndExportsLoadAtTp2) {
  const std::string dir = testing::scratch_dir();
  const std::string layers = testing::fsdp_flags(dir, "layers.yaml", "sub_modules_to_wrap: ['layers.{*}']\n");
  expect_checkpoints_move_between_layouts(kTpFlags, layers, dir);
}

TEST(TensorParallel, RefusesWhatItCannotSplitNamingTheSizes) {
  const std::string tp2 = " --tensor-model-parallel-size 2";
  const std::string gpt =
      "--mock-data --tokenizer-type NullTokenizer --vocab-size 99 --num-layers 2 --hidden-size 32 --num-attention-heads 4 "
      "--ffn-hidden-size 48 --seq-length 16 --micro-batch-size 2 --global-batch-size 8 --train-iters 2";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {kTpFlags + tp2 + " --num-query-groups 1",
       "--tensor-model-parallel-size 2: the 1 query groups (--num-query-groups) of layers.0.self_attn must divide by it"},
      {kTpFlags + tp2 + " --ffn-hidden-size 61",
       "--tensor-model-parallel-size 2: the 61 FFN columns (--ffn-hidden-size) of layers.0.mlp must divide by it"},
      {kTpFlags + " --tensor-model-parallel-size 4", "--tensor-model-parallel-size=4 does not divide the world size 2"},
      {kTpFlags + tp2 + " --context-parallel-size 2",
       "--tensor-model-parallel-size=2 with --context-parallel-size=2: tensor parallelism beside Ulysses is not supported yet"},
      {kTpFlags + tp2 + " --sequence-parallel --seq-length 15",
       "--sequence-parallel: --seq-length 15 does not divide by --tensor-model-parallel-size 2"},
      {gpt + tp2 + " --num-attention-heads 1",
       "--tensor-model-parallel-size 2: the 1 attention heads (--num-attention-heads) of h.0.attn.c_attn must divide by it"},
      {kTpFlags + tp2 + " --padded-vocab-size 129",
       "--tensor-model-parallel-size 2: the 129 rows of the padded vocabulary (--make-vocab-size-divisible-by, "
       "--padded-vocab-size) of embed_tokens must divide by it"},
  };
  for (const auto& [flags, message] : cases) {
    const TrainRun refused = train(2, flags);
    EXPECT_NE(refused.result.status, 0) << flags;
    EXPECT_NE(refused.result.output.find(message), std::string::npos) << flags << "\n" << refused.result.output;
  }
  const TrainRun one_rank = train(1, kTpFlags + tp2);
  EXPECT_NE(one_rank.result.output.find("--tensor-model-parallel-size=2 does not divide the world size 1"), std::string::npos)
      << one_rank.result.output;
}

}  // namespace
}  // namespace megacpp
