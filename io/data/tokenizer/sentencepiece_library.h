// Note [SentencePiece in its own scope]
// Debian's libsentencepiece carries its own copy of protobuf-lite and exports it. Linked into a
// program that also loads libtorch (whose libprotobuf is another version), one library's
// protobuf calls bind to the other's and the program crashes before main. So megacpp never
// links it: libmegacpp_sentencepiece.so (sentencepiece_shim/) wraps it in a C interface, and
// this file loads that with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) on first use, so that each
// library resolves protobuf within itself. The shim is looked for where the build put it and
// next to the running program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace megacpp::io::data {

// The shim's C functions (see sentencepiece_shim.cpp). Loaded once; thread-safe.
struct SentencePieceLibrary {
  void* (*load)(const char* path, const char** error);
  void (*free)(void* model);
  int (*piece_size)(const void* model);
  int (*bos_id)(const void* model);
  int (*eos_id)(const void* model);
  const int32_t* (*encode)(const void* model, const char* text, size_t size, int64_t* count, const char** error);
  const char* (*decode)(const void* model, const int32_t* ids, int64_t count, size_t* size, const char** error);

  // Throws std::runtime_error naming the places looked in when the shim cannot be loaded.
  static const SentencePieceLibrary& get();
};

}  // namespace megacpp::io::data
