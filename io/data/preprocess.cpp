// megacpp-preprocess's work (see preprocess.h): read documents in blocks on the calling thread,
// tokenize blocks on a pool of worker threads (one tokenizer each), and write the encoded blocks
// in input order, so any --workers gives byte-identical files.
#include "io/data/preprocess.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "io/data/indexed_dataset.h"

namespace megacpp::io::data {
namespace {

using Sequence = std::vector<int64_t>;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "jsonl" or "text": auto means text for *.txt, else jsonl (Megatron reads JSON only).
std::string resolved_format(const PreprocessOptions& options) {
  if (options.input_format != "auto") return options.input_format;
  return ends_with(options.input, ".txt") ? "text" : "jsonl";
}

std::string output_path(const PreprocessOptions& options, const std::string& key) {
  const std::string prefix = options.output_prefix + "_" + key + "_document";
  return options.output_format == "hdf5" ? prefix + ".h5" : prefix;
}

// One input document: its first line (1-based) and its raw text (a JSON line or plain text).
struct RawDocument {
  int64_t line = 0;
  std::string text;
};

// Reads documents from --input in the resolved format.
class DocumentReader {
 public:
  DocumentReader(const PreprocessOptions& options, std::string format)
      : file_(options.input), format_(std::move(format)), separator_(options.document_separator), in_(file_) {
    if (std::filesystem::is_directory(file_)) {
      throw std::runtime_error(file_ + ": is a directory; --input takes one file of JSON lines or text");
    }
    if (!in_) throw std::runtime_error(file_ + ": cannot open the input file");
  }

  // The next document, or false at the end of the input. `bytes` grows by what was read.
  bool next(RawDocument& doc, int64_t& bytes) {
    std::string line;
    if (format_ == "jsonl" || separator_.empty()) {
      while (read_line(line, bytes)) {
        if (format_ == "jsonl" && line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
        doc = RawDocument{line_, std::move(line)};
        return true;
      }
      return false;
    }
    // text with a separator line: lines up to the separator (or the end) form a document.
    doc = RawDocument{line_ + 1, {}};
    bool any = false;
    while (read_line(line, bytes)) {
      if (line == separator_) return true;
      if (any) doc.text.push_back('\n');
      doc.text += line;
      any = true;
    }
    return any;
  }

 private:
  bool read_line(std::string& line, int64_t& bytes) {
    if (!std::getline(in_, line)) {
      if (in_.bad()) throw std::runtime_error(file_ + ": read error after line " + std::to_string(line_));
      return false;
    }
    ++line_;
    bytes += static_cast<int64_t>(line.size()) + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
  }

  std::string file_;
  std::string format_;
  std::string separator_;
  std::ifstream in_;
  int64_t line_ = 0;  // lines read so far
};

// A document after tokenization: per output key, its non-empty sequences.
using EncodedDocument = std::vector<std::vector<Sequence>>;  // [key][sequence][token]

// Tokenizes documents as Megatron's Encoder.encode: each string is one sequence, empty ones are
// dropped, and eod goes at the end of the last sequence of a non-empty document.
class Encoder {
 public:
  Encoder(const PreprocessOptions& options, std::string format, std::shared_ptr<const Tokenizer> tokenizer)
      : options_(options), format_(std::move(format)), tokenizer_(std::move(tokenizer)) {}

  EncodedDocument encode(const RawDocument& doc) const {
    EncodedDocument out(options_.json_keys.size());
    if (format_ == "text") {
      add_text(doc, doc.text, out[0]);
      finish(out[0]);
      return out;
    }
    nlohmann::json json;
    try {
      json = nlohmann::json::parse(doc.text);
    } catch (const nlohmann::json::parse_error& e) {
      throw error(doc, std::string("malformed JSON (") + e.what() + ")" +
                           (doc.line == 1 ? "; for plain text use --input-format text" : ""));
    }
    if (!json.is_object()) throw error(doc, std::string("expected a JSON object, got a ") + json.type_name());
    for (size_t k = 0; k < options_.json_keys.size(); ++k) {
      const std::string& key = options_.json_keys[k];
      const auto it = json.find(key);
      if (it == json.end()) throw error(doc, "missing key \"" + key + "\" (--json-keys)");
      if (it->is_string()) {
        add_text(doc, it->get_ref<const std::string&>(), out[k]);
      } else if (it->is_array()) {
        for (const auto& sentence : *it) {
          if (!sentence.is_string()) throw error(doc, "key \"" + key + "\" holds a list with a non-string entry");
          add_text(doc, sentence.get_ref<const std::string&>(), out[k]);
        }
      } else {
        throw error(doc, "key \"" + key + "\" is a " + it->type_name() + ", expected a string or a list of strings");
      }
      finish(out[k]);
    }
    return out;
  }

 private:
  std::runtime_error error(const RawDocument& doc, const std::string& what) const {
    return std::runtime_error(options_.input + ":" + std::to_string(doc.line) + ": " + what);
  }

  void add_text(const RawDocument& doc, const std::string& text, std::vector<Sequence>& sequences) const {
    Sequence ids;
    try {
      ids = tokenizer_->tokenize(text);
    } catch (const std::exception& e) {
      throw error(doc, e.what());
    }
    if (!ids.empty()) sequences.push_back(std::move(ids));
  }

  void finish(std::vector<Sequence>& sequences) const {
    if (options_.append_eod && !sequences.empty()) sequences.back().push_back(tokenizer_->eod());
  }

  const PreprocessOptions& options_;
  std::string format_;
  std::shared_ptr<const Tokenizer> tokenizer_;
};

struct Block {
  std::vector<RawDocument> documents;
  int64_t bytes = 0;
};

struct EncodedBlock {
  std::vector<EncodedDocument> documents;
  int64_t bytes = 0;
};

// Worker threads, each owning one Encoder (tokenizers need not be thread-safe), encoding blocks
// handed to submit(); results come back through futures, consumed in submission order.
class EncoderPool {
 public:
  explicit EncoderPool(std::vector<std::unique_ptr<Encoder>> encoders) : encoders_(std::move(encoders)) {
    for (auto& encoder : encoders_) threads_.emplace_back([this, e = encoder.get()] { run(*e); });
  }
  ~EncoderPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

  std::future<EncodedBlock> submit(Block block) {
    Task task{std::move(block), {}};
    auto future = task.result.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
    return future;
  }

 private:
  struct Task {
    Block block;
    std::promise<EncodedBlock> result;
  };

  void run(const Encoder& encoder) {
    while (true) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (stop_) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      try {
        EncodedBlock out;
        out.bytes = task.block.bytes;
        out.documents.reserve(task.block.documents.size());
        for (const auto& doc : task.block.documents) out.documents.push_back(encoder.encode(doc));
        task.result.set_value(std::move(out));
      } catch (...) {
        task.result.set_exception(std::current_exception());
      }
    }
  }

  std::vector<std::unique_ptr<Encoder>> encoders_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;
  bool stop_ = false;
};

constexpr size_t kBlockDocuments = 256;
constexpr int64_t kBlockBytes = 4 << 20;

// Writes encoded blocks in order and reports progress.
class OutputWriter {
 public:
  OutputWriter(const PreprocessOptions& options, TokenDtype dtype, std::ostream* progress)
      : options_(options), progress_(progress), start_(std::chrono::steady_clock::now()) {
    for (const auto& key : options.json_keys) {
      PreprocessOutput output;
      output.key = key;
      output.path = output_path(options, key);
      result_.outputs.push_back(output);
      writers_.push_back(create_token_dataset(output.path, dtype));
    }
  }

  void write(const EncodedBlock& block) {
    result_.input_bytes += block.bytes;
    for (const auto& document : block.documents) {
      for (size_t k = 0; k < document.size(); ++k) {
        if (document[k].empty()) continue;  // nothing to write, not even eod: skipped
        PreprocessOutput& output = result_.outputs[k];
        for (const auto& sequence : document[k]) {
          writers_[k]->add_sequence(sequence.data(), static_cast<int64_t>(sequence.size()));
          output.tokens += static_cast<int64_t>(sequence.size());
          tokens_ += static_cast<int64_t>(sequence.size());
        }
        writers_[k]->end_document();
        output.sequences += static_cast<int64_t>(document[k].size());
        ++output.documents;
      }
      if (++result_.input_documents % options_.log_interval == 0) report();
    }
  }

  PreprocessResult finalize() {
    for (auto& writer : writers_) writer->finalize();
    result_.seconds = elapsed();
    return result_;
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // Megatron's progress line plus tokens/s (MB = 2^20 bytes, as Megatron counts).
  void report() {
    if (progress_ == nullptr) return;
    const double seconds = std::max(elapsed(), 1e-9);
    char line[256];
    std::snprintf(line, sizeof line, "Processed %lld documents (%.1f docs/s, %.2f MB/s, %.0f tokens/s).\n",
                  static_cast<long long>(result_.input_documents), result_.input_documents / seconds,
                  result_.input_bytes / seconds / (1 << 20), tokens_ / seconds);
    *progress_ << line << std::flush;
  }

  const PreprocessOptions& options_;
  std::ostream* progress_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::unique_ptr<TokenDatasetWriter>> writers_;  // [key]
  PreprocessResult result_;
  int64_t tokens_ = 0;  // over all keys
};

}  // namespace

void validate_preprocess_options(const PreprocessOptions& options) {
  if (options.input.empty()) throw std::invalid_argument("--input is required");
  if (options.output_prefix.empty()) throw std::invalid_argument("--output-prefix is required");
  if (options.input_format != "auto" && options.input_format != "jsonl" && options.input_format != "text") {
    throw std::invalid_argument("--input-format '" + options.input_format + "': expected jsonl or text");
  }
  if (options.output_format != "mmap" && options.output_format != "hdf5") {
    throw std::invalid_argument("--output-format '" + options.output_format + "': expected mmap or hdf5");
  }
  if (options.workers < 1) throw std::invalid_argument("--workers must be at least 1");
  if (options.log_interval < 1) throw std::invalid_argument("--log-interval must be at least 1");
  if (options.json_keys.empty()) throw std::invalid_argument("--json-keys needs at least one key");
  std::set<std::string> seen;
  for (const auto& key : options.json_keys) {
    if (key.empty() || key.find('/') != std::string::npos) {
      throw std::invalid_argument("--json-keys: '" + key + "' cannot name an output file");
    }
    if (!seen.insert(key).second) throw std::invalid_argument("--json-keys lists '" + key + "' twice");
  }
  const std::string format = resolved_format(options);
  if (format == "jsonl" && !options.document_separator.empty()) {
    throw std::invalid_argument("--document-separator applies to --input-format text only");
  }
  if (format == "text" && options.json_keys != std::vector<std::string>{"text"}) {
    throw std::invalid_argument("--json-keys applies to JSON lines input only (text input writes _text_document)");
  }
  if (options.tokenizer.type != "NullTokenizer" && options.tokenizer.vocab_size != 0) {
    throw std::invalid_argument("--vocab-size is for NullTokenizer; " + options.tokenizer.type + " has its own vocabulary");
  }
}

PreprocessResult preprocess(const PreprocessOptions& options, std::ostream* progress) {
  validate_preprocess_options(options);
  const std::string format = resolved_format(options);
  // One tokenizer for every worker: tokenize() is thread-safe, and GPT-2's files are read once.
  const std::shared_ptr<const Tokenizer> tokenizer = build_tokenizer(options.tokenizer);
  const TokenDtype dtype = dtype_for_vocab_size(tokenizer->vocab_size());
  std::vector<std::unique_ptr<Encoder>> encoders;
  for (int i = 0; i < options.workers; ++i) encoders.push_back(std::make_unique<Encoder>(options, format, tokenizer));
  DocumentReader reader(options, format);
  OutputWriter writer(options, dtype, progress);
  EncoderPool pool(std::move(encoders));

  // At most two blocks per worker in flight bounds memory; results are written in order.
  std::deque<std::future<EncodedBlock>> in_flight;
  const size_t max_in_flight = 2 * static_cast<size_t>(options.workers);
  bool more = true;
  while (more || !in_flight.empty()) {
    while (more && in_flight.size() < max_in_flight) {
      Block block;
      RawDocument doc;
      while (block.documents.size() < kBlockDocuments && block.bytes < kBlockBytes &&
             (more = reader.next(doc, block.bytes))) {
        block.documents.push_back(std::move(doc));
      }
      if (!block.documents.empty() || block.bytes > 0) in_flight.push_back(pool.submit(std::move(block)));
    }
    if (in_flight.empty()) break;
    writer.write(in_flight.front().get());
    in_flight.pop_front();
  }
  return writer.finalize();
}

std::string format_summary(const PreprocessResult& result) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "Processed %lld documents (%.2f MB) in %.2f s.\n",
                static_cast<long long>(result.input_documents), result.input_bytes / double(1 << 20), result.seconds);
  out << line;
  for (const auto& output : result.outputs) {
    out << "  " << output.key << ": " << output.documents << " documents";
    const int64_t skipped = result.input_documents - output.documents;
    if (skipped > 0) out << " (" << skipped << " empty skipped)";
    out << ", " << output.sequences << " sequences, " << output.tokens << " tokens -> ";
    if (is_hdf5_path(output.path)) {
      out << output.path << "\n";
    } else {
      out << output.path << ".bin, " << output.path << ".idx\n";
    }
  }
  return out.str();
}

}  // namespace megacpp::io::data
