#include "settings/command_line.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <utility>

#include "models/registry.h"
#include "settings/flag_section.h"
#include "settings/hf_model_arguments.h"
#include "settings/megatron_flags.h"
#include "settings/model_arguments.h"

namespace megacpp::settings {
namespace {

cxxopts::Options training_options() {
  cxxopts::Options o("megacpp-train", "Train a transformer language model with FSDP2 (Megatron-style flags)");
  for (const auto& section : flag_sections()) section.declare(o);
  o.add_options("logging")("h,help", "print this help");
  return o;
}

// Megatron's --data-path takes several words ("0.7 A 0.3 B"), --spec two (a module and a
// function), --rampup-batch-size three, --profile-ranks and MindSpeed's --lora-target-modules a list; cxxopts takes one value per flag, so the words up to the next flag are joined into
// that one value here.
std::vector<std::string> join_multi_word_flags(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    out.emplace_back(argv[i]);
    const std::string& flag = out.back();
    if (flag != "--data-path" && flag != "--spec" && flag != "--profile-ranks" && flag != "--rampup-batch-size" &&
        flag != "--lora-target-modules") {
      continue;  // the others are not Megatron's nargs='*'/'+'/3 flags
    }
    std::string joined;
    while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) joined += (joined.empty() ? "" : " ") + std::string(argv[++i]);
    out.push_back(joined);
  }
  return out;
}

// A negative number ("-1", "-0.5") is a value, never a flag.
bool is_number(const std::string& word) {
  char* end = nullptr;
  std::strtod(word.c_str(), &end);
  return !word.empty() && end != word.c_str() && *end == '\0';
}

// What cxxopts did not recognise (`unmatched`, in the order of `words`): each unknown flag with
// megacpp's reason when it is a Megatron flag megacpp does not support, and each stray word that
// is not a value of such a flag (the words after it up to the next flag, as Megatron's flags may
// take several: --rampup-batch-size 16 16 5859375).
// `swallowed`: flags cxxopts took as the value of the flag before them; the words after one
// are its values, not strays.
std::vector<std::string> unrecognised_arguments(const std::vector<std::string>& words, std::vector<std::string> unmatched,
                                                const std::vector<std::string>& swallowed) {
  std::vector<std::string> problems;
  bool after_unknown_flag = false;
  for (size_t i = 1; i < words.size(); ++i) {
    auto it = std::find(unmatched.begin(), unmatched.end(), words[i]);
    if (it == unmatched.end()) {
      const bool flag_taken_as_value = std::find(swallowed.begin(), swallowed.end(), words[i]) != swallowed.end();
      after_unknown_flag = flag_taken_as_value || (after_unknown_flag && words[i].rfind("-", 0) != 0);
      continue;
    }
    unmatched.erase(it);
    const std::string& word = words[i];
    if (word.size() > 1 && word[0] == '-' && !is_number(word)) {
      const std::string name = word.substr(word.find_first_not_of('-'), word.find('=') - word.find_first_not_of('-'));
      const std::string reason = unsupported_flag_reason(name);
      problems.push_back("--" + name + ": " + (reason.empty() ? "unknown flag (see --help)" : "not supported: " + reason));
      after_unknown_flag = word.find('=') == std::string::npos;
    } else if (!after_unknown_flag) {
      problems.push_back("unexpected argument '" + word + "'");
    }  // else a value of the unknown flag
  }
  return problems;
}

// A flag followed directly by another flag (`--num-layers --hidden-size 64`): cxxopts takes the
// second as the first's value. Each such flag, with the problem it makes.
std::vector<std::string> flags_missing_values(const cxxopts::ParseResult& result, std::vector<std::string>& problems) {
  std::vector<std::string> swallowed;
  for (const auto& argument : result.arguments()) {
    const std::string& value = argument.value();
    if (value.size() > 2 && value.rfind("--", 0) == 0 && !is_number(value)) {
      problems.push_back("--" + argument.key() + " has no value: the word after it is the flag " + value);
      swallowed.push_back(value);
    }
  }
  return swallowed;
}

// cxxopts names a value it cannot parse but not its flag ("Argument 'maybe' failed to parse",
// a switch given =maybe): the word holding the value names it. cxxopts quotes with ‘ ’ or with '
// depending on its version.
std::string naming_the_flag(const std::vector<std::string>& words, const std::string& what) {
  if (what.rfind("Argument ", 0) != 0) return what;
  for (const auto& [open, close] : {std::pair<std::string, std::string>{"\u2018", "\u2019"}, {"'", "'"}}) {
    const size_t begin = what.find(open);
    const size_t end = begin == std::string::npos ? begin : what.find(close, begin + open.size());
    if (end == std::string::npos) continue;
    const std::string value = what.substr(begin + open.size(), end - begin - open.size());
    for (const auto& word : words) {
      const size_t equals = word.find('=');
      if (word.rfind("--", 0) == 0 && equals != std::string::npos && word.substr(equals + 1) == value) {
        return word + ": " + word.substr(0, equals) + " is a switch: give it alone, or =true / =false";
      }
    }
  }
  return what;
}

}  // namespace

void refuse_flags(const std::vector<std::string>& problems) {
  std::string message = problems.size() == 1 ? problems.front() : std::to_string(problems.size()) + " flags are not accepted:";
  for (size_t i = 0; problems.size() > 1 && i < problems.size(); ++i) message += "\n  " + problems[i];
  throw std::invalid_argument(message);
}

CommandLine parse_command_line(int argc, const char* const* argv) {
  CommandLine line;
  line.libraries = model_libraries_in(argc, argv);
  for (const auto& path : line.libraries) models::load_model_library(path);
  cxxopts::Options options = training_options();
  const std::vector<std::string> words = with_hf_folder_of_load(join_multi_word_flags(argc, argv), line.notes);
  std::vector<const char*> joined_argv;
  for (const auto& w : words) joined_argv.push_back(w.c_str());
  options.allow_unrecognised_options();  // collected below, all reported at once
  try {
    line.result = options.parse(static_cast<int>(joined_argv.size()), joined_argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw std::invalid_argument(naming_the_flag(words, e.what()));
  }
  std::vector<std::string> missing;
  const std::vector<std::string> swallowed = flags_missing_values(line.result, missing);
  line.problems = unrecognised_arguments(words, line.result.unmatched(), swallowed);
  line.problems.insert(line.problems.begin(), missing.begin(), missing.end());
  for (auto& problem : megatron_flag_problems(line.result, model_flag_names())) line.problems.push_back(std::move(problem));
  if (line.result["help"].as<bool>() && line.problems.empty()) {  // --help: the flags, whatever the model flags say
    std::cout << options.help() << std::endl;
    line.help = true;
    return line;
  }
  try {
    line.family = choose_model_family(line.result);  // an unknown --model-type fails here, listing the known ones
  } catch (const std::invalid_argument& e) {
    line.problems.emplace_back(e.what());
  }
  return line;
}

}  // namespace megacpp::settings
