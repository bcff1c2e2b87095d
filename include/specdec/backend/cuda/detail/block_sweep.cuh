// SPDX-License-Identifier: MIT
// A block's sweep over a row: every entry read once by the whole block, 16-byte loads, several of
// a thread's in flight before any is used (a loop of one load per step leaves a single load in
// flight per thread, and a block then reads a few GB/s).
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/core/scalar.hpp"

namespace specdec::backend::cuda_impl::detail {

/// f(x, i) for every entry i of a row of n (x its value as a float), by the whole block: 16-byte
/// loads, kAhead of a thread's issued before any is used, where the row is aligned for them. A
/// block sweeping a row alone is bound by what it has in flight (kInFlight: a thread's 32
/// entries); more unrolled calls of f cost registers where many blocks sweep.
template <class T>
inline constexpr int kInFlight = 32 / (16 / static_cast<int>(sizeof(T)));
template <int kAhead = 4, class T, class F>
__device__ __forceinline__ void block_for_each(Global<const T> row, std::int64_t n, const F& f) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  std::int64_t tail = 0;
  if (row.vector_aligned(0)) {
    const std::int64_t vectors = n / kVec;
    for (std::int64_t first = threadIdx.x; first < vectors; first += kAhead * blockDim.x) {
      Vec<T, kVec> x[kAhead] = {};  // in registers: the loops are unrolled
      SPECDEC_UNROLL(8)
      for (int j = 0; j < kAhead; ++j) {
        const std::int64_t v = first + j * static_cast<std::int64_t>(blockDim.x);
        if (v < vectors) x[j] = row.template load_vec<kVec>(v * kVec);
      }
      SPECDEC_UNROLL(8)
      for (int j = 0; j < kAhead; ++j) {
        const std::int64_t v = first + j * static_cast<std::int64_t>(blockDim.x);
        if (v < vectors) {
          for (int k = 0; k < kVec; ++k) f(specdec::detail::to_float(x[j].v[k]), v * kVec + k);
        }
      }
    }
    tail = vectors * kVec;
  }
  for (std::int64_t i = tail + threadIdx.x; i < n; i += blockDim.x)
    f(specdec::detail::to_float(row[i]), i);
}

}  // namespace specdec::backend::cuda_impl::detail
