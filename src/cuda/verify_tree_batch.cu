// SPDX-License-Identifier: MIT
// Launcher of the batched tree verification kernel (stage offsets and streams, pick the node
// rule, one block per tree).
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/tree_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

cudaError_t verify_tree_batch(bool recursive, const std::int32_t* host_offsets, std::int64_t batch,
                              std::int64_t max_nodes, const std::int32_t* tokens,
                              const std::int32_t* parents, const float* target,
                              std::int64_t target_stride, const float* draft,
                              std::int64_t draft_stride, std::int64_t vocab,
                              const RandomStream* host_streams, std::int32_t* accepted_nodes,
                              std::int32_t* accepted, std::int32_t* final_tokens,
                              std::uint8_t* bonus, void* workspace, cudaStream_t stream) {
  const auto b = static_cast<std::size_t>(batch);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* offsets = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up((b + 1) * sizeof(std::int32_t));
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(b * sizeof(RandomStream));
  auto* ints = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up(b * 2 * static_cast<std::size_t>(max_nodes) * sizeof(std::int32_t));
  auto* scratch = reinterpret_cast<float*>(base);
  cudaError_t status = cudaMemcpyAsync(offsets, host_offsets, (b + 1) * sizeof(std::int32_t),
                                       cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  status = cudaMemcpyAsync(streams, host_streams, b * sizeof(RandomStream), cudaMemcpyHostToDevice,
                           stream);
  if (status != cudaSuccess) return status;
  const auto launch = [&]<bool kRecursive>() {
    detail::verify_tree_kernel<kRecursive>
        <<<static_cast<unsigned int>(batch), kWarpThreads, 0, stream>>>(
            offsets, tokens, parents, target, target_stride, draft, draft_stride,
            static_cast<int>(vocab), streams, static_cast<int>(max_nodes), ints, scratch,
            accepted_nodes, accepted, final_tokens, bonus);
  };
  if (recursive) {
    launch.template operator()<true>();
  } else {
    launch.template operator()<false>();
  }
  return cudaGetLastError();
}

}  // namespace specdec::backend::cuda_impl
