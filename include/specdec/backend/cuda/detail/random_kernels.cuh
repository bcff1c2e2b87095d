// SPDX-License-Identifier: MIT
// Philox draws on the device: the same SPECDEC_HOST_DEVICE code (core/philox.hpp) as the CPU.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/core/philox.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Thread (x, y = stream) writes draw first + x of stream y.
__global__ void fill_random_kernel(Global<const RandomStream> streams, std::uint32_t first,
                                   std::int64_t count, Global<float> out, std::int64_t out_stride,
                                   RandomKind kind) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const RandomStream stream = streams[blockIdx.y];
  const std::uint32_t draw = first + static_cast<std::uint32_t>(i);
  out[static_cast<std::int64_t>(blockIdx.y) * out_stride + i] =
      kind == RandomKind::kGumbel ? stream.gumbel(draw) : stream.uniform(draw);
}

}  // namespace specdec::backend::cuda_impl::detail
