// SPDX-License-Identifier: MIT
// Combining a row split over blocks without co-residency: each block publishes its part, counts
// itself done in a per-row counter, and the last block to finish (the one that sees every other
// count) combines the parts. Needs no grid-wide barrier, so any number of blocks and any order
// of running them works, and a graph replays it.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"

namespace specdec::backend::cuda_impl::detail {

/// Whether this block is the last of the `blocks` sharing counters[r] to get here: every thread's
/// writes are fenced before the block counts itself, and the last block fences again before it
/// reads what the others wrote. Every thread gets the answer (`flag`: shared memory). The last
/// block resets counters[r] to 0 for the next launch.
__device__ inline bool last_block_of_row(Global<unsigned int> counters, std::int64_t r,
                                         std::int64_t blocks, int& flag) {
  __threadfence();  // this block's part is visible before its count
  __syncthreads();
  if (threadIdx.x == 0) {
    flag = counters.atomic_add(r, 1u) + 1 == static_cast<unsigned int>(blocks) ? 1 : 0;
    if (flag != 0) counters[r] = 0u;
  }
  __syncthreads();
  if (flag == 0) return false;
  __threadfence();  // the other blocks' parts are read after their counts
  return true;
}

}  // namespace specdec::backend::cuda_impl::detail
