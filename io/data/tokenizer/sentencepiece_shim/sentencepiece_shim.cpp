// libmegacpp_sentencepiece.so: Debian's libsentencepiece behind a C interface, loaded by
// sentencepiece_library.cpp with dlopen (Note [SentencePiece in its own scope]).
#include <sentencepiece_processor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

thread_local std::string last_error;
thread_local std::vector<int32_t> last_ids;
thread_local std::string last_text;

const sentencepiece::SentencePieceProcessor& processor(const void* model) {
  return *static_cast<const sentencepiece::SentencePieceProcessor*>(model);
}

}  // namespace

extern "C" {

// A loaded model, or nullptr with *error set (valid until this thread's next call).
__attribute__((visibility("default"))) void* megacpp_spm_load(const char* path, const char** error) {
  auto* model = new sentencepiece::SentencePieceProcessor();
  const auto status = model->Load(path);
  if (status.ok()) return model;
  last_error = status.ToString();
  *error = last_error.c_str();
  delete model;
  return nullptr;
}

__attribute__((visibility("default"))) void megacpp_spm_free(void* model) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(model);
}

__attribute__((visibility("default"))) int megacpp_spm_piece_size(const void* model) { return processor(model).GetPieceSize(); }
__attribute__((visibility("default"))) int megacpp_spm_bos_id(const void* model) { return processor(model).bos_id(); }
__attribute__((visibility("default"))) int megacpp_spm_eos_id(const void* model) { return processor(model).eos_id(); }

// The ids of `text` (valid until this thread's next call), or nullptr with *error set.
__attribute__((visibility("default"))) const int32_t* megacpp_spm_encode(const void* model, const char* text, size_t size,
                                                                          int64_t* count, const char** error) {
  std::vector<int> ids;
  const auto status = processor(model).Encode(std::string_view(text, size), &ids);
  if (!status.ok()) {
    last_error = status.ToString();
    *error = last_error.c_str();
    return nullptr;
  }
  last_ids.assign(ids.begin(), ids.end());
  *count = static_cast<int64_t>(last_ids.size());
  return last_ids.data();
}

// The text of `ids` (valid until this thread's next call), or nullptr with *error set.
__attribute__((visibility("default"))) const char* megacpp_spm_decode(const void* model, const int32_t* ids, int64_t count,
                                                                       size_t* size, const char** error) {
  const std::vector<int> pieces(ids, ids + count);
  const auto status = processor(model).Decode(pieces, &last_text);
  if (!status.ok()) {
    last_error = status.ToString();
    *error = last_error.c_str();
    return nullptr;
  }
  *size = last_text.size();
  return last_text.data();
}

}  // extern "C"
