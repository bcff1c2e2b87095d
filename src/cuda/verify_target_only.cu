// SPDX-License-Identifier: MIT
// Launchers of the target-only verification kernels (drafts without draft rows): offsets and
// streams staged from the host or read in place from the device, one block per sequence or tree.
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/detail/target_only_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {
namespace {

/// The offsets and streams a kernel reads: the caller's device arrays, or the host ones staged at
/// the front of the workspace.
struct StagedArrays {
  const std::int32_t* offsets = nullptr;
  const RandomStream* streams = nullptr;
};

/// Clears the batch's status entries, then (unless the batch is empty: nothing to launch) stages
/// its offsets and streams into `staged`.
cudaError_t clear_and_stage(std::int32_t* status_out, std::int64_t batch,
                            const Resident<const std::int32_t>& offsets,
                            const Resident<const RandomStream>& streams, void* workspace,
                            cudaStream_t stream, StagedArrays& staged) {
  const cudaError_t status = detail::clear_failures(status_out, batch, stream);
  if (status != cudaSuccess || batch == 0) return status;
  return detail::offsets_and_streams(offsets, streams, workspace, stream, &staged.offsets,
                                     &staged.streams);
}

}  // namespace

cudaError_t verify_chain_batch_target_only(const ChainVerifyParams& p, void* workspace,
                                           cudaStream_t stream) {
  if (p.dtype != DType::kF32) return cudaErrorInvalidValue;
  StagedArrays s;
  const cudaError_t status =
      clear_and_stage(p.status, p.batch, p.draft_offsets, p.streams, workspace, stream, s);
  if (status != cudaSuccess || p.batch == 0) return status;
  return detail::launch(
      detail::verify_chain_target_only_kernel, static_cast<unsigned int>(p.batch),
      static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
      detail::ChainKernelArgs<float>{.target = static_cast<const float*>(p.target),
                                     .target_stride = p.target_stride,
                                     .offsets = s.offsets,
                                     .tokens = p.draft_tokens,
                                     .vocab = p.vocab,
                                     .streams = s.streams,
                                     .emitted = p.emitted,
                                     .accepted = p.accepted,
                                     .status = p.status});
}

cudaError_t verify_tree_batch_target_only(const TreeVerifyParams& p, void* workspace,
                                          cudaStream_t stream) {
  StagedArrays s;
  const cudaError_t status =
      clear_and_stage(p.status, p.batch, p.node_offsets, p.streams, workspace, stream, s);
  if (status != cudaSuccess || p.batch == 0) return status;
  return detail::launch(detail::verify_tree_target_only_kernel, static_cast<unsigned int>(p.batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
                        detail::TreeKernelArgs{.offsets = s.offsets,
                                               .tokens = p.tokens,
                                               .parents = p.parents,
                                               .target = p.target,
                                               .target_stride = p.target_stride,
                                               .vocab = p.vocab,
                                               .streams = s.streams,
                                               .accepted_nodes = p.accepted_nodes,
                                               .accepted = p.accepted,
                                               .final_tokens = p.final_tokens,
                                               .bonus = p.bonus,
                                               .status = p.status});
}

}  // namespace specdec::backend::cuda_impl
