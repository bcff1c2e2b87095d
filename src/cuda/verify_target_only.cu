// SPDX-License-Identifier: MIT
// Launchers of the target-only verification kernels (drafts without draft rows): offsets and
// streams staged from the host or read in place from the device, one block per sequence or tree.
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/target_only_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

namespace {

/// The offsets and streams a launch reads, in chain_workspace_size(B)'s layout: the device arrays
/// where given (nothing copied: the call can be captured in a graph), else the host ones copied
/// into the workspace.
cudaError_t offsets_and_streams(const std::int32_t* host_offsets,
                                const std::int32_t* device_offsets,
                                const RandomStream* host_streams,
                                const RandomStream* device_streams, std::int64_t batch,
                                void* workspace, cudaStream_t stream, const std::int32_t** offsets,
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

}  // namespace

cudaError_t verify_chain_batch_target_only(const ChainVerifyParams& p, void* workspace,
                                           cudaStream_t stream) {
  if (p.dtype != DType::kF32) return cudaErrorInvalidValue;
  if (p.batch == 0) return cudaSuccess;
  const std::int32_t* offsets = nullptr;
  const RandomStream* streams = nullptr;
  const cudaError_t status =
      offsets_and_streams(p.host_draft_offsets, p.device_draft_offsets, p.host_streams,
                          p.device_streams, p.batch, workspace, stream, &offsets, &streams);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::verify_chain_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
                        static_cast<const float*>(p.target), p.target_stride, offsets,
                        p.draft_tokens, p.vocab, streams, p.emitted, p.accepted);
}

cudaError_t verify_tree_batch_target_only(const TreeVerifyParams& p, void* workspace,
                                          cudaStream_t stream) {
  if (p.batch == 0) return cudaSuccess;
  const std::int32_t* offsets = nullptr;
  const RandomStream* streams = nullptr;
  const cudaError_t status =
      offsets_and_streams(p.host_node_offsets, p.device_node_offsets, p.host_streams,
                          p.device_streams, p.batch, workspace, stream, &offsets, &streams);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::verify_tree_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream, offsets,
                        p.tokens, p.parents, p.target, p.target_stride, p.vocab, streams,
                        p.accepted_nodes, p.accepted, p.final_tokens, p.bonus);
}

}  // namespace specdec::backend::cuda_impl
