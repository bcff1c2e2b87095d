// SPDX-License-Identifier: MIT
// Launcher of the Philox fill kernel (streams staged from the host or read in place on the device).
#include <cuda_runtime.h>

#include <algorithm>

#include "specdec/backend/cuda/detail/random_kernels.cuh"
#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t fill_random(const FillRandomParams& params, void* workspace, cudaStream_t stream) {
  const RandomStream* streams = nullptr;
  cudaError_t status = detail::stage(params.streams, workspace, stream, &streams);
  if (status != cudaSuccess) return status;
  const auto stream_count = static_cast<std::int64_t>(params.streams.size());
  constexpr int kThreads = 256;
  constexpr std::int64_t kMaxGridY = 65535;
  const auto blocks_x = static_cast<unsigned int>((params.count + kThreads - 1) / kThreads);
  for (std::int64_t s = 0; s < stream_count; s += kMaxGridY) {
    const auto rows = static_cast<unsigned int>(std::min(kMaxGridY, stream_count - s));
    status = detail::launch(detail::fill_random_kernel, dim3(blocks_x, rows), kThreads, stream,
                            streams + s, params.first, params.count,
                            params.out + s * params.out_stride, params.out_stride, params.kind);
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace specdec::backend::cuda_impl
