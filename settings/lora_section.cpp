// The LoRA section (Note [Flag sections], Note [LoRA]): the adapters' rank, scale, dropout and
// targets, how they are loaded and saved, and the module prefixes frozen. MindSpeed-LLM spells
// the rank --lora-r and lists targets with spaces.
#include <stdexcept>

#include "megacpp/errors.h"
#include "settings/flag_section.h"

namespace megacpp::settings {
namespace {

void declare_lora_flags(cxxopts::Options& o) {
  o.add_options("lora")
      ("lora-rank", "train LoRA adapters of this rank on --lora-target-modules, the rest frozen (0: no LoRA)",
       cxxopts::value<std::string>()->default_value("0"))
      ("lora-r", "MindSpeed-LLM's spelling of --lora-rank", cxxopts::value<std::string>()->default_value(""))
      ("lora-alpha", "LoRA's alpha: adapters are scaled by alpha / rank", cxxopts::value<std::string>()->default_value("32"))
      ("lora-dropout", "dropout on the adapters' input in training", cxxopts::value<std::string>()->default_value("0"))
      ("lora-target-modules", "the Linear layers to adapt, PEFT's names (q_proj,k_proj,v_proj,o_proj,... or all-linear)",
       cxxopts::value<std::string>()->default_value(""))
      ("lora-load", "resume the adapters (and the optimizer, iteration, RNG) from this checkpoint root; --load gives the base",
       cxxopts::value<std::string>()->default_value(""))
      ("lora-save-base", "--save writes the frozen base weights too (default: the adapters only)")
      ("lora-ckpt-filter", "MindSpeed-LLM's flag for saving the adapters only: the default here")
      ("freeze-module-prefix", "freeze the parameters under these module paths (comma- or space-separated; ROLL's "
       "model_args.freeze_module_prefix)", cxxopts::value<std::string>()->default_value(""));
}

void read_lora_flags(TrainingArguments& a, const cxxopts::ParseResult& r) {
  a.lora.rank = flag_number<int64_t>(r, "lora-rank");
  if (!r["lora-r"].as<std::string>().empty()) {
    const auto rank = flag_number<int64_t>(r, "lora-r");
    if (r.count("lora-rank") > 0 && rank != a.lora.rank) throw std::invalid_argument("--lora-r and --lora-rank differ; give one");
    a.lora.rank = rank;
  }
  a.lora.alpha = flag_number<double>(r, "lora-alpha");
  a.lora.dropout = flag_number<double>(r, "lora-dropout");
  a.lora.target_modules = split_list(r["lora-target-modules"].as<std::string>());
  a.lora_load = r["lora-load"].as<std::string>();
  a.lora_save_base = r["lora-save-base"].as<bool>();
  if (a.lora_save_base && r["lora-ckpt-filter"].as<bool>()) {
    throw std::invalid_argument("--lora-save-base and --lora-ckpt-filter contradict each other (base weights saved, or the adapters only)");
  }
  a.freeze_module_prefix = split_list(r["freeze-module-prefix"].as<std::string>());
  if (a.lora.rank < 0) throw std::invalid_argument("--lora-rank must be >= 0 (0: no LoRA)");
  if (a.lora.rank == 0) {
    for (const char* flag : {"lora-target-modules", "lora-alpha", "lora-dropout", "lora-load", "lora-save-base", "lora-ckpt-filter"}) {
      if (r.count(flag) > 0) throw std::invalid_argument("--" + std::string(flag) + " needs --lora-rank > 0");
    }
    return;
  }
  require(a.lora.alpha > 0, "--lora-alpha must be > 0");
  require(a.lora.dropout >= 0 && a.lora.dropout < 1, "--lora-dropout must be in [0, 1)");
  require(!a.lora.target_modules.empty(), "--lora-target-modules: name the modules to adapt (e.g. q_proj,v_proj)");
  require(!a.lora_save_base || !r["save"].as<std::string>().empty(), "--lora-save-base needs --save");
}

}  // namespace

FlagSection lora_section() { return {"lora", declare_lora_flags, read_lora_flags}; }

}  // namespace megacpp::settings
