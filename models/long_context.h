// How a language model runs long sequences: Ulysses sequence parallelism over a group of ranks
// (Note [Ulysses] in parallel/ulysses.h) and TiledMLP (Note [Tiled forward] in
// parallel/tiled_forward.h), applied to the layers the model is built from.
#pragma once

#include <string>

#include "models/language_model.h"
#include "parallel/group.h"

namespace megacpp::models {

// Splits every models::Attention layer of `model` by heads over `group` (size > 1): the
// outputs of its q, k and v projections go from sequence- to head-split, the input of its
// output projection back. The model then takes a slice of each sequence
// (parallel::sequence_slice). Throws std::invalid_argument starting with `setting` (how the
// size was given, e.g. "--context-parallel-size 2") when the model cannot run on slices
// (FSDP2Mixin::ulysses_refusal) or a layer's heads or query groups do not split over the group.
void apply_ulysses(LanguageModel& model, const parallel::Group& group, const std::string& setting);

// Runs every dense SwiGLU MLP of `model` (models::SwiGLUMLP not inside a SparseMoeBlock: the
// experts are left alone) over `tiles` tiles of the sequence. Throws std::invalid_argument
// naming `key` when the model has none.
void apply_tiled_mlp(LanguageModel& model, int tiles, const std::string& key);

}  // namespace megacpp::models
