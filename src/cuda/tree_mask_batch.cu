// SPDX-License-Identifier: MIT
// Launchers of the batched tree mask, position and prefix match kernels (offsets and context
// lengths staged from the host or read in place on the device).
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/tree_mask_kernels.cuh"
#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t packed_tree_masks_batch(const TreeMaskParams& params, void* workspace,
                                    cudaStream_t stream) {
  const std::int32_t* offsets = nullptr;
  const cudaError_t status = detail::stage(params.node_offsets, workspace, stream, &offsets);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::packed_tree_masks_kernel, static_cast<unsigned int>(params.batch),
                        detail::kTreeMaskThreads, stream, offsets, params.parents, params.masks,
                        static_cast<int>(params.words), params.mask_stride);
}

cudaError_t tree_positions_batch(const TreePositionsParams& params, void* workspace,
                                 cudaStream_t stream) {
  const auto b = static_cast<std::size_t>(params.batch);
  const std::int32_t *offsets = nullptr, *contexts = nullptr;
  // The tree_mask_workspace_size layout: the offsets, then the context lengths.
  cudaError_t status = detail::stage(params.node_offsets, workspace, stream, &offsets);
  if (status != cudaSuccess) return status;
  status = detail::stage(params.context_lengths,
                         static_cast<unsigned char*>(workspace) +
                             device_round_up((b + 1) * sizeof(std::int32_t)),
                         stream, &contexts);
  if (status != cudaSuccess) return status;
  constexpr unsigned int kThreads = detail::kTreeMaskThreads;
  return detail::launch(detail::tree_positions_kernel,
                        static_cast<unsigned int>((b + kThreads - 1) / kThreads), kThreads, stream,
                        offsets, static_cast<int>(params.batch), params.parents, contexts,
                        params.positions);
}

cudaError_t prefix_match_batch(const std::int32_t* beams, std::int64_t rows,
                               std::int64_t beam_stride, std::int32_t width, std::int32_t length,
                               std::int32_t* out, std::int64_t out_stride, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const auto blocks = static_cast<unsigned int>((rows + kThreads - 1) / kThreads);
  return detail::launch(detail::prefix_match_kernel, blocks, kThreads, stream, beams, beam_stride,
                        static_cast<int>(rows), width, length, out, out_stride);
}

}  // namespace specdec::backend::cuda_impl
