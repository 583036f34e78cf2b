// The data section (Note [Flag sections]): the datasets and their split, image-text
// normalization, the tokenizer and how samples are loaded.
#include <stdexcept>

#include "io/data/image_text_dataset.h"
#include "io/data/instruction_data.h"
#include "io/data/tokenizer/tokenizer_flags.h"
#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_data_flags(cxxopts::Options& o) {
  o.add_options("data")
      ("mock-data", "synthetic token batches that depend only on the seed and sample index")
      ("data-path", "dataset prefix (PREFIX.bin/.idx or FILE.h5), a blend: W1 PREFIX1 W2 PREFIX2 ..., or image-text FILE.jsonl",
       cxxopts::value<std::string>()->default_value(""))
      ("is-instruction-dataset", "--data-path is the PREFIX of megacpp-preprocess --handler-name's conversations (MindSpeed-LLM's "
       "instruction datasets): one per sample, the loss on the assistants' tokens")
      ("variable-seq-lengths", "--is-instruction-dataset: each micro-batch only as long as its longest conversation, not "
       "--seq-length + 1")
      ("prompt-type", "--is-instruction-dataset: the chat template the conversations were rendered with (megacpp-preprocess "
       "--prompt-type), checked against the data's record of it", cxxopts::value<std::string>()->default_value(""))
      ("padded-samples", "--is-instruction-dataset: each pass over the conversations padded with its first ones to whole "
       "global batches, so no global batch holds two passes (MindSpeed-LLM's)")
      ("reset-position-ids", "number each document's tokens from 0 (documents end at the end-of-document token, or are "
       "the conversations of instruction data)")
      ("reset-attention-mask", "a token attends only to its own document's earlier tokens")
      ("eod-mask-loss", "no loss on the token that follows an end-of-document token")
      ("split", "train,validation,test proportions of each dataset's sequences", cxxopts::value<std::string>()->default_value("969,30,1"))
      ("image-mean", "image-text data: the per-channel mean images are normalized with (CLIP's)",
       cxxopts::value<std::string>()->default_value("0.48145466,0.4578275,0.40821073"))
      ("image-std", "image-text data: the per-channel std images are normalized with (CLIP's)",
       cxxopts::value<std::string>()->default_value("0.26862954,0.26130258,0.27577711"));
  io::data::add_tokenizer_flags(o, "data");
  o.add_options("data loading")
      ("dataloader-type", "single: the training samples in order; cyclic: a random order drawn anew each pass",
       cxxopts::value<std::string>()->default_value("single"))
      ("num-workers", "threads that read the next iteration's micro-batches while one computes (0: read when needed)",
       cxxopts::value<std::string>()->default_value("2"))
      ("data-cache-path", "keep the datasets' sample indices here and reuse them in later runs", cxxopts::value<std::string>()->default_value(""));
}

// With --init-from-hf-path and no tokenizer flag, the folder's tokenizer.json (Note [Hugging
// Face folders]).
bool uses_folder_tokenizer(const cxxopts::ParseResult& r) {
  for (const char* flag : {"tokenizer-type", "tokenizer-model", "tokenizer-name-or-path", "vocab-file", "merge-file"}) {
    if (r.count(flag)) return false;
  }
  return !r["init-from-hf-path"].as<std::string>().empty();
}

// --is-instruction-dataset reads one PREFIX of conversations (Note [Instruction data]).
void check_instruction_flags(const TrainingArguments& a, const cxxopts::ParseResult& r) {
  require(!a.mock_data && a.data_path.size() == 1 && !io::data::is_image_text_path(a.data_path),
          "--is-instruction-dataset needs --data-path PREFIX, one prefix of megacpp-preprocess --handler-name "
          "AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler (no blend, mock or image-text data)");
}

void check_data_flags(const TrainingArguments& a) {
  require(a.mock_data != !a.data_path.empty(), a.mock_data ? "--mock-data and --data-path exclude each other"
                                                             : "no training data: pass --data-path PREFIX (or --mock-data)");
  require(a.dataloader_type == "single" || a.dataloader_type == "cyclic",
          "--dataloader-type " + a.dataloader_type + ": not supported (only single or cyclic; Megatron's external needs a "
          "Python data loader)");
  require(a.num_workers >= 0 && a.num_workers <= 64, "--num-workers must be in [0, 64]");
}

void read_data_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.mock_data = r["mock-data"].as<bool>();
  a.data_path = split_words(r["data-path"].as<std::string>());
  a.is_instruction_dataset = r["is-instruction-dataset"].as<bool>();
  a.variable_seq_lengths = r["variable-seq-lengths"].as<bool>();
  a.padded_samples = r["padded-samples"].as<bool>();
  require(!a.padded_samples || a.is_instruction_dataset,
          "--padded-samples needs --is-instruction-dataset (token data is read as one stream of samples, with no passes to pad)");
  a.reset_position_ids = r["reset-position-ids"].as<bool>();
  a.reset_attention_mask = r["reset-attention-mask"].as<bool>();
  a.eod_mask_loss = r["eod-mask-loss"].as<bool>();
  require(!a.variable_seq_lengths || a.is_instruction_dataset,
          "--variable-seq-lengths needs --is-instruction-dataset (token data fills every sample to --seq-length + 1)");
  if (a.is_instruction_dataset) check_instruction_flags(a, r);
  const std::string prompt_type = r["prompt-type"].as<std::string>();
  if (!prompt_type.empty()) {
    require(a.is_instruction_dataset, "--prompt-type needs --is-instruction-dataset (megacpp-preprocess renders conversations with it)");
    io::data::check_instruction_prompt_type(a.data_path[0], prompt_type);
  }
  a.split = r["split"].as<std::string>();
  a.image_mean = parse_channel_values("image-mean", r["image-mean"].as<std::string>());
  a.image_std = parse_channel_values("image-std", r["image-std"].as<std::string>());
  for (const char* flag : {"image-mean", "image-std"}) {
    if (r.count(flag) && !io::data::is_image_text_path(a.data_path)) {
      throw std::invalid_argument("--" + std::string(flag) + " applies to image-text data (--data-path FILE.jsonl) only");
    }
  }
  a.tokenizer = io::data::read_tokenizer_flags(r);
  if (uses_folder_tokenizer(r)) {
    a.tokenizer.type = "HuggingFaceTokenizer";
    a.tokenizer.tokenizer_model = r["init-from-hf-path"].as<std::string>();
    a.tokenizer.tokenizer_model_flag = "--init-from-hf-path";
  }
  a.flag_values["tokenizer-type"] = a.tokenizer.type;
  a.num_workers = flag_number<int>(r, "num-workers");
  a.dataloader_type = r["dataloader-type"].as<std::string>();
  a.data_cache_path = r["data-cache-path"].as<std::string>();
  check_data_flags(a);
}

}  // namespace

FlagSection data_section() { return {"data", declare_data_flags, read_data_flags}; }

}  // namespace megacpp::settings
