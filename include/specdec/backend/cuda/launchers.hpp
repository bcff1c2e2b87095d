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

}  // namespace specdec::backend::cuda_impl
