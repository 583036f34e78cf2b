// megacpp-caption: greedy captions of held-out images by a vision-language checkpoint, and
// their accuracy (the share of captions equal to the reference text).
//   megacpp-caption --load SAVE --data-path test.jsonl [--ckpt-step N] [tokenizer flags]
//                   [--image-mean M --image-std S] [--micro-batch-size 64] [--show 5]
// The tokenizer and image flags must be the training run's. Argument errors exit 2, failures 1.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "checkpoint/checkpoint_model.h"
#include "checkpoint/model_args.h"
#include "inference/captioning.h"
#include "io/data/image_text_dataset.h"
#include "io/data/tokenizer/tokenizer_flags.h"
#include "launch/load_section.h"
#include "launch/tool_run.h"
#include "megacpp/process_end.h"
#include "models/model_flags.h"
#include "settings/flag_section.h"

namespace {

using namespace megacpp;

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-caption", "Caption held-out images greedily with a vision-language checkpoint and score the captions.");
  auto text = [] { return cxxopts::value<std::string>(); };
  launch::add_load_flags(o, "", "to caption with");
  o.add_options()("data-path", "image-text JSON lines to caption ({\"image\": ..., \"text\": the reference})", text()->default_value(""));
  io::data::add_tokenizer_flags(o, "");
  o.add_options()
      ("image-mean", "the training run's --image-mean", text()->default_value("0.48145466,0.4578275,0.40821073"))
      ("image-std", "the training run's --image-std", text()->default_value("0.26862954,0.26130258,0.27577711"))
      ("micro-batch-size", "images captioned together", text()->default_value("64"))
      ("show", "captions printed besides the score", text()->default_value("5"));
  return o;
}

int caption(const cxxopts::ParseResult& r) {
  const std::string load = r["load"].as<std::string>(), path = r["data-path"].as<std::string>();
  if (load.empty() || path.empty()) throw std::invalid_argument("megacpp-caption needs --load and --data-path");
  const auto reader = launch::open_checkpoint(r);
  const auto model = checkpoint::load_checkpoint_model(reader);
  const auto inputs = checkpoint::checkpoint_model(reader)->image_inputs();
  if (!inputs) throw std::invalid_argument("--load " + load + ": its model takes no images");
  const auto tokenizer = io::data::build_tokenizer(io::data::read_tokenizer_flags(r));
  const io::data::ImageTextFormat format{inputs->token_id, inputs->tokens_per_image,
                                     {inputs->size, inputs->channels, settings::parse_channel_values("image-mean", r["image-mean"].as<std::string>()),
                                      settings::parse_channel_values("image-std", r["image-std"].as<std::string>())}};
  const int64_t max_length = checkpoint::args_json(reader.object("args")).value("seq_length", int64_t{0});
  if (max_length <= 0) throw std::runtime_error(reader.dir() + ": its args record no seq_length");
  const auto records = io::data::read_image_text_file(path, *tokenizer, format, max_length + 1);
  const int64_t batch = models::parse_flag_number<int64_t>("micro-batch-size", r["micro-batch-size"].as<std::string>());
  if (batch <= 0) throw std::invalid_argument("--micro-batch-size must be positive");
  const auto score = inference::score_captions(*model, records, *tokenizer, format, max_length, batch);
  const auto show = static_cast<size_t>(models::parse_flag_number<int64_t>("show", r["show"].as<std::string>()));
  for (size_t i = 0; i < std::min(show, score.captions.size()); ++i) {
    const auto& c = score.captions[i];
    std::printf("%s: \"%s\" (reference \"%s\")\n", c.where.c_str(), c.generated.c_str(), c.reference.c_str());
  }
  std::printf("caption accuracy: %.2f%% (%lld of %lld images of %s captioned as their reference by %s)\n",
              100.0 * score.accuracy(), static_cast<long long>(score.correct), static_cast<long long>(score.images), path.c_str(),
              reader.dir().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(megacpp::launch::run_tool("megacpp-caption", make_options(), argc, argv, caption)); }
