// SPDX-License-Identifier: MIT
// Launchers of the batched tree mask, position and prefix match kernels.
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/tree_mask_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t packed_tree_masks_batch(const std::int32_t* host_offsets, std::int64_t batch,
                                    const std::int32_t* parents, std::uint32_t* masks,
                                    std::int64_t words, std::int64_t mask_stride, void* workspace,
                                    cudaStream_t stream) {
  auto* offsets = static_cast<std::int32_t*>(workspace);
  const cudaError_t status = cudaMemcpyAsync(
      offsets, host_offsets, static_cast<std::size_t>(batch + 1) * sizeof(std::int32_t),
      cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  detail::packed_tree_masks_kernel<<<static_cast<unsigned int>(batch), detail::kTreeMaskThreads, 0,
                                     stream>>>(offsets, parents, masks, static_cast<int>(words),
                                               mask_stride);
  return cudaGetLastError();
}

cudaError_t tree_positions_batch(const std::int32_t* host_offsets, std::int64_t batch,
                                 const std::int32_t* parents,
                                 const std::int32_t* host_context_lengths, std::int32_t* positions,
                                 void* workspace, cudaStream_t stream) {
  const auto b = static_cast<std::size_t>(batch);
  auto* offsets = static_cast<std::int32_t*>(workspace);
  auto* contexts = reinterpret_cast<std::int32_t*>(static_cast<unsigned char*>(workspace) +
                                                   device_round_up((b + 1) * sizeof(std::int32_t)));
  cudaError_t status = cudaMemcpyAsync(offsets, host_offsets, (b + 1) * sizeof(std::int32_t),
                                       cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  status = cudaMemcpyAsync(contexts, host_context_lengths, b * sizeof(std::int32_t),
                           cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  detail::tree_positions_kernel<<<static_cast<unsigned int>(batch), detail::kTreeMaskThreads, 0,
                                  stream>>>(offsets, parents, contexts, positions);
  return cudaGetLastError();
}

cudaError_t prefix_match_batch(const std::int32_t* beams, std::int64_t rows,
                               std::int64_t beam_stride, std::int32_t width, std::int32_t length,
                               std::int32_t* out, std::int64_t out_stride, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const auto blocks = static_cast<unsigned int>((rows + kThreads - 1) / kThreads);
  detail::prefix_match_kernel<<<blocks, kThreads, 0, stream>>>(
      beams, beam_stride, static_cast<int>(rows), width, length, out, out_stride);
  return cudaGetLastError();
}

}  // namespace specdec::backend::cuda_impl
