// SPDX-License-Identifier: MIT
// Launcher of the batched tree verification kernel (stage offsets and streams, pick the node
// rule, one block per tree).
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/tree_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t verify_tree_batch(TreeRule rule, const TreeVerifyParams& p, void* workspace,
                              cudaStream_t stream) {
  const auto b = static_cast<std::size_t>(p.batch);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* offsets = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up((b + 1) * sizeof(std::int32_t));
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(b * sizeof(RandomStream));
  auto* ints = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up(b * 2 * static_cast<std::size_t>(p.max_nodes) * sizeof(std::int32_t));
  auto* scratch = reinterpret_cast<float*>(base);
  cudaError_t status = cudaMemcpyAsync(offsets, p.host_node_offsets, (b + 1) * sizeof(std::int32_t),
                                       cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  status = cudaMemcpyAsync(streams, p.host_streams, b * sizeof(RandomStream),
                           cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  const auto launch_tree = [&]<bool kRecursive>() {
    return detail::launch(detail::verify_tree_kernel<kRecursive>,
                          static_cast<unsigned int>(p.batch), kWarpThreads, stream,
                          static_cast<const std::int32_t*>(offsets), p.tokens, p.parents, p.target,
                          p.target_stride, p.draft, p.draft_stride, static_cast<int>(p.vocab),
                          static_cast<const RandomStream*>(streams), static_cast<int>(p.max_nodes),
                          ints, scratch, p.accepted_nodes, p.accepted, p.final_tokens, p.bonus);
  };
  switch (rule) {
    case TreeRule::kRecursive:
      return launch_tree.template operator()<true>();
    case TreeRule::kMultiRound:
      return launch_tree.template operator()<false>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace specdec::backend::cuda_impl
