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
cudaError_t launch_warp(const WarpBatchParams& p, const DeviceWarp& shared_warp,
                        const DeviceWarp* row_warps, cudaStream_t stream) {
  // gridDim.x allows 2^31 - 1 blocks: more rows than that cannot be addressed anyway.
  return detail::launch(detail::warp_logits_batch_kernel<T>, static_cast<unsigned int>(p.rows),
                        kWarpThreads, stream, static_cast<const T*>(p.logits), p.logits_stride,
                        p.warped, p.warped_stride, static_cast<int>(p.cols), shared_warp,
                        static_cast<const DeviceWarp*>(row_warps));
}

}  // namespace

cudaError_t warp_logits_batch(const WarpBatchParams& params, void* workspace, cudaStream_t stream) {
  // One shared warp travels as a kernel argument; per-row warps are staged in the workspace.
  const DeviceWarp shared_warp = params.host_warps[0];
  DeviceWarp* row_warps = nullptr;
  if (params.warp_count > 1) {
    row_warps = static_cast<DeviceWarp*>(workspace);
    const cudaError_t status =
        cudaMemcpyAsync(row_warps, params.host_warps,
                        static_cast<std::size_t>(params.warp_count) * sizeof(DeviceWarp),
                        cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
  }
  switch (params.dtype) {
    case DType::kF32:
      return launch_warp<float>(params, shared_warp, row_warps, stream);
    case DType::kF16:
      return launch_warp<__half>(params, shared_warp, row_warps, stream);
    case DType::kBF16:
      return launch_warp<__nv_bfloat16>(params, shared_warp, row_warps, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace specdec::backend::cuda_impl
