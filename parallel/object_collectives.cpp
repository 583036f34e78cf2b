#include "parallel/object_collectives.h"

#include <algorithm>
#include <cstring>

#include <torch/torch.h>

#include "parallel/collectives.h"

namespace megacpp::parallel {
namespace {

at::Tensor bytes_of(const std::string& text, int64_t length, const c10::Device& device) {
  at::Tensor bytes = torch::zeros({length}, torch::TensorOptions().dtype(torch::kUInt8));
  std::memcpy(bytes.data_ptr<uint8_t>(), text.data(), std::min<size_t>(text.size(), static_cast<size_t>(length)));
  return bytes.to(device);
}

std::string text_of(const at::Tensor& bytes) {
  const at::Tensor host = bytes.to(torch::kCPU).contiguous();
  const auto* data = host.data_ptr<uint8_t>();
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(host.numel()));
}

}  // namespace

std::string broadcast_text(const Group& group, const std::string& text, int root, const c10::Device& device) {
  if (group.size() == 1) return text;
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  at::Tensor length = torch::full({1}, static_cast<int64_t>(group.rank == root ? text.size() : 0), longs);
  broadcast(group, length, root).wait();
  const int64_t n = length.item<int64_t>();
  if (n == 0) return "";
  at::Tensor bytes = bytes_of(group.rank == root ? text : std::string(), n, device);
  broadcast(group, bytes, root).wait();
  return text_of(bytes);
}

namespace {

// Every member's `length`, in group-rank order.
std::vector<int64_t> all_gather_lengths(const Group& group, int64_t length, const c10::Device& device) {
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  at::Tensor lengths = torch::zeros({group.size()}, longs);
  all_gather_into_tensor(group, lengths, torch::full({1}, length, longs)).wait();
  const at::Tensor host = lengths.to(torch::kCPU).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + group.size());
}

}  // namespace

std::vector<std::string> all_gather_texts(const Group& group, const std::string& text, const c10::Device& device) {
  if (group.size() == 1) return {text};
  const std::vector<int64_t> lengths = all_gather_lengths(group, static_cast<int64_t>(text.size()), device);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<std::string> texts(group.size());
  if (longest == 0) return texts;
  at::Tensor gathered = torch::empty({group.size() * longest}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
  all_gather_into_tensor(group, gathered, bytes_of(text, longest, device)).wait();
  for (int r = 0; r < group.size(); ++r) {
    texts[r] = text_of(gathered.narrow(0, r * longest, lengths[r]));
  }
  return texts;
}

// Packed as [count, length of each, the tokens of each].
std::vector<TokenLists> all_gather_token_lists(const Group& group, const TokenLists& lists, const c10::Device& device) {
  std::vector<int64_t> packed{static_cast<int64_t>(lists.size())};
  for (const auto& list : lists) packed.push_back(static_cast<int64_t>(list.size()));
  for (const auto& list : lists) packed.insert(packed.end(), list.begin(), list.end());
  if (group.size() == 1) return {lists};
  const std::vector<int64_t> lengths = all_gather_lengths(group, static_cast<int64_t>(packed.size()), device);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  packed.resize(static_cast<size_t>(longest), 0);
  const at::Tensor mine = torch::tensor(packed, torch::kLong).to(device);
  at::Tensor gathered = torch::empty({group.size() * longest}, mine.options());
  all_gather_into_tensor(group, gathered, mine).wait();
  const at::Tensor host = gathered.to(torch::kCPU).contiguous();
  std::vector<TokenLists> result(group.size());
  for (int r = 0; r < group.size(); ++r) {
    const int64_t* data = host.data_ptr<int64_t>() + r * longest;
    const int64_t count = data[0];
    const int64_t* tokens = data + 1 + count;
    for (int64_t i = 0; i < count; ++i) {
      result[r].emplace_back(tokens, tokens + data[1 + i]);
      tokens += data[1 + i];
    }
  }
  return result;
}

}  // namespace megacpp::parallel
