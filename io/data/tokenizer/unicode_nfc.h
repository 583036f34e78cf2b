// Unicode normalization form C (canonical composition), as the NFC normalizer of a Hugging
// Face tokenizer.json (Qwen's) applies it.
#pragma once

#include <string>
#include <string_view>

namespace megacpp::io::data {

// `text` in NFC. Bytes that are not valid UTF-8 pass through unchanged; each valid run between
// them is normalized on its own.
std::string to_nfc(std::string_view text);

}  // namespace megacpp::io::data
