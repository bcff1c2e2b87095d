// SPDX-License-Identifier: MIT
// Launcher of the batched tree verification kernel (offsets and streams staged from the host or
// read in place from the device, the node rule picked, one block per tree).
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/detail/tree_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t verify_tree_batch(TreeRule rule, const TreeVerifyParams& p, void* workspace,
                              cudaStream_t stream) {
  if (rule != TreeRule::kRecursive && rule != TreeRule::kMultiRound) return cudaErrorInvalidValue;
  const std::int32_t* offsets = nullptr;
  const RandomStream* streams = nullptr;
  cudaError_t status = detail::clear_failures(p.status, p.batch, stream);
  if (status == cudaSuccess) {
    status = detail::offsets_and_streams(p.node_offsets, p.streams, workspace, stream, &offsets,
                                         &streams);
  }
  if (status != cudaSuccess) return status;
  // The candidate lists follow the staged offsets and streams (tree_workspace_size's layout).
  auto* ints = reinterpret_cast<std::int32_t*>(static_cast<unsigned char*>(workspace) +
                                               chain_workspace_size(p.batch));
  const auto kernel = rule == TreeRule::kRecursive ? detail::verify_tree_kernel<true>
                                                   : detail::verify_tree_kernel<false>;
  return detail::launch(kernel, static_cast<unsigned int>(p.batch), detail::kDrawThreads, stream,
                        detail::TreeKernelArgs{.offsets = offsets,
                                               .tokens = p.tokens,
                                               .parents = p.parents,
                                               .target = p.target,
                                               .target_stride = p.target_stride,
                                               .draft = p.draft,
                                               .draft_stride = p.draft_stride,
                                               .vocab = p.vocab,
                                               .streams = streams,
                                               .ints = ints,
                                               .accepted_nodes = p.accepted_nodes,
                                               .accepted = p.accepted,
                                               .final_tokens = p.final_tokens,
                                               .bonus = p.bonus,
                                               .status = p.status});
}

}  // namespace specdec::backend::cuda_impl
