// megacpp-convert: Hugging Face <-> megacpp checkpoints.
//   megacpp-convert export --load SAVE [--ckpt-step N] --output HF_DIR [--dtype float32|bfloat16]
//                          [--lora-load ADAPTERS] [--merge-lora] [--base-model NAME]
//   megacpp-convert import --input HF_DIR --save SAVE [--ckpt-format torch_dist|torch_dcp] [--model-type NAME]
// --model-library PATH.so adds the model families a library registers.
// The work is in checkpoint/hf_convert.h; this file parses flags. Argument errors exit 2,
// failures 1.
#include <cxxopts.hpp>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

#include "checkpoint/hf_convert.h"
#include "megacpp/logging.h"
#include "settings/model_arguments.h"
#include "models/registry.h"
#include "megacpp/process_end.h"

namespace {

using namespace megacpp::checkpoint;

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-convert", "Convert between megacpp checkpoints and Hugging Face folders.\n"
                                        "  megacpp-convert export --load SAVE --output HF_DIR [--dtype bfloat16] [--lora-load ADAPTERS] [--merge-lora]\n"
                                        "  megacpp-convert import --input HF_DIR --save SAVE");
  auto text = [] { return cxxopts::value<std::string>(); };
  o.add_options("export")
      ("load", "checkpoint root to export (Megatron layout)", text()->default_value(""))
      ("ckpt-step", "the iteration to export (default: the latest)", text()->default_value(""))
      ("output", "Hugging Face folder to write", text()->default_value(""))
      ("dtype", "float32 or bfloat16", text()->default_value("float32"))
      ("max-shard-size", "largest safetensors file in bytes before sharding", text()->default_value("5000000000"))
      ("lora-load", "LoRA: the adapters' checkpoint root (--load then gives the base model)", text()->default_value(""))
      ("merge-lora", "LoRA: write the model with the adapters merged in (default: a PEFT adapter folder)")
      ("base-model", "LoRA: the PEFT folder's base_model_name_or_path", text()->default_value(""));
  o.add_options("import")
      ("input", "Hugging Face folder to import (config.json + safetensors)", text()->default_value(""))
      ("save", "checkpoint root to write SAVE/release/ into", text()->default_value(""))
      ("ckpt-format", "torch_dist or torch_dcp", text()->default_value("torch_dist"))
      ("model-type", "the model family to read config.json with, when several read its model_type", text()->default_value(""));
  o.add_options("")
      ("model-library", "shared library that registers model families (may repeat)", text())
      ("h,help", "show this help")("command", "export or import", text());
  o.parse_positional({"command"});
  return o;
}

int64_t parse_int(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || text.empty() || v < 0) throw std::invalid_argument("--" + flag + " '" + text + "': expected a non-negative integer");
  return v;
}

std::string required(const cxxopts::ParseResult& r, const std::string& flag, const std::string& command) {
  const std::string v = r[flag].as<std::string>();
  if (v.empty()) throw std::invalid_argument(command + " needs --" + flag);
  return v;
}

}  // namespace

namespace {

int run(int argc, char** argv) {
  auto options = make_options();
  std::string command;
  cxxopts::ParseResult r;
  try {
    for (const auto& path : megacpp::settings::model_libraries_in(argc, argv)) megacpp::models::load_model_library(path);
    r = options.parse(argc, argv);
    if (r.count("help")) {
      std::cout << options.help() << std::endl;
      return 0;
    }
    if (!r.count("command")) throw std::invalid_argument("give a command: export or import");
    command = r["command"].as<std::string>();
    if (command != "export" && command != "import") throw std::invalid_argument("unknown command '" + command + "' (export or import)");
  } catch (const std::exception& e) {
    std::cerr << "megacpp-convert: " << e.what() << "\n";
    return 2;
  }
  try {
    if (command == "export") {
      HfExportOptions o;
      try {
        o.load = required(r, "load", command);
        o.output = required(r, "output", command);
        if (!r["ckpt-step"].as<std::string>().empty()) o.step = parse_int("ckpt-step", r["ckpt-step"].as<std::string>());
        o.dtype = r["dtype"].as<std::string>();
        if (o.dtype != "float32" && o.dtype != "bfloat16") throw std::invalid_argument("--dtype must be float32 or bfloat16");
        o.max_shard_bytes = static_cast<uint64_t>(parse_int("max-shard-size", r["max-shard-size"].as<std::string>()));
        if (o.max_shard_bytes == 0) throw std::invalid_argument("--max-shard-size must be positive");
        o.lora_load = r["lora-load"].as<std::string>();
        o.merge_lora = r["merge-lora"].as<bool>();
        o.base_model = r["base-model"].as<std::string>();
        if (o.merge_lora && !o.base_model.empty()) throw std::invalid_argument("--base-model names a PEFT folder's base; --merge-lora writes no PEFT folder");
      } catch (const std::exception& e) {
        std::cerr << "megacpp-convert: " << e.what() << "\n";
        return 2;
      }
      std::cout << export_hf(o) << std::endl;
    } else {
      HfImportOptions o;
      try {
        o.input = required(r, "input", command);
        o.save = required(r, "save", command);
        o.format = CheckpointFormat::named(r["ckpt-format"].as<std::string>());
        o.model_type = r["model-type"].as<std::string>();
      } catch (const std::exception& e) {
        std::cerr << "megacpp-convert: " << e.what() << "\n";
        return 2;
      }
      std::cout << "imported " << o.input << " into " << o.save << "/release; train it with megacpp-train --load " << o.save
                << " " << import_hf(o) << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "megacpp-convert: " << megacpp::error_message(e) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(run(argc, argv)); }
