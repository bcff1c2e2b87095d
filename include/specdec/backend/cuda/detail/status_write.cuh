// SPDX-License-Identifier: MIT
// How the verification kernels report a sequence's status (backend/status.hpp): thread 0 writes
// its code, a failure also counted in the buffer's last word, which the launcher zeroes first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/status.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Zeroes the failure count status[batch] on `stream` before the kernel (none without a buffer):
/// an asynchronous memset, so a call stays capturable.
inline cudaError_t clear_failures(std::int32_t* status, std::int64_t batch, cudaStream_t stream) {
  if (status == nullptr) return cudaSuccess;
  return cudaMemsetAsync(status + batch, 0, sizeof(std::int32_t), stream);
}

/// Sequence b's status (by one thread of its block); a failure adds 1 to status[gridDim.x].
__device__ inline void write_status(Global<std::int32_t> status, std::int64_t b,
                                    SequenceStatus code) {
  if (status == nullptr) return;
  status[b] = static_cast<std::int32_t>(code);
  if (code != SequenceStatus::kOk) status.atomic_add(static_cast<std::int64_t>(gridDim.x), 1);
}

}  // namespace specdec::backend::cuda_impl::detail
