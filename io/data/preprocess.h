// Text -> token dataset, as Megatron-LM's tools/preprocess_data.py: each input document is
// tokenized (by --workers threads, output order preserved) and written as one sequence
// followed by a document boundary to OUTPUT_PREFIX_<key>_document(.bin/.idx, or .h5).
//
// Input formats:
//   jsonl  one JSON object per line; each --json-keys key holds a string (one sequence) or a
//          list of strings (one sequence per non-empty string, as Megatron's sentence-split
//          input). Blank lines are skipped. The default, except for inputs ending in .txt.
//   text   plain text. Without --document-separator each line is a document; with it, a line
//          equal to SEPARATOR ends a document (e.g. '%' for fortune files) and the document is
//          its lines joined by "\n". A trailing "\r" is dropped from every line. One output,
//          OUTPUT_PREFIX_text_document.
// Documents that tokenize to nothing are skipped, eod included (Megatron appends eod only to
// non-empty documents but still records an empty document boundary; we record none, which
// changes no GPT sample).
// The dtype is dtype_for_vocab_size(tokenizer vocab size), as Megatron's optimal_dtype.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "io/data/tokenizer/tokenizer.h"

namespace megacpp::io::data {

struct PreprocessOptions {
  std::string input;                           // --input
  std::string input_format = "auto";           // --input-format: auto | jsonl | text
  std::string document_separator;              // --document-separator (text only; "" = a document per line)
  std::vector<std::string> json_keys{"text"};  // --json-keys
  std::string output_prefix;                   // --output-prefix
  std::string output_format = "mmap";          // --output-format: mmap | hdf5
  bool append_eod = false;                     // --append-eod
  int workers = 1;                             // --workers: tokenizing threads
  int64_t log_interval = 1000;                 // --log-interval: documents between progress lines
  TokenizerOptions tokenizer;                  // --tokenizer-type, --vocab-file, --merge-file, --vocab-size
};

struct PreprocessOutput {
  std::string key;        // the JSON key ("text" for text input)
  std::string path;       // PREFIX_<key>_document (mmap prefix) or PREFIX_<key>_document.h5
  int64_t documents = 0;  // written (non-empty) documents
  int64_t sequences = 0;
  int64_t tokens = 0;
};

struct PreprocessResult {
  int64_t input_documents = 0;  // documents read from the input
  int64_t input_bytes = 0;
  double seconds = 0;
  std::vector<PreprocessOutput> outputs;  // one per key, in --json-keys order
};

// Checks the options; throws std::invalid_argument naming the flag at fault.
void validate_preprocess_options(const PreprocessOptions& options);

// Runs the whole conversion, writing progress lines to `progress` (nullptr: silent) every
// log_interval documents. Throws std::runtime_error naming the file and line for a malformed
// JSON line, a missing key, or a document the tokenizer rejects; nothing is left at the output
// paths then (the datasets are only renamed into place at the end).
PreprocessResult preprocess(const PreprocessOptions& options, std::ostream* progress);

// The end-of-run summary: documents, tokens, output files.
std::string format_summary(const PreprocessResult& result);

}  // namespace megacpp::io::data
