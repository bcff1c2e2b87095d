// SPDX-License-Identifier: MIT
// The min-p cut of rows on the statistics path without top-k (top_k_cut.cuh cuts it after a
// top-k), in the nucleus launch: its threshold is min_p times the largest probability after
// top-p (the row maximum's), and its kept mass the float sum, in id order, of the probabilities
// at or above it, as core/warp/logit_stats.hpp's cut_statistics adds them. The entries kept are
// taken from the nucleus's kept entries or, for min-p alone, from the list the row's
// blocks gathered at or above the threshold; ordered by id, they are added by one thread (a float
// sum in order is one chain of additions) and listed for the draws with their warped
// probabilities. A row whose entries are in no list (a nucleus found by the search over the row,
// or more entries than the list holds) is read by the whole block, which leaves thread 0 only the
// additions of the entries kept (kept_mass_of_row).
// IWYU pragma: private
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/nucleus_list.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::backend::cuda_impl::detail {

/// What the blocks of a row with min-p alone gather: the entries at or above `threshold`, read
/// behind `gate` (a logit: the CPU's bound, half the threshold, less a margin for rounding).
struct MinPGather {
  float threshold;
  float gate;
};

/// cut_min_p's `listed` for a row whose entries are in no list: they are walked over the row.
inline constexpr unsigned int kInNoList = 0xffffffffu;

/// The entries of a row each warp of kept_mass_of_row reads per chunk.
inline constexpr int kMinPWarpSpan = 1024;

/// The float sum in id order of the entries of the row whose probability after top-p
/// (`cuts`; softmax statistics `st`) is at least `threshold`: cut_statistics's kept mass, one
/// chain of additions. By the whole block, chunk by chunk: each warp reads kMinPWarpSpan
/// consecutive entries, 32 side by side, and packs those kept, in order, into its part of `buf`
/// (room for kMinPWarpSpan floats per warp), their count into warp_kept[warp]; thread 0 then adds
/// them in order. So the row is read once with coalesced loads, and the one thread only adds.
/// Returns the sum in thread 0.
template <class T>
__device__ float kept_mass_of_row(Global<const T> row, std::int64_t n, const RowStats& st,
                                  const specdec::detail::WarpStats& cuts, float threshold,
                                  float* buf, unsigned int* warp_kept) {
  namespace sd = specdec::detail;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  const std::int64_t chunk = static_cast<std::int64_t>(warps) * kMinPWarpSpan;
  float mass = 0.0f;
  for (std::int64_t base = 0; base < n; base += chunk) {
    const std::int64_t begin = base + static_cast<std::int64_t>(warp) * kMinPWarpSpan;
    float* packed = buf + warp * kMinPWarpSpan;
    unsigned int kept = 0;
    SPECDEC_UNROLL(4)
    for (int k = 0; k < kMinPWarpSpan && begin + k < n; k += 32) {  // the same in every lane
      const std::int64_t i = begin + k + lane;
      float v = 0.0f;
      bool keep = false;
      if (i < n) {
        v = sd::nucleus_probability(cuts, softmax_of(st, sd::to_float(row[i])), i);
        keep = !(v < threshold);
      }
      const unsigned int ballot = __ballot_sync(0xffffffffu, keep);
      if (keep) packed[kept + static_cast<unsigned int>(__popc(ballot & ((1u << lane) - 1u)))] = v;
      kept += static_cast<unsigned int>(__popc(ballot));
    }
    if (lane == 0) warp_kept[warp] = kept;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 0; w < warps; ++w) {
        for (unsigned int j = 0; j < warp_kept[w]; ++j)
          mass = sd::add_rn(mass, buf[w * kMinPWarpSpan + static_cast<int>(j)]);
      }
    }
    __syncthreads();  // buf and warp_kept are read before the next chunk writes them
  }
  return mass;
}

/// The threshold of min-p alone (min_p times the row maximum's probability) and its gate.
__device__ __forceinline__ MinPGather min_p_gather(float min_p, const RowStats& s) {
  const double bound = 0.5 * static_cast<double>(min_p) * static_cast<double>(s.inv_sum);
  const double gate =
      static_cast<double>(s.max) +
      (log(bound / static_cast<double>(s.inv_sum)) - 0.01) / static_cast<double>(s.inv_temperature);
  return {min_p_alone_threshold(min_p, s), static_cast<float>(gate)};
}

/// The min-p cut of a row whose top-p cut (if any) is in `s` (thread 0's), by the whole block: its
/// threshold and 1 / kept mass into `s`. The entries kept come from sh.keys when `ranked` (the
/// sh.kept entries of the nucleus, in any order), else from the `listed` entries of
/// `list` (min-p alone; more than the list holds, or kInNoList: the row is walked). With list.keep
/// and entries from a list, they are written to the list as kept_keys with their warped
/// probabilities and their count to *list.kept; else *list.kept is 0.
template <class T>
__device__ void cut_min_p(Global<const T> row, std::int64_t n, const DeviceWarp& w,
                          const RowList& list, unsigned int listed, bool ranked, RowStats& s,
                          NucleusShared& sh) {
  namespace sd = specdec::detail;
  __syncthreads();
  if (threadIdx.x == 0) {
    // The largest probability after top-p: the row maximum's (first in the nucleus).
    const float top = softmax_of(s, s.max);
    s.min_p_threshold =
        sd::min_p_threshold(w.min_p, s.top_p_last >= 0 ? top * s.inv_top_p_kept : top);
    sh.row = s;  // the cuts, for the block
    sh.found = 0;
  }
  __syncthreads();
  const sd::WarpStats cuts = sh.row;
  const float threshold = cuts.min_p_threshold;
  const auto above = [&](std::uint64_t rank_key) {
    return !(sd::nucleus_probability(cuts, key_value(rank_key), key_id(rank_key)) < threshold);
  };
  // The entries kept, as kept_keys in sh.keys[0, count) (-1: in no list).
  int count = -1;
  if (ranked) {
    // Those of the nucleus (in no order) at or above the threshold; the others, as zero keys,
    // sort after them.
    const int nucleus = static_cast<int>(sh.kept);
    for (int j = static_cast<int>(threadIdx.x); j < nucleus; j += static_cast<int>(blockDim.x)) {
      const bool kept_here = above(sh.keys[j]);
      sh.keys[j] = kept_here ? kept_key(sh.keys[j]) : 0u;
      if (kept_here) atomicAdd(&sh.found, 1);
    }
    sort_keys_descending(nucleus, sh.keys);  // ids ascending
    count = sh.found;
  } else if (listed <= static_cast<unsigned int>(kNucleusList)) {
    count = static_cast<int>(listed);
    for (int j = static_cast<int>(threadIdx.x); j < count; j += static_cast<int>(blockDim.x))
      sh.keys[j] = kept_key(list.keys[j]);
    sort_keys_descending(count, sh.keys);  // ids ascending
  }
  // A row in no list: read by the whole block into sh.keys's room (free: no entry is listed).
  static_assert(sizeof(sh.keys) >= sizeof(float) * kMinPWarpSpan * (kStatsThreads / 32));
  static_assert(sizeof(sh.u) >= sizeof(unsigned int) * (kStatsThreads / 32));
  float row_mass = 0.0f;
  if (count < 0) {
    row_mass =
        kept_mass_of_row(row, n, sh.row, cuts, threshold, reinterpret_cast<float*>(sh.keys), sh.u);
  }
  if (threadIdx.x == 0) {
    const auto entry = [&sh](int j, float& p, std::int64_t& id) {
      p = sd::bits_float(static_cast<std::uint32_t>(sh.keys[j]));
      id = static_cast<std::int64_t>(0xffffffffu - static_cast<std::uint32_t>(sh.keys[j] >> 32));
    };
    float mass = 0.0f;
    if (count >= 0) {
      for (int j = 0; j < count; ++j) {
        float p;
        std::int64_t id;
        entry(j, p, id);
        const float v = sd::nucleus_probability(cuts, p, id);
        if (!(v < threshold)) mass = sd::add_rn(mass, v);
      }
    } else {
      mass = row_mass;
    }
    s.inv_min_p_kept = 1.0f / mass;
    unsigned int written = 0;
    if (list.keep && count > 0) {
      const sd::WarpStats stats = s;
      for (int j = 0; j < count; ++j) {
        float p;
        std::int64_t id;
        entry(j, p, id);
        const float warped = sd::cut_probability(stats, p, id);
        if (warped > 0.0f) list.keys[written++] = kept_key(nucleus_key(warped, id));
      }
    }
    *list.kept = written;
  }
  __syncthreads();
}

}  // namespace specdec::backend::cuda_impl::detail
