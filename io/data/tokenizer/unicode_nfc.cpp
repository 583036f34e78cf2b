// NFC through Debian's utf8proc (its Unicode tables; utf8proc 2.8: Unicode 15).
#include "io/data/tokenizer/unicode_nfc.h"

#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>

#include <utf8proc.h>

namespace megacpp::io::data {
namespace {

// Length of the valid UTF-8 prefix of `text`.
size_t valid_prefix(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    utf8proc_int32_t code_point;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes + offset, static_cast<utf8proc_ssize_t>(text.size() - offset), &code_point);
    if (n <= 0) break;
    offset += static_cast<size_t>(n);
  }
  return offset;
}

void append_nfc(std::string_view valid, std::string& out) {
  utf8proc_uint8_t* normalized = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                                          static_cast<utf8proc_ssize_t>(valid.size()), &normalized,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(normalized, &std::free);
  if (n == UTF8PROC_ERROR_NOMEM) throw std::bad_alloc();
  if (n < 0) throw std::logic_error(std::string("NFC: utf8proc failed on valid UTF-8: ") + utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(normalized), static_cast<size_t>(n));
}

}  // namespace

std::string to_nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // already NFC
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const size_t valid = valid_prefix(text);
    append_nfc(text.substr(0, valid), out);
    if (valid == text.size()) break;
    out.push_back(text[valid]);  // one invalid byte, unchanged
    text.remove_prefix(valid + 1);
  }
  return out;
}

}  // namespace megacpp::io::data
