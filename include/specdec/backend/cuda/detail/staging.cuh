// SPDX-License-Identifier: MIT
// The per-call arrays a launch reads (a batch's offsets and streams): the caller's device arrays
// where given, else the host arrays copied into the front of the workspace.
// IWYU pragma: private
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/core/philox.hpp"

namespace specdec::backend::cuda_impl::detail {

/// The B + 1 offsets and B streams a launch reads, in chain_workspace_size(B)'s layout at
/// `workspace`: the device arrays where given (nothing copied: the call can be captured in a
/// graph), else the host ones copied there with cudaMemcpyAsync on `stream`.
inline cudaError_t offsets_and_streams(const std::int32_t* host_offsets,
                                       const std::int32_t* device_offsets,
                                       const RandomStream* host_streams,
                                       const RandomStream* device_streams, std::int64_t batch,
                                       void* workspace, cudaStream_t stream,
                                       const std::int32_t** offsets,
                                       const RandomStream** streams) {
  const auto b = static_cast<std::size_t>(batch);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* staged_offsets = reinterpret_cast<std::int32_t*>(base);
  auto* staged_streams =
      reinterpret_cast<RandomStream*>(base + device_round_up((b + 1) * sizeof(std::int32_t)));
  *offsets = device_offsets;
  *streams = device_streams;
  if (device_offsets == nullptr) {
    const cudaError_t status =
        cudaMemcpyAsync(staged_offsets, host_offsets, (b + 1) * sizeof(std::int32_t),
                        cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
    *offsets = staged_offsets;
  }
  if (device_streams == nullptr) {
    const cudaError_t status = cudaMemcpyAsync(
        staged_streams, host_streams, b * sizeof(RandomStream), cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
    *streams = staged_streams;
  }
  return cudaSuccess;
}

}  // namespace specdec::backend::cuda_impl::detail
