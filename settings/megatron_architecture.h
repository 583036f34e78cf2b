// Note [Megatron architecture]
// Megatron's pretrain_gpt.py builds one GPT model whose pieces its architecture flags choose:
// --position-embedding-type (learned_absolute by default, or rope), --normalization (LayerNorm
// or RMSNorm), --swiglu (else GeLU) and --disable-bias-linear (else biases). A launch script
// that gives none of them trains Megatron's GPT; Llama scripts give the rope/RMSNorm/SwiGLU/no
// bias set. megacpp's families say which set they compute (ModelFamily::megatron_architecture),
// and without --model-type the command line builds the family its flags describe:
//  - every architecture flag given must agree with the family (else the error lists what each
//    family computes);
//  - among the families that agree, the one that also matches Megatron's defaults for the flags
//    left out; if none does, the only one that agrees, and the log says which left-out
//    defaults it computes differently (Megatron's Llama 3 example leaves --normalization out).
// With --model-type, the architecture flags given must agree with that family.
#pragma once

#include <string>
#include <vector>

#include <cxxopts.hpp>

namespace megacpp::settings {

// --position-embedding-type, --use-rotary-position-embeddings, --no-position-embedding,
// --normalization, --swiglu, --disable-bias-linear.
void add_megatron_architecture_flags(cxxopts::Options& options);
bool is_megatron_architecture_flag(const std::string& flag);

struct ModelFamilyChoice {
  std::string model_type;
  std::string reason;              // how it was chosen, for errors: "--model-type" or the architecture flags
  std::vector<std::string> notes;  // for the log
};

// The family to build: --model-type when given, else the one the architecture flags describe.
// Throws std::invalid_argument naming the flags that no family (or not the named one) computes.
ModelFamilyChoice choose_model_family(const cxxopts::ParseResult& parsed);

}  // namespace megacpp::settings
