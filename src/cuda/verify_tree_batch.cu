// SPDX-License-Identifier: MIT
// Launcher of the batched tree verification kernel (offsets and streams staged from the host or
// read in place from the device, the node rule picked, one block per tree).
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/tree_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t verify_tree_batch(TreeRule rule, const TreeVerifyParams& p, void* workspace,
                              cudaStream_t stream) {
  if (rule != TreeRule::kRecursive && rule != TreeRule::kMultiRound) return cudaErrorInvalidValue;
  const auto b = static_cast<std::size_t>(p.batch);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* staged_offsets = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up((b + 1) * sizeof(std::int32_t));
  auto* staged_streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(b * sizeof(RandomStream));
  auto* ints = reinterpret_cast<std::int32_t*>(base);
  const std::int32_t* offsets = p.device_node_offsets;
  if (offsets == nullptr) {
    const cudaError_t status =
        cudaMemcpyAsync(staged_offsets, p.host_node_offsets, (b + 1) * sizeof(std::int32_t),
                        cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
    offsets = staged_offsets;
  }
  const RandomStream* streams = p.device_streams;
  if (streams == nullptr) {
    const cudaError_t status = cudaMemcpyAsync(
        staged_streams, p.host_streams, b * sizeof(RandomStream), cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
    streams = staged_streams;
  }
  const auto kernel = rule == TreeRule::kRecursive ? detail::verify_tree_kernel<true>
                                                   : detail::verify_tree_kernel<false>;
  return detail::launch(kernel, static_cast<unsigned int>(p.batch), detail::kDrawThreads, stream,
                        offsets, p.tokens, p.parents, p.target, p.target_stride, p.draft,
                        p.draft_stride, static_cast<int>(p.vocab), streams, ints,
                        p.accepted_nodes, p.accepted, p.final_tokens, p.bonus);
}

}  // namespace specdec::backend::cuda_impl
