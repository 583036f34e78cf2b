// Values other than tensors over a group (torch.distributed's broadcast_object_list and
// all_gather_object, for the few kinds megacpp sends): text that must reach every member (a
// refusal, a manifest of tensors) and lists of token ids (prompts, responses). Sizes go first,
// then the values packed into one uint8 or int64 tensor on `device` (CUDA for NCCL).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "parallel/group.h"

namespace megacpp::parallel {

// Every member returns member `root`'s `text` (the others' `text` is ignored).
std::string broadcast_text(const Group& group, const std::string& text, int root, const c10::Device& device);

// Every member returns every member's `text`, in group-rank order.
std::vector<std::string> all_gather_texts(const Group& group, const std::string& text, const c10::Device& device);

using TokenLists = std::vector<std::vector<int64_t>>;
// Every member returns every member's `lists` (any number, of any lengths), in group-rank order.
std::vector<TokenLists> all_gather_token_lists(const Group& group, const TokenLists& lists, const c10::Device& device);

}  // namespace megacpp::parallel
