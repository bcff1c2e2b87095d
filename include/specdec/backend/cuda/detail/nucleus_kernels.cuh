// SPDX-License-Identifier: MIT
// The top-p cut of rows whose softmax statistics are known (the middle launch of the chain step
// and of the warp), a row split over blocks as the statistics are. The nucleus is the shortest
// prefix of the row ranked by probability (descending, ties to the lowest id) whose mass reaches
// top_p, as core/top_p.hpp defines it. The blocks of a row gather the entries at or above the
// row's gate (an estimate from a strided sample, like the CPU's) into a per-row list, with a
// histogram of their masses (nucleus_list.cuh); the last block to finish selects the cut from
// the list by a radix selection weighted by the exact masses, without a sort. An estimated gate
// that proves too high is replaced by the CPU's prune bound (one more pass); a list that
// overflows is gathered again above the histogram's bucket holding the cut (one more pass), or
// where that bucket alone overflows, the cut is found by a radix search over the row (six
// passes). The same launch cuts rows by top-k (top_k_cut.cuh: from the blocks' lists
// the statistics launch left) and by min-p (min_p_cut.cuh).
// IWYU pragma: private
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/last_block.cuh"
#include "specdec/backend/cuda/detail/min_p_cut.cuh"
#include "specdec/backend/cuda/detail/nucleus_list.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/detail/top_k_cut.cuh"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/stats.hpp"

namespace specdec::backend::cuda_impl::detail {

/// The id of the need-th entry (in id order) whose probability has the bits `bits`, or n - 1 when
/// there are fewer, by the whole block: blockDim.x entries at a time, each warp's ties counted by
/// a ballot. The same value in every thread.
template <class T>
__device__ std::int64_t nth_tie(Global<const T> row, std::int64_t n, std::uint32_t bits,
                                std::int64_t need, const RowStats& s, NucleusShared& sh) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  if (threadIdx.x == 0) sh.tie_at = n - 1;
  std::int64_t seen = 0;
  for (std::int64_t base = 0; base < n && need >= 1; base += blockDim.x) {
    const std::int64_t i = base + threadIdx.x;
    const bool tie = i < n && specdec::detail::float_bits(
                                  softmax_of(s, specdec::detail::to_float(row[i]))) == bits;
    const unsigned int mask = __ballot_sync(0xffffffffu, tie);
    __syncthreads();  // sh.u is free
    if (lane == 0) sh.u[warp] = static_cast<unsigned int>(__popc(mask));
    __syncthreads();
    std::int64_t before = 0, total = 0;
    for (int k = 0; k < warps; ++k) {
      before += k < warp ? sh.u[k] : 0u;
      total += sh.u[k];
    }
    const std::int64_t rank =
        seen + before + __popc(mask & ((1u << lane) - 1u)) + 1;  // this entry's rank among ties
    if (tie && rank == need) sh.tie_at = i;
    if (seen + total >= need) break;
    seen += total;
  }
  __syncthreads();
  const std::int64_t at = sh.tie_at;
  __syncthreads();
  return at;
}

/// The cut by a radix search over the row (the fallback): four passes, each resolving 8 more bits
/// of the cut value by a histogram of the entries that share the bits found so far (their masses
/// exact in double, so the same in any order), then one pass for the ties at the value, entered
/// by id. Writes the cut into `out`; a row whose mass falls short of top_p keeps no cut.
template <class T>
__device__ void search_nucleus(Global<const T> row, std::int64_t n, double top_p, RowStats& out,
                               NucleusShared& sh) {
  std::uint32_t prefix = 0;  // the cut's bits found so far
  double above = 0.0;        // the mass of the entries ranked above the prefix's range
  // Probabilities of at least 2^-30 are whole multiples of 2^-53: their masses add exactly as
  // integers, by the hardware's 64-bit atomics. Smaller ones (tiny, ranked after all others) go
  // to double atomics, and only when the first pass's walk reaches their buckets (a second try).
  bool tiny = false;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = static_cast<int>(threadIdx.x); b < 256; b += static_cast<int>(blockDim.x)) {
      sh.bucket_mass[b] = 0.0;
      sh.bucket_units[b] = 0u;
    }
    __syncthreads();
    block_for_each<kInFlight<T>>(row, n, [&](float logit, std::int64_t) {
      const float p = softmax_of(out, logit);
      const std::uint32_t bits = specdec::detail::float_bits(p);
      if (p > 0.0f && (shift == 24 || (bits >> (shift + 8)) == (prefix >> (shift + 8)))) {
        const std::uint32_t b = (bits >> shift) & 0xffu;
        if (bits >= kExactMassBits) {
          atomicAdd(&sh.bucket_units[b],
                    static_cast<unsigned long long>(static_cast<double>(p) * 0x1p53));
        } else if (tiny) {
          atomicAdd(&sh.bucket_mass[b], static_cast<double>(p));
        }
      }
    });
    __syncthreads();
    if (threadIdx.x == 0) {
      int at = -1;
      double mass = above;
      for (int b = 255; b >= 0; --b) {
        const double bucket = static_cast<double>(sh.bucket_units[b]) * 0x1p-53 + sh.bucket_mass[b];
        if (specdec::detail::reaches_nucleus(mass + bucket, top_p)) {
          at = b;
          break;
        }
        mass += bucket;
      }
      // The first pass's buckets at or below kTinyBucket may hold tiny entries.
      sh.retry = shift == 24 && !tiny && at <= kTinyBucket ? 1 : 0;
      sh.found = at;
      sh.above = mass;
    }
    __syncthreads();
    if (sh.retry != 0) {
      tiny = true;
      shift += 8;  // the first pass again, with the tiny entries
      __syncthreads();
      continue;
    }
    if (sh.found < 0) return;  // rounding left the row short of top_p
    prefix |= static_cast<std::uint32_t>(sh.found) << shift;
    above = sh.above;
    __syncthreads();
  }
  const float v = specdec::detail::bits_float(prefix);
  unsigned int ties = 0;
  block_for_each<kInFlight<T>>(row, n, [&](float logit, std::int64_t) {
    ties += specdec::detail::float_bits(softmax_of(out, logit)) == prefix ? 1u : 0u;
  });
  ties = block_all_reduce(ties, Plus{}, sh.u);
  const std::int64_t need = specdec::detail::ties_in_nucleus(
      above, static_cast<double>(v), static_cast<std::int64_t>(ties), top_p);
  // The need-th tie in id order: the row read side by side, a block's ties ranked by ballots.
  const std::int64_t last = nth_tie(row, n, prefix, need, out, sh);
  if (threadIdx.x == 0) {
    out.top_p_value = v;
    out.top_p_last = static_cast<std::int32_t>(last);
    out.inv_top_p_kept =
        static_cast<float>(1.0 / (above + static_cast<double>(need) * static_cast<double>(v)));
  }
}

/// A row of at most kSmallNucleusRow entries, by thread 0 as the CPU's complete path: every
/// positive entry ranked, the cut where the mass summed by rank reaches top_p (the last entry
/// when rounding leaves it short), the kept mass summed in id order.
template <class T>
__device__ void small_nucleus(Global<const T> row, std::int64_t n, double top_p, RowStats& out) {
  std::uint64_t keys[kSmallNucleusRow];
  int m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float p = softmax_of(out, specdec::detail::to_float(row[i]));
    if (p > 0.0f) keys[m++] = nucleus_key(p, i);
  }
  double total = 0.0;
  for (int j = 0; j < m; ++j) total += static_cast<double>(key_value(keys[j]));
  if (!specdec::detail::reaches_nucleus(total, top_p)) return;  // the CPU keeps the row whole
  for (int j = 1; j < m; ++j) {                                 // insertion sort, descending
    const std::uint64_t key = keys[j];
    int k = j;
    for (; k > 0 && keys[k - 1] < key; --k) keys[k] = keys[k - 1];
    keys[k] = key;
  }
  int at = m - 1;
  double running = 0.0;
  for (int j = 0; j < m; ++j) {
    running += static_cast<double>(key_value(keys[j]));
    if (specdec::detail::reaches_nucleus(running, top_p)) {
      at = j;
      break;
    }
  }
  out.top_p_value = key_value(keys[at]);
  out.top_p_last = key_id(keys[at]);
  double kept = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float p = softmax_of(out, specdec::detail::to_float(row[i]));
    if (p > 0.0f && !specdec::detail::below_cut(p, i, out.top_p_value, out.top_p_last))
      kept += static_cast<double>(p);
  }
  out.inv_top_p_kept = static_cast<float>(1.0 / kept);
}

/// The cuts of every row of `rows` (row r is blockIdx.x, blockIdx.y takes split.tiles_per_block
/// tiles of it) into stats[r]: for a warp with top-p (no top-k), the candidates at or above
/// gates[r] (row_stats_kernel's last block wrote it and zeroed the row's histogram) go to the
/// row's list of kNucleusList keys, counted in counts[r], and to its histogram, and the last
/// block cuts them, then applies min-p (min_p_cut.cuh); for min-p alone, the entries at or above
/// its threshold are listed; for a top-k, block 0 of the row selects the k best of the blocks'
/// lists the statistics launch left (top_k_cut.cuh). counts[r]
/// and counters[r] must be 0 at launch. After, counters[r] is 0 and, with `keep` and a cut from a
/// list, the list holds the kept entries as kept_keys (in no order for top-p alone;
/// order_kept_keys orders them by id) and counts[r] their number; else counts[r] is 0.
template <class T>
__global__ void __launch_bounds__(kStatsThreads)
    nucleus_kernel(LogitRowSet<T> rows, std::int64_t n, RowSplit split, RowWarps warps,
                   Global<TileStats> tiles, Global<const float> gates, Global<unsigned int> counts,
                   Global<std::uint64_t> lists, CandidateHistograms histograms,
                   Global<unsigned int> counters, Global<RowStats> stats, bool keep) {
  expect_block_threads(kStatsThreads);
  __shared__ NucleusShared sh;
  const std::int64_t r = blockIdx.x;
  if (threadIdx.x == 0) {  // one read of the row's warp and statistics, not one per thread
    sh.warp = warps.of(r);
    if (statistics_warp(sh.warp, n)) sh.row = stats[r];
  }
  __syncthreads();
  const DeviceWarp w = sh.warp;
  const bool top_k = top_k_statistics_row(w, n);
  const bool top_p = top_p_row(w, n), min_p = min_p_row(w, n);
  if (!top_k && !top_p && !min_p) return;
  RowStats s = sh.row;
  if (s.invalid != 0) return;
  const Global<const T> row = rows.row(r);
  const Global<std::uint64_t> list = lists + r * kNucleusList;
  const Global<TileStats> row_tiles = tiles + r * split.tiles;
  const std::int64_t begin = blockIdx.y * split.tiles_per_block * kTile;
  const std::int64_t stop = (blockIdx.y + 1) * split.tiles_per_block * kTile;
  const std::int64_t end = stop < n ? stop : n;
  unsigned int kept = 0;  // listed for the draws: the kept entries
  const RowList row_list{.keys = list, .kept = &kept, .keep = keep};
  const CandidateRow<T> candidates{
      .row = row, .stats = s, .tiles = row_tiles, .list = list, .count = counts, .r = r};
  if (top_k) {
    // The statistics launch left the blocks' lists: one block of the row finishes the cut.
    if (blockIdx.y != 0) return;
    finish_top_k(row, n, w, top_k_parts(split, w.top_k), row_list, s, sh,
                 keep ? Global<TileStats>(nullptr) : row_tiles, split.tiles);
  } else if (!top_p) {
    // Min-p alone: the candidates are the entries at or above its threshold. Without `keep` (the
    // warp) the write pass cuts the row, in its own read.
    if (!keep) return;
    const MinPGather g = min_p_gather(w.min_p, s);
    gather_candidates(candidates, begin, end, g.gate, specdec::detail::float_bits(g.threshold),
                      CandidateBuckets::above(g.threshold), nullptr, sh);
    if (!last_block_of_row(counters, r, split.blocks_per_row, sh.last)) return;
    cut_min_p(row, n, w, row_list, counts[r], false, s, sh);
  } else {
    float gate = n > kSmallNucleusRow ? gates[r] : 0.0f;
    CandidateBuckets buckets = CandidateBuckets::above(softmax_of(s, gate));
    // This block's candidates and their histogram.
    if (n > kSmallNucleusRow) {
      gather_candidates(candidates, begin, end, gate, 0u, buckets, &histograms, sh);
    }
    // The last block of the row to finish finds the cut.
    if (!last_block_of_row(counters, r, split.blocks_per_row, sh.last)) return;
    const double mass = static_cast<double>(w.top_p);
    bool ranked = false;  // whether sh.keys[0, sh.kept) holds the nucleus (in any order)
    if (n <= kSmallNucleusRow) {
      if (threadIdx.x == 0) small_nucleus(row, n, mass, s);
    } else {
      // The whole row gathered again by this block alone (its histogram left in sh.hist_*).
      const auto gather_again = [&](std::uint32_t floor_bits) {
        __syncthreads();
        if (threadIdx.x == 0) counts[r] = 0u;
        __syncthreads();
        return gather_candidates(candidates, 0, n, gate, floor_bits, buckets, nullptr, sh);
      };
      // The candidates at or above the gate; where they overflow the list, again at or above the
      // edge of the histogram's bucket holding the cut (the cut then stands if it lies above it).
      const auto cut_at = [&](unsigned int listed, bool histogram_in_shared) {
        const bool overflow = listed > static_cast<unsigned int>(kNucleusList);
        if (!histogram_in_shared) {  // the row's histogram (its counts only for an overflow)
          for (int b = static_cast<int>(threadIdx.x); b < kNucleusBuckets;
               b += static_cast<int>(blockDim.x)) {
            sh.hist_units[b] = histograms.units[r * kNucleusBuckets + b];
            if (overflow) sh.hist_counts[b] = histograms.counts[r * kNucleusBuckets + b];
          }
          __syncthreads();
        }
        if (cut_from_list(row_list, listed, softmax_of(s, gate), mass, buckets, s, sh))
          return true;
        if (!overflow) return false;
        const std::uint32_t edge = cut_bucket_edge(buckets, mass, sh);
        if (edge == 0u) return false;
        return cut_from_list(row_list, gather_again(edge), specdec::detail::bits_float(edge),
                             mass, buckets, s, sh);
      };
      const unsigned int listed = counts[r];
      ranked = cut_at(listed, false);
      const float prune = prune_gate(n, w.top_p, s);
      if (!ranked && gate > prune && listed <= static_cast<unsigned int>(kNucleusList)) {
        // The estimated gate was too high (the cut lies below it): the CPU's prune bound instead.
        gate = prune;
        buckets = CandidateBuckets::above(softmax_of(s, gate));
        ranked = cut_at(gather_again(0u), true);
      }
      if (!ranked) search_nucleus(row, n, mass, s, sh);
    }
    if (min_p) cut_min_p(row, n, w, row_list, kInNoList, ranked, s, sh);
  }
  if (threadIdx.x == 0) {
    counts[r] = kept;  // the next call's statistics launch zeroes it
    stats[r] = s;
  }
}

}  // namespace specdec::backend::cuda_impl::detail
