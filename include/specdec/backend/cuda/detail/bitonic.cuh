// SPDX-License-Identifier: MIT
// The steps of a bitonic sort by a whole block, for sorts of keys or of pairs in shared memory.
// IWYU pragma: private
#pragma once

namespace specdec::backend::cuda_impl::detail {

/// A bitonic sort of `size` entries (a power of two; shared memory) by the whole block, a thread
/// per compared pair: exchange(i, i + j, leading) puts the pair in the sort's order where
/// `leading` is set, in the reverse order otherwise. The pairs
/// of a step with j < 32 that a warp takes (32 consecutive) cover 64 aligned entries, the same
/// ones at every such step: those steps need only the warp's barrier. Starts after the caller's
/// barrier; ends with one.
template <class Exchange>
__device__ void bitonic_steps(int size, const Exchange& exchange) {
  for (int k = 2; k <= size; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) {
      for (int q = static_cast<int>(threadIdx.x); q < size / 2; q += static_cast<int>(blockDim.x)) {
        const int i = 2 * q - (q & (j - 1));  // q with a zero bit inserted at j
        exchange(i, i + j, (i & k) == 0);
      }
      if (j >= 32 || j == 1) {
        __syncthreads();
      } else {
        __syncwarp();
      }
    }
  }
}

}  // namespace specdec::backend::cuda_impl::detail
