// SPDX-License-Identifier: MIT
// Launcher of the batched warp kernel (dispatch on the logits type, then one block per row).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

namespace {

template <class T>
void launch(const void* logits, std::int64_t rows, std::int64_t cols, std::int64_t logits_stride,
            float* warped, std::int64_t warped_stride, const DeviceWarp& shared_warp,
            const DeviceWarp* row_warps, cudaStream_t stream) {
  // gridDim.x allows 2^31 - 1 blocks: more rows than that cannot be addressed anyway.
  detail::warp_logits_batch_kernel<T><<<static_cast<unsigned int>(rows), kWarpThreads, 0, stream>>>(
      static_cast<const T*>(logits), logits_stride, warped, warped_stride, static_cast<int>(cols),
      shared_warp, row_warps);
}

}  // namespace

cudaError_t warp_logits_batch(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                              std::int64_t logits_stride, float* warped, std::int64_t warped_stride,
                              const DeviceWarp* host_warps, std::int64_t warp_count,
                              void* workspace, cudaStream_t stream) {
  // One shared warp travels as a kernel argument; per-row warps are staged in the workspace.
  const DeviceWarp shared_warp = host_warps[0];
  DeviceWarp* row_warps = nullptr;
  if (warp_count > 1) {
    row_warps = static_cast<DeviceWarp*>(workspace);
    const cudaError_t status = cudaMemcpyAsync(
        row_warps, host_warps, static_cast<std::size_t>(warp_count) * sizeof(DeviceWarp),
        cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
  }
  switch (dtype) {
    case DType::kF32:
      launch<float>(logits, rows, cols, logits_stride, warped, warped_stride, shared_warp,
                    row_warps, stream);
      break;
    case DType::kF16:
      launch<__half>(logits, rows, cols, logits_stride, warped, warped_stride, shared_warp,
                     row_warps, stream);
      break;
    case DType::kBF16:
      launch<__nv_bfloat16>(logits, rows, cols, logits_stride, warped, warped_stride, shared_warp,
                            row_warps, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace specdec::backend::cuda_impl
