// SPDX-License-Identifier: MIT
// The batched warp kernel: one block per row, the semantics of core/warp.hpp without sorting.
//
// Top-k and top-p are threshold searches. Each value maps to an unsigned key in the same order
// (-0 and +0 share one key, as they compare equal); the threshold key t is built bit by bit from
// the top, keeping a bit when the entries at or above it still hold k entries (top-k) or mass P
// (top-p). Entries equal to t are then kept in increasing id order until the count (or mass) is
// reached, by the same bitwise search over ids: exactly the CPU's "ties to the lowest id". The
// ranking of a cut, the nucleus boundary and the count of tied entries the nucleus takes are the
// row functions the CPU's selections use (core/warp/cut_rules.hpp).
// IWYU pragma: private
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/block_sweep.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/core/order_key.hpp"
#include "specdec/core/warp/cut_rules.hpp"

namespace specdec::backend::cuda_impl::detail {

__device__ __forceinline__ float load(Global<const float> p, std::int64_t i) { return p.load(i); }
__device__ __forceinline__ float load(Global<const __half> p, std::int64_t i) {
  return __half2float(p.load(i));
}
__device__ __forceinline__ float load(Global<const __nv_bfloat16> p, std::int64_t i) {
  return __bfloat162float(p.load(i));
}

using specdec::detail::order_key;  // core/order_key.hpp: -0 and +0 share one key
using specdec::detail::below_cut;  // core/warp/cut_rules.hpp: the warp's row functions
using specdec::detail::min_p_cut;
using specdec::detail::min_p_threshold;
using specdec::detail::probability_key;
using specdec::detail::reaches_nucleus;
using specdec::detail::ties_in_nucleus;

struct Shared {
  float f[32];
  double d[32];
  unsigned int u[32];
  ArgMax a[32];
  unsigned int histogram[256];  // keep_top_k's digits
  int index;
};

/// Mass of the positive entries of a probability row whose bits are >= t.
__device__ __forceinline__ double mass_at_least(Global<const float> row, int n, std::uint32_t t,
                                                Shared& sh) {
  double m = 0.0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float p = row[i];
    if (probability_key(p) >= t) m += p;  // t >= 1: positive entries only
  }
  return block_all_reduce(m, Plus{}, sh.d);
}

/// The id of the `rank`-th (1-based) entry with key t, in increasing id order (n when there are
/// fewer), by one sweep of the row: blockDim.x entries at a time, each warp's ties counted by a
/// ballot, stopping at the block of entries that holds it.
template <class Key>
__device__ __forceinline__ int nth_tie(Global<const float> row, int n, std::uint32_t t,
                                       unsigned int rank, Key key, Shared& sh) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  if (threadIdx.x == 0) sh.index = n;
  unsigned int seen = 0;
  for (int base = 0; base < n; base += static_cast<int>(blockDim.x)) {
    const int i = base + static_cast<int>(threadIdx.x);
    const bool tie = i < n && key(row[i]) == t;
    const unsigned int mask = __ballot_sync(0xffffffffu, tie);
    __syncthreads();  // sh.u is free
    if (lane == 0) sh.u[warp] = static_cast<unsigned int>(__popc(mask));
    __syncthreads();
    unsigned int before = 0, total = 0;
    for (int w = 0; w < warps; ++w) {
      before += w < warp ? sh.u[w] : 0u;
      total += sh.u[w];
    }
    if (tie && seen + before + static_cast<unsigned int>(__popc(mask & ((1u << lane) - 1u))) + 1u ==
                   rank) {
      sh.index = i;
    }
    if (seen + total >= rank) break;
    seen += total;
  }
  __syncthreads();
  const int at = sh.index;
  __syncthreads();
  return at;
}

/// The float whose order key is t (+0 for the zeros' key).
__device__ __forceinline__ float key_value(std::uint32_t t) {
  return __uint_as_float((t & 0x80000000u) ? (t & 0x7FFFFFFFu) : ~t);
}

struct OrderKey {
  __device__ __forceinline__ std::uint32_t operator()(float x) const { return order_key(x); }
};
struct ProbabilityKey {
  __device__ __forceinline__ std::uint32_t operator()(float p) const { return probability_key(p); }
};

/// out holds scaled logits z; keeps the k largest (ties to the lowest id), the rest become -inf.
/// The k-th largest key is found 8 bits at a time, by a histogram of the keys that share the bits
/// found so far (counts: the same in any order), then its ties enter by id.
__device__ inline void keep_top_k(Global<float> z, int n, unsigned int k, Shared& sh) {
  std::uint32_t t = 0;       // the cut's key, its bits found so far
  unsigned int above = 0;    // entries whose key is above the found bits' range
  unsigned int ties = 0;     // entries whose key is t (after the last digit)
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += static_cast<int>(blockDim.x))
      sh.histogram[b] = 0u;
    __syncthreads();
    const std::uint32_t high = shift == 24 ? 0u : ~((1u << (shift + 8)) - 1u);
    block_for_each(Global<const float>(z), n, [&](float x, std::int64_t) {
      const std::uint32_t key = order_key(x);
      if ((key & high) == (t & high)) atomicAdd(&sh.histogram[(key >> shift) & 0xffu], 1u);
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      // The largest digit d whose entries, with those above, number at least k.
      unsigned int count = above;
      int d = 255;
      for (; d > 0 && count + sh.histogram[d] < k; --d) count += sh.histogram[d];
      sh.u[0] = static_cast<unsigned int>(d);
      sh.u[1] = count;
      sh.u[2] = sh.histogram[d];
    }
    __syncthreads();
    t |= sh.u[0] << shift;
    above = sh.u[1];
    ties = sh.u[2];
    __syncthreads();
  }
  const unsigned int needed = k - above;
  const int last = needed < ties ? nth_tie(z, n, t, needed, OrderKey{}, sh) : n;
  const float cut = key_value(t);  // the entries with key t, all equal
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (below_cut(z[i], i, cut, last)) z[i] = -__int_as_float(0x7f800000);
  }
  __syncthreads();
}

/// z (scaled logits, some -inf) -> softmax probabilities in place.
__device__ inline void softmax_in_place(Global<float> z, int n, Shared& sh) {
  float m = -__int_as_float(0x7f800000);
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, z[i]);
  m = block_all_reduce(m, Max{}, sh.f);
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float x = z[i];
    const float e = x == -__int_as_float(0x7f800000) ? 0.0f : expf(x - m);
    z[i] = e;
    s += e;
  }
  s = block_all_reduce(s, Plus{}, sh.f);
  const float inv = 1.0f / s;
  for (int i = threadIdx.x; i < n; i += blockDim.x) z[i] *= inv;
  __syncthreads();
}

__device__ inline void renormalise(Global<float> p, int n, Shared& sh) {
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += p[i];
  s = block_all_reduce(s, Plus{}, sh.f);
  const float inv = 1.0f / s;
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] *= inv;
  __syncthreads();
}

/// Keeps the smallest set, by decreasing probability with ties to the lowest id, whose mass
/// (summed in double) reaches top_p; renormalises. A row whose whole mass is below top_p stays.
__device__ inline void keep_top_p(Global<float> p, int n, float top_p, Shared& sh) {
  const double target = static_cast<double>(top_p);
  if (!reaches_nucleus(mass_at_least(p, n, 1u, sh), target)) return;
  std::uint32_t t = 0;
  for (int bit = 30; bit >= 0; --bit) {
    const std::uint32_t candidate = t | (1u << bit);
    if (reaches_nucleus(mass_at_least(p, n, candidate, sh), target)) t = candidate;
  }
  const double above = mass_at_least(p, n, t + 1u, sh);
  unsigned int ties = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ties += ProbabilityKey{}(p[i]) == t ? 1u : 0u;
  ties = block_all_reduce(ties, Plus{}, sh.u);
  // The tied entries enter by id, as many as the nucleus takes.
  const float v = __uint_as_float(t);
  const auto needed = static_cast<unsigned int>(
      ties_in_nucleus(above, static_cast<double>(v), static_cast<std::int64_t>(ties), target));
  const int last = needed < ties ? nth_tie(p, n, t, needed, ProbabilityKey{}, sh) : n;
  unsigned int removed = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (p[i] > 0.0f && below_cut(p[i], i, v, last)) {
      p[i] = 0.0f;
      ++removed;
    }
  }
  // Like the CPU, a nucleus holding every positive entry leaves the row untouched.
  if (block_all_reduce(removed, Plus{}, sh.u) > 0u) renormalise(p, n, sh);
}

__device__ inline void keep_min_p(Global<float> p, int n, float min_p, Shared& sh) {
  float m = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, p[i]);
  const float threshold = min_p_threshold(min_p, block_all_reduce(m, Max{}, sh.f));
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = min_p_cut(p[i], threshold);
  __syncthreads();
  renormalise(p, n, sh);
}

/// One row of the batched warp, computed by the whole block: out = the warped row of the n
/// logits at x under w. Ends before the block has finished writing `out`: synchronise before
/// reading it from another thread.
template <class T>
__device__ __forceinline__ void warp_row(Global<const T> x, Global<float> out, int n,
                                         const DeviceWarp& w, Shared& sh) {
  if (w.temperature == 0.0f) {  // greedy: one-hot on the argmax, ties to the lowest id
    ArgMax best{-__int_as_float(0x7f800000), 0x7fffffff};
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const ArgMax c{load(x, i), i};
      if (better(c, best)) best = c;
    }
    best = block_argmax(best, sh.a);
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = i == best.index ? 1.0f : 0.0f;
    return;
  }
  const float inv_t = 1.0f / w.temperature;
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = load(x, i) * inv_t;
  __syncthreads();
  if (w.top_k > 0 && w.top_k < n) keep_top_k(out, n, static_cast<unsigned int>(w.top_k), sh);
  softmax_in_place(out, n, sh);
  if (w.top_p < 1.0f) keep_top_p(out, n, w.top_p, sh);
  if (w.min_p > 0.0f) keep_min_p(out, n, w.min_p, sh);
}

/// One block per row: warped[row] = S(softmax(logits[row])), S = row_warps[row], or
/// `shared_warp` for every row when row_warps is null.
template <class T>
__global__ void __launch_bounds__(kWarpThreads)
    warp_logits_batch_kernel(Global<const T> logits, std::int64_t logits_stride,
                             Global<float> warped, std::int64_t warped_stride, int n,
                             DeviceWarp shared_warp, Global<const DeviceWarp> row_warps) {
  expect_block_threads(kWarpThreads);
  __shared__ Shared sh;
  const std::int64_t row = blockIdx.x;
  const DeviceWarp w = row_warps == nullptr ? shared_warp : row_warps[row];
  warp_row(logits + row * logits_stride, warped + row * warped_stride, n, w, sh);
}

}  // namespace specdec::backend::cuda_impl::detail
