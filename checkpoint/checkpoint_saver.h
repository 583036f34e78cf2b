// Saving a checkpoint safely, synchronously or in the background. Every rank writes its
// own file into SAVE/iter_N.tmp; once all have, rank 0 writes the index (.metadata, and for
// torch_dist common.pt + metadata.json), renames the directory into place and only then
// updates latest_checkpointed_iteration.txt. A save killed halfway leaves a .tmp directory
// and the previous checkpoint still the latest. Ranks agree through the job's key-value
// store, so a background save needs no collective on the training thread.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <c10/util/intrusive_ptr.h>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/dcp_io.h"
#include "io/checkpoint/layout.h"

namespace c10d {
class Store;
}

namespace megacpp::checkpoint {

struct SaveJob {
  std::string root;  // --save
  int64_t iteration = 0;
  CheckpointFormat format = CheckpointFormat::torch_dcp();
  RankItems items;  // this rank's part of the sharded state
  // torch_dist only: the non-sharded state rank 0 writes to common.pt.
  UnshardedState common;

  // Non-sharded state (the coordinator's): common.pt for torch_dist; for torch_dcp DCP items,
  // a dict split into one item per leaf as PyTorch's dcp.save splits it.
  void add_unsharded(const std::string& key, io::serialization::PyValue value);
};

// The last step of every save, by one process: writes the index of the rank files in
// `tmp_dir` (.metadata; for torch_dist also common.pt and metadata.json), renames `tmp_dir`
// to ROOT/iter_N (replacing an older copy) and only then points the tracker at it.
void publish_checkpoint(const SaveJob& job, const std::string& tmp_dir, const io::checkpoint::DcpMetadata& index);

class CheckpointSaver {
 public:
  // `store` may be null when world_size is 1.
  CheckpointSaver(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size);
  ~CheckpointSaver();
  CheckpointSaver(const CheckpointSaver&) = delete;
  CheckpointSaver& operator=(const CheckpointSaver&) = delete;

  // Collective. Writes `job`; returns when the checkpoint is complete on every rank, or with
  // `async` as soon as this rank's state is copied (the files are written in the background;
  // a previous background save is finished first).
  void save(SaveJob job, bool async);
  // Waits for the save in flight, if any; rethrows its error.
  void finish();

 private:
  void write(const SaveJob& job, const std::string& tmp_dir, const std::string& prefix);
  void collect_and_publish(const SaveJob& job, const std::string& tmp_dir, const std::string& prefix);

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, world_size_;
  int64_t saves_ = 0;  // numbers each save's keys in the store (same on every rank)
  std::thread worker_;
  std::exception_ptr error_;
};

}  // namespace megacpp::checkpoint
