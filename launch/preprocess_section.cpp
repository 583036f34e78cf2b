#include "launch/preprocess_section.h"

#include <charconv>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/data/tokenizer/tokenizer_flags.h"

namespace megacpp::launch {

cxxopts::Options preprocess_options() {
  cxxopts::Options o("megacpp-preprocess", "Tokenize text into a Megatron indexed dataset (PREFIX_<key>_document)");
  auto text = [] { return cxxopts::value<std::string>(); };
  o.add_options("input data")
      ("input", "input file: JSON lines, or plain text (see --input-format)", text())
      ("input-format", "auto (text for *.txt, else jsonl) | jsonl | text", text()->default_value("auto"))
      ("document-separator", "text: a line equal to this ends a document (e.g. %); default: one document per line", text()->default_value(""))
      ("json-keys", "JSON keys to extract, as separate words or comma-separated; one output per key", text()->default_value("text"));
  o.add_options("tokenization")
      ("append-eod", "append the end-of-document token to every non-empty document");
  io::data::add_tokenizer_flags(o, "tokenization");
  o.add_options("instruction data (MindSpeed-LLM's)")
      ("handler-name", "AlpacaStyleInstructionHandler or SharegptStyleInstructionHandler: conversations with a loss mask, "
       "written as PREFIX_packed_{input_ids,labels,attention_mask}_document; GeneralPretrainHandler: text as without it",
       text()->default_value("GeneralPretrainHandler"))
      ("prompt-type", "the chat template: qwen, chatml, llama3 or empty (default: the tokenizer folder's)", text()->default_value(""))
      ("map-keys", "the dataset's key names and role tags, a JSON object (e.g. '{\"prompt\":\"question\"}')", text()->default_value(""))
      ("seq-length", "refuse conversations longer than this many tokens (0: any)", text()->default_value("0"))
      ("pack", "pack several conversations into each sequence of at most --seq-length tokens, the attention mask numbering "
       "them (train with --reset-attention-mask --reset-position-ids to keep them apart)")
      ("neat-pack", "MindSpeed-LLM's --pack with numbered attention masks: what --pack writes (needs --pack)");
  o.add_options("output data")
      ("output-prefix", "output path without suffix: writes PREFIX_<key>_document.bin/.idx (or .h5)", text())
      ("output-format", "mmap (Megatron .bin/.idx) | hdf5", text()->default_value("mmap"));
  o.add_options("images")
      ("pack-images", "image-text JSON lines: decode, resize and crop every image once into PREFIX.pixels, with PREFIX.jsonl "
       "pointing into it (the text is tokenized when training)")
      ("img-h", "--pack-images: the vision tower's image height in pixels", text()->default_value("224"))
      ("img-w", "--pack-images: its width (square images: --img-h)", text()->default_value("224"))
      ("num-channels", "--pack-images: its channels (1 or 3)", text()->default_value("3"));
  o.add_options("runtime")
      ("workers", "tokenizing threads (output order is preserved)", text()->default_value("1"))
      ("log-interval", "documents between progress lines", text()->default_value("1000"))
      ("h,help", "show this help");
  return o;
}

namespace {

int64_t parse_int(const cxxopts::ParseResult& r, const std::string& flag) {
  const std::string s = r[flag].as<std::string>();
  int64_t v = 0;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (error != std::errc() || end != s.data() + s.size()) {
    throw std::invalid_argument("--" + flag + " '" + s + "': expected an integer");
  }
  return v;
}

// Megatron takes `--json-keys text title` (nargs='+'): fold the words after --json-keys into
// one comma-separated value for cxxopts.
std::vector<std::string> fold_json_keys(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    out.push_back(args[i]);
    if (args[i] != "--json-keys") continue;
    std::string keys;
    while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) keys += (keys.empty() ? "" : ",") + args[++i];
    out.push_back(keys);
  }
  return out;
}

std::vector<std::string> split_keys(const std::string& keys) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = keys.find(',', start);
    out.push_back(keys.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// --pack-images: the image flags; the text flags are refused by name (they would do nothing).
io::data::ImagePackOptions parse_image_pack(const cxxopts::ParseResult& r) {
  std::vector<std::string> text_flags = io::data::tokenizer_flag_names();
  text_flags.insert(text_flags.begin(), {"input-format", "document-separator", "json-keys", "append-eod"});
  text_flags.push_back("output-format");
  for (const auto& flag : text_flags) {
    if (r.count(flag)) throw std::invalid_argument("--pack-images packs images only (the text is tokenized when training): drop --" + flag);
  }
  io::data::ImagePackOptions o;
  if (r.count("input")) o.input = r["input"].as<std::string>();
  if (r.count("output-prefix")) o.output_prefix = r["output-prefix"].as<std::string>();
  if (o.input.empty() || o.output_prefix.empty()) throw std::invalid_argument("--pack-images needs --input and --output-prefix");
  o.size = parse_int(r, "img-h");
  if (parse_int(r, "img-w") != o.size) throw std::invalid_argument("--img-w must equal --img-h: the tower's images are square");
  if (o.size < 1) throw std::invalid_argument("--img-h must be positive");
  o.channels = parse_int(r, "num-channels");
  if (o.channels != 1 && o.channels != 3) throw std::invalid_argument("--num-channels must be 1 or 3");
  const int64_t workers = parse_int(r, "workers");
  if (workers < 1 || workers > 1024) throw std::invalid_argument("--workers must be in [1, 1024]");
  o.workers = static_cast<int>(workers);
  o.log_interval = parse_int(r, "log-interval");
  if (o.log_interval < 1) throw std::invalid_argument("--log-interval must be >= 1");
  return o;
}

// An instruction --handler-name: the conversation flags; the text-only ones are refused by name.
io::data::InstructionOptions parse_instructions(const cxxopts::ParseResult& r, const std::string& handler) {
  for (const char* flag : {"input-format", "document-separator", "json-keys", "append-eod", "output-format", "workers"}) {
    if (r.count(flag)) throw std::invalid_argument("--" + std::string(flag) + " applies to text, not to --handler-name " + handler);
  }
  io::data::InstructionOptions o;
  if (r.count("input")) o.input = r["input"].as<std::string>();
  if (r.count("output-prefix")) o.output_prefix = r["output-prefix"].as<std::string>();
  if (o.input.empty() || o.output_prefix.empty()) throw std::invalid_argument("--handler-name " + handler + " needs --input and --output-prefix");
  o.handler = handler;
  o.prompt_type = r["prompt-type"].as<std::string>();
  o.map_keys = r["map-keys"].as<std::string>();
  io::data::map_keys_of(o.map_keys);  // malformed JSON is an argument error
  o.seq_length = parse_int(r, "seq-length");
  if (o.seq_length < 0) throw std::invalid_argument("--seq-length must be >= 0");
  o.pack = r.count("pack") > 0;
  if (r.count("neat-pack") && !o.pack) throw std::invalid_argument("--neat-pack needs --pack");
  if (o.pack && o.seq_length == 0) throw std::invalid_argument("--pack needs --seq-length, the tokens of a pack");
  o.log_interval = parse_int(r, "log-interval");
  if (o.log_interval < 1) throw std::invalid_argument("--log-interval must be >= 1");
  o.tokenizer = io::data::read_tokenizer_flags(r);
  const auto tokenizer = io::data::build_tokenizer(o.tokenizer);
  io::data::chat_template_of(o.prompt_type, o.tokenizer, *tokenizer, "--handler-name " + handler);  // as is a missing one
  return o;
}

// GeneralPretrainHandler: text documents; the conversation flags are refused by name.
io::data::PreprocessOptions parse_text(const cxxopts::ParseResult& r) {
  for (const char* flag : {"prompt-type", "map-keys", "seq-length", "pack", "neat-pack"}) {
    if (r.count(flag)) throw std::invalid_argument("--" + std::string(flag) + " needs an instruction --handler-name");
  }
  io::data::PreprocessOptions o;
  if (r.count("input")) o.input = r["input"].as<std::string>();
  if (r.count("output-prefix")) o.output_prefix = r["output-prefix"].as<std::string>();
  o.input_format = r["input-format"].as<std::string>();
  o.document_separator = r["document-separator"].as<std::string>();
  o.json_keys = split_keys(r["json-keys"].as<std::string>());
  o.output_format = r["output-format"].as<std::string>();
  o.append_eod = r["append-eod"].as<bool>();
  const int64_t workers = parse_int(r, "workers");
  if (workers < 1 || workers > 1024) throw std::invalid_argument("--workers must be in [1, 1024]");
  o.workers = static_cast<int>(workers);
  o.log_interval = parse_int(r, "log-interval");
  o.tokenizer = io::data::read_tokenizer_flags(r);
  io::data::validate_preprocess_options(o);
  io::data::build_tokenizer(o.tokenizer);  // a bad tokenizer flag or file is an argument error (exit 2)
  return o;
}

cxxopts::ParseResult parse_flags(int argc, char** argv) {
  const std::vector<std::string> args = fold_json_keys(argc, argv);
  std::vector<const char*> argv2;
  for (const auto& a : args) argv2.push_back(a.c_str());
  cxxopts::ParseResult r;
  try {
    r = preprocess_options().parse(static_cast<int>(argv2.size()), argv2.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(e.what());
  }
  if (r.unmatched().size() > 0) throw std::invalid_argument("unexpected argument '" + r.unmatched()[0] + "'");
  return r;
}

}  // namespace

PreprocessJob read_preprocess_job(int argc, char** argv, bool* help) {
  const cxxopts::ParseResult r = parse_flags(argc, argv);
  *help = r.count("help") > 0;
  PreprocessJob job;
  if (*help) return job;
  if (r["pack-images"].as<bool>()) {
    job.kind = PreprocessJob::Kind::kImages;
    job.images = parse_image_pack(r);
    return job;
  }
  for (const char* flag : {"img-h", "img-w", "num-channels"}) {
    if (r.count(flag)) throw std::invalid_argument("--" + std::string(flag) + " needs --pack-images");
  }
  const std::string handler = r["handler-name"].as<std::string>();
  if (io::data::is_instruction_handler(handler)) {
    job.kind = PreprocessJob::Kind::kInstructions;
    job.conversations = parse_instructions(r, handler);
    return job;
  }
  if (handler != "GeneralPretrainHandler") {
    throw std::invalid_argument("--handler-name " + handler + ": megacpp-preprocess reads GeneralPretrainHandler (text), "
                                "AlpacaStyleInstructionHandler and SharegptStyleInstructionHandler (conversations)");
  }
  job.text = parse_text(r);
  return job;
}

}  // namespace megacpp::launch
