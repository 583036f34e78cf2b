// Loads libmegacpp_sentencepiece.so (Note [SentencePiece in its own scope]).
#include "io/data/tokenizer/sentencepiece_library.h"

#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace megacpp::io::data {
namespace {

constexpr char kShimName[] = "libmegacpp_sentencepiece.so";

// Where to look: the build tree's copy, then beside the program and in ../lib.
std::vector<std::string> candidates() {
  std::vector<std::string> paths = {MEGACPP_SENTENCEPIECE_SHIM};
  std::error_code error;
  const auto program = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    paths.push_back((program.parent_path() / kShimName).string());
    paths.push_back((program.parent_path().parent_path() / "lib" / kShimName).string());
  }
  return paths;
}

template <typename Function>
void resolve(void* handle, const char* name, Function*& function) {
  function = reinterpret_cast<Function*>(dlsym(handle, name));
  if (function == nullptr) throw std::runtime_error(std::string(kShimName) + " has no " + name);
}

SentencePieceLibrary load_library() {
  std::string tried;
  void* handle = nullptr;
  for (const auto& path : candidates()) {
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle != nullptr) break;
    tried += "\n  " + path + ": " + dlerror();
  }
  if (handle == nullptr) throw std::runtime_error("cannot load " + std::string(kShimName) + " (SentencePiece):" + tried);
  SentencePieceLibrary library{};
  resolve(handle, "megacpp_spm_load", library.load);
  resolve(handle, "megacpp_spm_free", library.free);
  resolve(handle, "megacpp_spm_piece_size", library.piece_size);
  resolve(handle, "megacpp_spm_bos_id", library.bos_id);
  resolve(handle, "megacpp_spm_eos_id", library.eos_id);
  resolve(handle, "megacpp_spm_encode", library.encode);
  resolve(handle, "megacpp_spm_decode", library.decode);
  return library;  // the handle stays open for the process
}

}  // namespace

const SentencePieceLibrary& SentencePieceLibrary::get() {
  static const SentencePieceLibrary library = load_library();
  return library;
}

}  // namespace megacpp::io::data
