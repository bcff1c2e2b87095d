// SPDX-License-Identifier: MIT
// Launchers of the target-only verification kernels (drafts without draft rows): stage offsets
// and streams, one block per sequence or tree.
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/target_only_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

namespace {

/// Copies B + 1 host offsets and B host streams into chain_workspace_size(B)'s layout.
cudaError_t stage_offsets_and_streams(const std::int32_t* host_offsets,
                                      const RandomStream* host_streams, std::int64_t batch,
                                      void* workspace, cudaStream_t stream, std::int32_t** offsets,
                                      RandomStream** streams) {
  const auto b = static_cast<std::size_t>(batch);
  auto* base = static_cast<unsigned char*>(workspace);
  *offsets = reinterpret_cast<std::int32_t*>(base);
  *streams =
      reinterpret_cast<RandomStream*>(base + device_round_up((b + 1) * sizeof(std::int32_t)));
  const cudaError_t status = cudaMemcpyAsync(*offsets, host_offsets, (b + 1) * sizeof(std::int32_t),
                                             cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  return cudaMemcpyAsync(*streams, host_streams, b * sizeof(RandomStream), cudaMemcpyHostToDevice,
                         stream);
}

}  // namespace

cudaError_t verify_chain_batch_target_only(const ChainVerifyParams& p, void* workspace,
                                           cudaStream_t stream) {
  if (p.dtype != DType::kF32) return cudaErrorInvalidValue;
  if (p.batch == 0) return cudaSuccess;
  std::int32_t* offsets = nullptr;
  RandomStream* streams = nullptr;
  const cudaError_t status = stage_offsets_and_streams(
      p.host_draft_offsets, p.host_streams, p.batch, workspace, stream, &offsets, &streams);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::verify_chain_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
                        static_cast<const float*>(p.target), p.target_stride,
                        static_cast<const std::int32_t*>(offsets), p.draft_tokens, p.vocab,
                        static_cast<const RandomStream*>(streams), p.emitted, p.accepted);
}

cudaError_t verify_tree_batch_target_only(const TreeVerifyParams& p, void* workspace,
                                          cudaStream_t stream) {
  if (p.batch == 0) return cudaSuccess;
  std::int32_t* offsets = nullptr;
  RandomStream* streams = nullptr;
  const cudaError_t status = stage_offsets_and_streams(p.host_node_offsets, p.host_streams, p.batch,
                                                       workspace, stream, &offsets, &streams);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::verify_tree_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
                        static_cast<const std::int32_t*>(offsets), p.tokens, p.parents, p.target,
                        p.target_stride, p.vocab, static_cast<const RandomStream*>(streams),
                        p.accepted_nodes, p.accepted, p.final_tokens, p.bonus);
}

}  // namespace specdec::backend::cuda_impl
