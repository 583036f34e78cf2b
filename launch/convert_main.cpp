// megacpp-convert: Hugging Face <-> megacpp checkpoints, `export --load SAVE --output HF_DIR` and
// `import --input HF_DIR --save SAVE` (--help lists the rest). The work is in
// checkpoint/hf_convert.h; this file reads flags. Argument errors exit 2, failures 1.
#include <algorithm>
#include <iostream>
#include <stdexcept>

#include "checkpoint/hf_convert.h"
#include "launch/load_section.h"
#include "launch/tool_run.h"
#include "megacpp/process_end.h"
#include "models/model_flags.h"

namespace {

using namespace megacpp;

cxxopts::Options make_options() {
  cxxopts::Options o("megacpp-convert", "Convert between megacpp checkpoints and Hugging Face folders.\n"
                                        "  megacpp-convert export --load SAVE --output HF_DIR [--dtype bfloat16] [--lora-load ADAPTERS] [--merge-lora]\n"
                                        "  megacpp-convert import --input HF_DIR --save SAVE");
  auto text = [] { return cxxopts::value<std::string>(); };
  launch::add_load_flags(o, "export", "to export");
  o.add_options("export")
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
  o.add_options("")("command", "export or import", text());
  o.parse_positional({"command"});
  return o;
}

std::string required(const cxxopts::ParseResult& r, const std::string& flag, const std::string& command) {
  const std::string v = r[flag].as<std::string>();
  if (v.empty()) throw std::invalid_argument(command + " needs --" + flag);
  return v;
}

checkpoint::HfExportOptions export_options(const cxxopts::ParseResult& r) {
  checkpoint::HfExportOptions o;
  o.load = required(r, "load", "export");
  o.output = required(r, "output", "export");
  o.step = launch::checkpoint_step(r);
  o.dtype = r["dtype"].as<std::string>();
  const auto shard = models::parse_flag_number<int64_t>("max-shard-size", r["max-shard-size"].as<std::string>());
  o.max_shard_bytes = static_cast<uint64_t>(std::max<int64_t>(shard, 0));  // export_hf checks these and --dtype
  o.lora_load = r["lora-load"].as<std::string>();
  o.merge_lora = r["merge-lora"].as<bool>();
  o.base_model = r["base-model"].as<std::string>();
  return o;
}

int convert(const cxxopts::ParseResult& r) {
  const std::string command = r.count("command") ? r["command"].as<std::string>() : "";
  if (command != "export" && command != "import") {
    throw std::invalid_argument(command.empty() ? "give a command: export or import" : "unknown command '" + command + "' (export or import)");
  }
  if (command == "export") {
    std::cout << checkpoint::export_hf(export_options(r)) << std::endl;
    return 0;
  }
  checkpoint::HfImportOptions o{required(r, "input", command), required(r, "save", command),
                                checkpoint::CheckpointFormat::named(r["ckpt-format"].as<std::string>()), r["model-type"].as<std::string>()};
  std::cout << "imported " << o.input << " into " << o.save << "/release; train it with megacpp-train --load " << o.save << " "
            << checkpoint::import_hf(o) << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) { megacpp::end_process(megacpp::launch::run_tool("megacpp-convert", make_options(), argc, argv, convert)); }
