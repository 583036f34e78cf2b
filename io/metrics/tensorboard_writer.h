// TensorBoard event files written directly (no TensorFlow, no protobuf library):
// LOG_DIR/events.out.tfevents.<seconds>.<host>.<pid>.<n>, TFRecord-framed Event protos with
// scalar summaries, which TensorBoard reads as it reads PyTorch's SummaryWriter output.
// <seconds> is the Unix time zero-padded to 10 digits and <n> counts the writers this process
// has opened (0 for the first), as TensorBoard's EventFileWriter names its files.
// tests/reference/tensorboard_events.py decodes such files independently.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace megacpp::io::metrics {

// Not thread-safe: one thread (typically rank 0's training loop) owns a writer.
class TensorBoardWriter {
 public:
  // Creates `log_dir` (and parents) and the event file, and writes the file_version event
  // ("brain.Event:2"). Throws std::runtime_error naming the directory or file if it cannot.
  explicit TensorBoardWriter(const std::string& log_dir);
  // Flushes; never throws.
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // Appends an Event{wall_time=now, step, summary{value{tag, simple_value=float(value)}}}.
  // Buffered: call flush() to make it visible to readers.
  void add_scalar(const std::string& tag, double value, int64_t step);
  // Flushes buffered events to the file. Throws std::runtime_error naming the file when a
  // write has failed.
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event);
  std::string path_;
  std::ofstream out_;
};

}  // namespace megacpp::io::metrics
