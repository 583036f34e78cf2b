// Text encodings several readers and writers share.
#pragma once

#include <cstdint>
#include <string>

namespace megacpp::io::serialization {

// Appends code point `cp` to `out` as UTF-8 (surrogates pass through, as Python's
// "surrogatepass" error handler does).
void append_utf8(std::string& out, uint32_t cp);

// Appends `s` as a JSON string as Python's json.dumps(ensure_ascii=False) writes it: quotes,
// backslashes and control characters escaped (\n, \t, ..., \u001f), the rest as it is.
void append_json_string(std::string& out, const std::string& s);

}  // namespace megacpp::io::serialization
