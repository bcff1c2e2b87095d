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

/// Clears the batch's status entries and, unless the batch is empty (nothing to launch), stages
/// its offsets and streams and launches `kernel` with one block of kTargetOnlyThreads per
/// sequence or tree on the arguments `args_of(staged)` gives, then `extra`.
template <class Kernel, class ArgsOf, class... Extra>
cudaError_t launch_target_only(Kernel kernel, std::int32_t* status_out, std::int64_t batch,
                               const Resident<const std::int32_t>& offsets,
                               const Resident<const RandomStream>& streams, void* workspace,
                               cudaStream_t stream, const ArgsOf& args_of, const Extra&... extra) {
  cudaError_t status = detail::clear_failures(status_out, batch, stream);
  if (status != cudaSuccess || batch == 0) return status;
  StagedArrays staged;
  status = detail::offsets_and_streams(offsets, streams, workspace, stream, &staged.offsets,
                                       &staged.streams);
  if (status != cudaSuccess) return status;
  return detail::launch(kernel, static_cast<unsigned int>(batch),
                        static_cast<unsigned int>(detail::kTargetOnlyThreads), stream,
                        args_of(staged), extra...);
}

/// A chain launch's kernel arguments (no draft rows) over the staged offsets and streams.
detail::ChainKernelArgs<float> chain_args(const ChainVerifyParams& p, const StagedArrays& s) {
  return {.target = static_cast<const float*>(p.target),
          .target_stride = p.target_stride,
          .offsets = s.offsets,
          .tokens = p.draft_tokens,
          .vocab = p.vocab,
          .streams = s.streams,
          .emitted = p.emitted,
          .accepted = p.accepted,
          .status = p.status};
}

}  // namespace

cudaError_t verify_chain_batch_target_only(const ChainVerifyParams& p, void* workspace,
                                           cudaStream_t stream) {
  if (p.dtype != DType::kF32) return cudaErrorInvalidValue;
  return launch_target_only(
      detail::verify_chain_target_only_kernel, p.status, p.batch, p.draft_offsets, p.streams,
      workspace, stream, [&](const StagedArrays& s) { return chain_args(p, s); });
}

cudaError_t verify_chain_batch_synthetic(const ChainVerifyParams& p, const SyntheticRates& rates,
                                         void* workspace, cudaStream_t stream) {
  if (p.dtype != DType::kF32) return cudaErrorInvalidValue;
  return launch_target_only(
      detail::verify_chain_synthetic_kernel, p.status, p.batch, p.draft_offsets, p.streams,
      workspace, stream, [&](const StagedArrays& s) { return chain_args(p, s); }, rates);
}

cudaError_t verify_tree_batch_target_only(const TreeVerifyParams& p, void* workspace,
                                          cudaStream_t stream) {
  return launch_target_only(detail::verify_tree_target_only_kernel, p.status, p.batch,
                            p.node_offsets, p.streams, workspace, stream,
                            [&](const StagedArrays& s) {
                              return detail::TreeKernelArgs{.offsets = s.offsets,
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
                                                            .status = p.status};
                            });
}

}  // namespace specdec::backend::cuda_impl
