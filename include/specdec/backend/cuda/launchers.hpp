// SPDX-License-Identifier: MIT
// Launcher declarations of the CUDA backend: non-template functions over concrete types, compiled
// by nvcc into specdec::cuda and callable from any host compiler. They do not validate (the entry
// points in backend/cuda/*.hpp do), enqueue on `stream`, and return the launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "specdec/core/philox.hpp"

namespace specdec::backend::cuda_impl {

/// Element type of a device logits matrix: fp16 and bf16 share the bits of Eigen::half / __half
/// and Eigen::bfloat16 / __nv_bfloat16.
enum class DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

/// The device copy of specdec::Warp (same layout; backend/cuda/warp_batch.hpp asserts it).
struct DeviceWarp {
  float temperature;
  std::int32_t top_k;
  float top_p;
  float min_p;
};

/// Threads per block of the warp kernel (one block per row).
inline constexpr int kWarpThreads = 512;
/// Alignment of every buffer carved from a device workspace.
inline constexpr std::size_t kDeviceAlignment = 256;

constexpr std::size_t device_round_up(std::size_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

/// Launches one block per row. One warp (warp_count == 1) is passed as a kernel argument;
/// `rows` warps are first copied into the workspace with cudaMemcpyAsync on `stream`.
cudaError_t warp_logits_batch(const void* logits, DType dtype, std::int64_t rows, std::int64_t cols,
                              std::int64_t logits_stride, float* warped, std::int64_t warped_stride,
                              const DeviceWarp* host_warps, std::int64_t warp_count,
                              void* workspace, cudaStream_t stream);

/// Copies `stream_count` host streams into the workspace, then fills
/// out[s * out_stride + i] = streams[s].uniform(first + i) (or .gumbel) for i < count.
cudaError_t fill_random(const RandomStream* host_streams, std::int64_t stream_count,
                        std::uint32_t first, std::int64_t count, float* out,
                        std::int64_t out_stride, bool gumbel, void* workspace, cudaStream_t stream);

/// Device bytes verify_chain_batch needs: the staged streams and per-sequence warps, and from
/// logits two warped rows per sequence.
constexpr std::size_t chain_workspace_size(std::int64_t batch, std::int64_t vocab,
                                           bool from_logits) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  const auto v = static_cast<std::size_t>(vocab < 0 ? 0 : vocab);
  return device_round_up(b * sizeof(RandomStream)) + device_round_up(b * sizeof(DeviceWarp)) +
         (from_logits ? device_round_up(b * 2 * v * sizeof(float)) : 0);
}

/// Copies the `batch` host streams (and `warp_count` host warps when > 1) into the workspace, then
/// launches one block per sequence. from_logits = false: `target` / `draft` are fp32 warped rows
/// (dtype kF32); true: logits of `dtype`, warped on the fly with host_warps[0] (warp_count 1) or
/// host_warps[b].
cudaError_t verify_chain_batch(const void* target, std::int64_t target_stride, const void* draft,
                               std::int64_t draft_stride, DType dtype, bool from_logits,
                               std::int64_t batch, std::int64_t gamma, std::int64_t vocab,
                               const std::int32_t* tokens, std::int64_t token_stride,
                               const RandomStream* host_streams, const DeviceWarp* host_warps,
                               std::int64_t warp_count, std::int32_t* emitted,
                               std::int64_t emitted_stride, std::int32_t* accepted, void* workspace,
                               cudaStream_t stream);

/// verify/common.hpp's kResidualFloor (a residual with less mass is empty), for the kernels.
inline constexpr double kDeviceResidualFloor = 1e-30;

/// Device bytes verify_tree_batch needs: the staged offsets and streams, per tree 2 * max_nodes
/// ints (candidate tokens and node ids) and one float row of residual scratch.
constexpr std::size_t tree_workspace_size(std::int64_t batch, std::int64_t max_nodes,
                                          std::int64_t vocab) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  const auto m = static_cast<std::size_t>(max_nodes < 0 ? 0 : max_nodes);
  const auto v = static_cast<std::size_t>(vocab < 0 ? 0 : vocab);
  return device_round_up((b + 1) * sizeof(std::int32_t)) +
         device_round_up(b * sizeof(RandomStream)) +
         device_round_up(b * 2 * m * sizeof(std::int32_t)) + device_round_up(b * v * sizeof(float));
}

/// Copies the B + 1 host offsets and B host streams into the workspace, then launches one block
/// per tree with the recursive (RRS) or the multi-round node rule over fp32 warped rows.
/// `max_nodes` is the largest tree; `bonus` may be null.
cudaError_t verify_tree_batch(bool recursive, const std::int32_t* host_offsets, std::int64_t batch,
                              std::int64_t max_nodes, const std::int32_t* tokens,
                              const std::int32_t* parents, const float* target,
                              std::int64_t target_stride, const float* draft,
                              std::int64_t draft_stride, std::int64_t vocab,
                              const RandomStream* host_streams, std::int32_t* accepted_nodes,
                              std::int32_t* accepted, std::int32_t* final_tokens,
                              std::uint8_t* bonus, void* workspace, cudaStream_t stream);

}  // namespace specdec::backend::cuda_impl
