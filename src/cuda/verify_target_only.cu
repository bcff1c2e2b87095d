// SPDX-License-Identifier: MIT
// Launchers of the target-only verification kernels (drafts without draft rows): offsets and
// streams staged from the host or read in place from the device, one block per sequence or tree.
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/detail/target_only_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {


cudaError_t verify_chain_batch_target_only(const ChainVerifyParams& p, void* workspace,
                                           cudaStream_t stream) {
  if (p.dtype != DType::kF32) return cudaErrorInvalidValue;
  const std::int32_t* offsets = nullptr;
  const RandomStream* streams = nullptr;
  cudaError_t status = detail::clear_failures(p.status, p.batch, stream);
  if (status != cudaSuccess || p.batch == 0) return status;
  status =
      detail::offsets_and_streams(p.draft_offsets, p.streams, workspace, stream, &offsets, &streams);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::verify_chain_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
                        static_cast<const float*>(p.target), p.target_stride, offsets,
                        p.draft_tokens, p.vocab, streams, p.emitted, p.accepted, p.status);
}

cudaError_t verify_tree_batch_target_only(const TreeVerifyParams& p, void* workspace,
                                          cudaStream_t stream) {
  const std::int32_t* offsets = nullptr;
  const RandomStream* streams = nullptr;
  cudaError_t status = detail::clear_failures(p.status, p.batch, stream);
  if (status != cudaSuccess || p.batch == 0) return status;
  status =
      detail::offsets_and_streams(p.node_offsets, p.streams, workspace, stream, &offsets, &streams);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::verify_tree_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream, offsets,
                        p.tokens, p.parents, p.target, p.target_stride, p.vocab, streams,
                        p.accepted_nodes, p.accepted, p.final_tokens, p.bonus, p.status);
}

}  // namespace specdec::backend::cuda_impl
