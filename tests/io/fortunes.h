// The Debian `fortunes` corpus (about 2.5 MB of English text), cut into documents, for the
// tokenizer tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/io/io_test_util.h"

namespace megacpp::io_test {

inline const std::filesystem::path kFortunesDir = "/usr/share/games/fortunes";

// Every fortune file (text, not the .dat index or the .u8 links), cut into one document per
// fortune ("...\n%\n"); the documents concatenate to the files.
inline void fortune_documents(std::vector<std::string>* documents) {
  ASSERT_TRUE(std::filesystem::is_directory(kFortunesDir))
      << kFortunesDir << " is missing: apt-get install --no-install-recommends fortunes (scripts/setup.sh does it)";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(kFortunesDir)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && ext != ".dat" && ext != ".u8") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::istringstream text(read_bytes(file));
    std::string document;
    for (std::string line; std::getline(text, line);) {
      document += line;
      if (!text.eof()) document += '\n';
      if (line == "%") {
        documents->push_back(std::move(document));
        document.clear();
      }
    }
    if (!document.empty()) documents->push_back(std::move(document));
  }
}

}  // namespace megacpp::io_test
