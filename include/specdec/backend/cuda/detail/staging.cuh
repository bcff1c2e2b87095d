// SPDX-License-Identifier: MIT
// The per-call arrays a launch reads (a batch's offsets, streams, warps): the caller's device
// arrays where given, else the host arrays copied into the workspace.
// IWYU pragma: private
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/resident.hpp"
#include "specdec/core/philox.hpp"

namespace specdec::backend::cuda_impl::detail {

/// The array a launch reads: on the device, the array itself (nothing copied: the call can be
/// captured in a graph); in host memory, its copy at `staging`, made with cudaMemcpyAsync on
/// `stream`.
template <class T>
cudaError_t stage(const Resident<const T>& array, void* staging, cudaStream_t stream,
                  const T** out) {
  if (array.on_device()) {
    *out = array.data();
    return cudaSuccess;
  }
  *out = static_cast<const T*>(staging);
  return cudaMemcpyAsync(staging, array.data(), array.size() * sizeof(T), cudaMemcpyHostToDevice,
                         stream);
}

/// The B + 1 offsets and B streams a launch reads, staged where needed in
/// chain_workspace_size(B)'s layout at `workspace`.
inline cudaError_t offsets_and_streams(const Resident<const std::int32_t>& offsets,
                                       const Resident<const RandomStream>& streams,
                                       void* workspace, cudaStream_t stream,
                                       const std::int32_t** staged_offsets,
                                       const RandomStream** staged_streams) {
  auto* base = static_cast<unsigned char*>(workspace);
  const cudaError_t status = stage(offsets, base, stream, staged_offsets);
  if (status != cudaSuccess) return status;
  return stage(streams, base + device_round_up(offsets.size() * sizeof(std::int32_t)), stream,
               staged_streams);
}

}  // namespace specdec::backend::cuda_impl::detail
