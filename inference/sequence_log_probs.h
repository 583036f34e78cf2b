// Note [Forward-only sharded inference]
// ROLL's fsdp2_infer strategy (a reference model, or the actor's old log-probs): the model
// sharded with FSDP2, run forward only, returning each next token's log-probability (and each
// position's entropy) of given sequences. No gradients are kept and no optimizer exists, so a
// rank holds its shard, one group's gathered parameters at a time (reshard after forward) and
// the activations of `batch_size` sequences (ROLL's infer_batch_size).
//
// Every FSDP2 forward is collective: the ranks of the model's mesh must run as many forwards as
// each other, whatever number of sequences each was given. They agree on the largest number
// first; a rank with fewer runs its last forwards on a two-token stand-in whose result it drops.
// With Ulysses (Note [Ulysses]) the ranks of a group are given the same sequences, each runs its
// slice of every position (the sequences padded on the right to a multiple of the group's size;
// causal attention keeps padding from reaching earlier positions) and the slices are gathered.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "inference/token_log_probs.h"
#include "models/language_model.h"
#include "parallel/group.h"

namespace megacpp::inference {

struct SequenceScoring {
  int64_t batch_size = 1;  // sequences per forward (ROLL's infer_batch_size)
  double temperature = 1.0;
  bool with_entropy = true;
  int64_t chunk_tokens = 1024;  // positions turned into fp32 log-probs at a time
  c10::Device device = c10::Device(c10::kCPU);
  parallel::Group world = parallel::Group::single(0);    // every rank of the model's mesh
  parallel::Group cp = parallel::Group::single(0);  // splits each sequence's positions
  // The forwards' positions are padded to a multiple of this (and of the Ulysses group's size):
  // with sequence parallelism the TP size, which each sequence is split over inside the model.
  int64_t position_multiple = 1;
};

// Collective over `scoring.world`. `ids` [n, L] int64 on the CPU, each row a sequence of
// `lengths[i]` tokens padded on the right (`lengths` undefined: all of L). Returns log-probs and
// entropies [n, L - 1] fp32 on the CPU, 0 from position lengths[i] - 1 on. The model runs in
// eval mode (no dropout) and is left in the mode it was in. Throws std::invalid_argument naming
// a bad shape, length or batch size.
TokenLogProbs sequence_log_probs(models::LanguageModel& model, const at::Tensor& ids, const at::Tensor& lengths,
                                 const SequenceScoring& scoring);

}  // namespace megacpp::inference
