// The model and adapters the LoRA tests train: a Qwen3-style llama of 2 layers, rank-4 adapters
// on every attention and MLP projection.
#pragma once

#include <string>

namespace megacpp::testing {

inline const std::string kLoraTestModel =
    "--model-type llama --qk-layernorm --num-layers 2 --hidden-size 32 --num-attention-heads 4 --num-query-groups 2 "
    "--ffn-hidden-size 48 --mock-data --tokenizer-type NullTokenizer --vocab-size 99 --make-vocab-size-divisible-by 4 "
    "--seed 5 --seq-length 16 --micro-batch-size 2 --global-batch-size 8 --log-interval 1 --eval-iters 0 --train-iters 10 "
    "--init-method-std 0.2 ";
inline const std::string kLoraTestAdapters =
    " --lora-rank 4 --lora-alpha 8 --lora-target-modules q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";

}  // namespace megacpp::testing
