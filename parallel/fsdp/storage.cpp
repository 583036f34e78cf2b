#include "parallel/fsdp/storage.h"

#include <c10/core/StorageImpl.h>

namespace megacpp::parallel::fsdp {

void free_storage(const at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == 0) return;
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
  storage->set_nbytes(0);
}

void allocate_storage(const at::Tensor& tensor, size_t nbytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  if (storage->nbytes() == nbytes) return;
  TORCH_INTERNAL_ASSERT(storage->nbytes() == 0, "allocate_storage on a live storage of ",
                        storage->nbytes(), " bytes (wanted ", nbytes, ")");
  storage->set_data_ptr_noswap(storage->allocator()->allocate(nbytes));
  storage->set_nbytes(nbytes);
}

size_t storage_nbytes(const at::Tensor& tensor) { return tensor.storage().nbytes(); }

}  // namespace megacpp::parallel::fsdp
