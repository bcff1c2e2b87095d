// SPDX-License-Identifier: MIT
// Block-wide reductions whose order is fixed (the result never depends on scheduling).
// IWYU pragma: private
#pragma once

#include <cstdint>

namespace specdec::backend::cuda_impl::detail {

/// Every thread gets op over all threads' values. blockDim.x must be a multiple of 32 (<= 1024);
/// `scratch` is shared memory for 32 values. Safe to call back to back with the same scratch.
template <class T, class Op>
__device__ __forceinline__ T block_all_reduce(T value, Op op, T* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  __syncthreads();  // the previous reduction has finished reading scratch
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  T result = scratch[0];
  const int warps = static_cast<int>(blockDim.x) >> 5;
  for (int i = 1; i < warps; ++i) result = op(result, scratch[i]);
  return result;
}

/// A block's scan of one value per thread, in thread order: the warp's inclusive prefix (by
/// shuffles), the sum of the earlier warps' totals and the block's total (warps added in order).
template <class T>
struct BlockScan {
  T inclusive;  // this warp's values up to and including this thread's
  T before;     // the earlier warps' values
  T total;
  __device__ __forceinline__ T exclusive(T own) const { return before + (inclusive - own); }
};
/// block_scan's values for every thread; `scratch` is shared memory for one value per warp.
template <class T>
__device__ __forceinline__ BlockScan<T> block_scan(T value, T* scratch) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  BlockScan<T> out{value, T{}, T{}};
  for (int d = 1; d < 32; d *= 2) {
    const T other = __shfl_up_sync(0xffffffffu, out.inclusive, d);
    if (lane >= d) out.inclusive += other;
  }
  __syncthreads();  // scratch is free
  if (lane == 31) scratch[warp] = out.inclusive;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) >> 5;
  for (int w = 0; w < warps; ++w) {
    out.before += w < warp ? scratch[w] : T{};
    out.total += scratch[w];
  }
  return out;
}

/// A stable compaction by the whole block: emit(j, place) for each j < m with keep(j), `place`
/// its index among them in j order; returns their count (in every thread). Thread t takes a
/// chunk of ceil(m / blockDim.x) entries, not a block-strided loop's: what keep reads must have
/// been written before a barrier. `scratch` is shared memory for one value per warp.
template <class Keep, class Emit>
__device__ unsigned int block_compact(int m, const Keep& keep, const Emit& emit,
                                      unsigned int* scratch) {
  const int chunk = (m + static_cast<int>(blockDim.x) - 1) / static_cast<int>(blockDim.x);
  const int first = static_cast<int>(threadIdx.x) * chunk;
  const int last = first + chunk < m ? first + chunk : m;
  unsigned int own = 0u;
  for (int j = first; j < last; ++j) own += keep(j) ? 1u : 0u;
  const BlockScan<unsigned int> place = block_scan(own, scratch);
  unsigned int slot = place.exclusive(own);
  for (int j = first; j < last; ++j) {
    if (keep(j)) emit(j, slot++);
  }
  return place.total;
}

struct Plus {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// A value and its index; `better` is "larger value, ties to the lower index".
struct ArgMax {
  float value;
  std::int32_t index;
};
__device__ __forceinline__ bool better(const ArgMax& a, const ArgMax& b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}

__device__ __forceinline__ ArgMax block_argmax(ArgMax v, ArgMax* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    ArgMax other{__shfl_xor_sync(0xffffffffu, v.value, offset),
                 __shfl_xor_sync(0xffffffffu, v.index, offset)};
    if (better(other, v)) v = other;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  ArgMax result = scratch[0];
  const int warps = static_cast<int>(blockDim.x) >> 5;
  for (int i = 1; i < warps; ++i) {
    if (better(scratch[i], result)) result = scratch[i];
  }
  return result;
}

}  // namespace specdec::backend::cuda_impl::detail
