// SPDX-License-Identifier: MIT
// Launcher of the Philox fill kernel (streams staged from the host or read in place on the device).
#include <cuda_runtime.h>

#include <algorithm>

#include "specdec/backend/cuda/detail/random_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t fill_random(const FillRandomParams& params, void* workspace, cudaStream_t stream) {
  const RandomStream* streams = params.device_streams;
  cudaError_t status = cudaSuccess;
  if (streams == nullptr) {
    auto* staged = static_cast<RandomStream*>(workspace);
    status = cudaMemcpyAsync(staged, params.host_streams,
                             static_cast<std::size_t>(params.stream_count) * sizeof(RandomStream),
                             cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
    streams = staged;
  }
  constexpr int kThreads = 256;
  constexpr std::int64_t kMaxGridY = 65535;
  const auto blocks_x = static_cast<unsigned int>((params.count + kThreads - 1) / kThreads);
  for (std::int64_t s = 0; s < params.stream_count; s += kMaxGridY) {
    const auto rows = static_cast<unsigned int>(std::min(kMaxGridY, params.stream_count - s));
    status = detail::launch(detail::fill_random_kernel, dim3(blocks_x, rows), kThreads, stream,
                            streams + s, params.first, params.count,
                            params.out + s * params.out_stride, params.out_stride, params.kind);
    if (status != cudaSuccess) return status;
  }
  return cudaSuccess;
}

}  // namespace specdec::backend::cuda_impl
