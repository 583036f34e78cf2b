// at::Tensor <-> RawTensor (torch_save's torch-free tensor): the one place that maps
// libtorch scalar types to stored dtypes.
#pragma once

#include <ATen/core/Tensor.h>

#include "serialization/torch_save.h"

namespace megacpp::checkpoint {

serialization::DType to_dtype(at::ScalarType type);  // throws std::invalid_argument for unstored types
at::ScalarType to_scalar_type(serialization::DType dtype);

// A contiguous CPU copy of `tensor`'s values.
serialization::RawTensor to_raw(const at::Tensor& tensor);
// A CPU tensor with `raw`'s values (strides and storage offset honoured).
at::Tensor from_raw(const serialization::RawTensor& raw);

}  // namespace megacpp::checkpoint
