// at::Tensor <-> RawTensor (torch_save's torch-free tensor): the one place that maps
// libtorch scalar types to stored dtypes.
#pragma once

#include <ATen/core/Tensor.h>

#include "io/serialization/safetensors.h"
#include "io/serialization/torch_save.h"

namespace megacpp::checkpoint {

io::serialization::DType to_dtype(at::ScalarType type);  // throws std::invalid_argument for unstored types
at::ScalarType to_scalar_type(io::serialization::DType dtype);

// A contiguous CPU copy of `tensor`'s values.
io::serialization::RawTensor to_raw(const at::Tensor& tensor);
// A CPU tensor with `raw`'s values (strides and storage offset honoured).
at::Tensor from_raw(const io::serialization::RawTensor& raw);

// Floating-point weights in safetensors files: "F32", "BF16", "F16". Throws naming `what`
// (a file and tensor) for other dtypes.
std::string to_safetensors_dtype(at::ScalarType type);
at::ScalarType from_safetensors_dtype(const std::string& dtype, const std::string& what);
// A view of a contiguous CPU tensor, valid while `tensor` lives.
io::serialization::TensorView safetensors_view(const at::Tensor& tensor);

}  // namespace megacpp::checkpoint
