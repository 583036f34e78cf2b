// Note [Freeing storage under autograd]
// Autograd saves the gathered parameters it needs for backward (e.g. a linear's weight).
// To free their memory between forward and backward without invalidating those saved
// references, the engine frees the *storage* in place (0 bytes, null data pointer) and later
// re-allocates the same StorageImpl and gathers into it, so every tensor that shares it sees
// the data again. Writes go through an alias with its own version counter, so refilling the
// storage does not look like an in-place modification to autograd's saved-variable checks.
#pragma once

#include <ATen/core/Tensor.h>

namespace megacpp::parallel::fsdp {

void free_storage(const at::Tensor& tensor);
// Re-allocates `nbytes` for a freed storage; no-op when it is already allocated.
void allocate_storage(const at::Tensor& tensor, size_t nbytes);
size_t storage_nbytes(const at::Tensor& tensor);

}  // namespace megacpp::parallel::fsdp
