// megacpp-preprocess: text -> Megatron indexed dataset (or HDF5), with the flags of Megatron-LM's
// tools/preprocess_data.py. The work is megacpp::data::preprocess (megacpp/data/preprocess.h);
// this file only parses flags. Argument errors exit 2, failures 1; progress goes to stderr,
// the summary to stdout.
#include <charconv>
#include <cxxopts.hpp>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "megacpp/data/preprocess.h"

namespace {

using megacpp::data::PreprocessOptions;

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-preprocess", "Tokenize text into a Megatron indexed dataset (PREFIX_<key>_document)");
  auto text = [] { return cxxopts::value<std::string>(); };
  o.add_options("input data")
      ("input", "input file: JSON lines, or plain text (see --input-format)", text())
      ("input-format", "auto (text for *.txt, else jsonl) | jsonl | text", text()->default_value("auto"))
      ("document-separator", "text: a line equal to this ends a document (e.g. %); default: one document per line", text()->default_value(""))
      ("json-keys", "JSON keys to extract, as separate words or comma-separated; one output per key", text()->default_value("text"));
  o.add_options("tokenization")
      ("append-eod", "append the end-of-document token to every non-empty document")
      ("tokenizer-type", "GPT2BPETokenizer | HuggingFaceTokenizer (or PretrainedFromHF) | ByteLevelTokenizer | NullTokenizer",
       text()->default_value("ByteLevelTokenizer"))
      ("vocab-file", "GPT2BPETokenizer: encoder.json", text()->default_value(""))
      ("merge-file", "GPT2BPETokenizer: vocab.bpe", text()->default_value(""))
      ("tokenizer-model", "HuggingFaceTokenizer: a folder with tokenizer.json (or the file)", text()->default_value(""))
      ("tokenizer-name-or-path", "MindSpeed's spelling of --tokenizer-model", text()->default_value(""))
      ("vocab-size", "NullTokenizer: ids are 0..N-1, eod is N", text()->default_value("0"));
  o.add_options("output data")
      ("output-prefix", "output path without suffix: writes PREFIX_<key>_document.bin/.idx (or .h5)", text())
      ("output-format", "mmap (Megatron .bin/.idx) | hdf5", text()->default_value("mmap"));
  o.add_options("runtime")
      ("workers", "tokenizing threads (output order is preserved)", text()->default_value("1"))
      ("log-interval", "documents between progress lines", text()->default_value("1000"))
      ("h,help", "show this help");
  return o;
}

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

PreprocessOptions parse(int argc, char** argv, bool* help) {
  auto options = make_options();
  const std::vector<std::string> args = fold_json_keys(argc, argv);
  std::vector<const char*> argv2;
  for (const auto& a : args) argv2.push_back(a.c_str());
  cxxopts::ParseResult r;
  try {
    r = options.parse(static_cast<int>(argv2.size()), argv2.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(e.what());
  }
  if (r.unmatched().size() > 0) throw std::invalid_argument("unexpected argument '" + r.unmatched()[0] + "'");
  *help = r.count("help") > 0;
  PreprocessOptions o;
  if (*help) return o;
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
  o.tokenizer.type = r["tokenizer-type"].as<std::string>();
  o.tokenizer.vocab_file = r["vocab-file"].as<std::string>();
  o.tokenizer.merge_file = r["merge-file"].as<std::string>();
  megacpp::data::set_tokenizer_model(o.tokenizer, r["tokenizer-model"].as<std::string>(),
                                     r["tokenizer-name-or-path"].as<std::string>());
  o.tokenizer.vocab_size = parse_int(r, "vocab-size");
  megacpp::data::validate_preprocess_options(o);
  megacpp::data::build_tokenizer(o.tokenizer);  // a bad tokenizer flag or file is an argument error (exit 2)
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  PreprocessOptions options;
  bool help = false;
  try {
    options = parse(argc, argv, &help);
  } catch (const std::invalid_argument& e) {
    std::cerr << "megacpp-preprocess: error: " << e.what() << "\n(see 'megacpp-preprocess --help')\n";
    return 2;
  }
  if (help) {
    std::cout << make_options().help();
    return 0;
  }
  try {
    const auto result = megacpp::data::preprocess(options, &std::cerr);
    std::cout << megacpp::data::format_summary(result);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "megacpp-preprocess: error: " << e.what() << "\n";
    return 1;
  }
}
