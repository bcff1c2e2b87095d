// SPDX-License-Identifier: MIT
// The top-p cut of rows whose softmax statistics are known (the middle launch of the chain step
// and of the warp), a row split over blocks as the statistics are. The nucleus is the shortest
// prefix of the row ranked by probability (descending, ties to the lowest id) whose mass reaches
// top_p, as core/top_p.hpp defines it. The blocks of a row gather the entries at or above the
// row's gate (an estimate from a strided sample, like the CPU's) into a per-row list; the last
// block to finish orders the list and walks it. Masses are sums of probabilities of at least
// 2^-30 in double, so exact and the same in any order: the cut, its last id and 1 / kept mass are
// the CPU's bits. An estimated gate that proves too high is replaced by the CPU's prune bound (one
// more pass); a list that overflows falls back to a radix search over the row (six passes).
// IWYU pragma: private
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/last_block.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/core/warp_rows.hpp"
#include "specdec/core/warped_probability.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Candidates a row's list holds (ordered in shared memory by the last block).
inline constexpr int kNucleusList = static_cast<int>(kNucleusListSize);

/// A candidate's key: the probability's bits above the complement of its id, so that descending
/// keys are the ranking (probabilities >= 0 order as their bits).
__device__ __forceinline__ std::uint64_t nucleus_key(float p, std::int64_t id) {
  return (static_cast<std::uint64_t>(specdec::detail::float_bits(p)) << 32) |
         (0xffffffffu - static_cast<std::uint32_t>(id));
}
__device__ __forceinline__ float key_value(std::uint64_t key) {
  return specdec::detail::bits_float(static_cast<std::uint32_t>(key >> 32));
}
__device__ __forceinline__ std::int32_t key_id(std::uint64_t key) {
  return static_cast<std::int32_t>(0xffffffffu - static_cast<std::uint32_t>(key));
}

/// Where a row's candidates fall in its histogram: buckets of equal width in the bits of their
/// probabilities, from `base` (the bits of the gate's probability) up to 1, so that a bucket's
/// lower edge is a gate in its own right.
struct CandidateBuckets {
  std::uint32_t base;
  int shift;
  __device__ static CandidateBuckets above(float gate) {
    const std::uint32_t base = specdec::detail::float_bits(gate);
    int shift = 0;
    while ((0x3f800000u - base) >> shift >= static_cast<std::uint32_t>(kNucleusBuckets)) ++shift;
    return {base, shift};
  }
  __device__ __forceinline__ int of(std::uint32_t bits) const {
    const std::uint32_t b = (bits - base) >> shift;
    return b < static_cast<std::uint32_t>(kNucleusBuckets) ? static_cast<int>(b)
                                                          : static_cast<int>(kNucleusBuckets) - 1;
  }
  __device__ __forceinline__ std::uint32_t edge(int b) const {
    return base + (static_cast<std::uint32_t>(b) << shift);
  }
};

struct NucleusShared {
  std::uint64_t keys[kNucleusList];  // a block's candidates as gathered, then the row's ordered
  unsigned long long hist_units[kNucleusBuckets];
  unsigned int hist_counts[kNucleusBuckets];
  unsigned int gathered;
  unsigned int slot;
  double bucket_mass[256];
  unsigned long long bucket_units[256];  // masses in units of 2^-53
  int retry;
  double above;
  DeviceWarp warp;
  RowStats row;
  unsigned int kept;
  unsigned int u[32];
  std::int64_t tie_at;
  int last;
  int found;
};

/// Sorts keys[0, count) (shared memory, room for the next power of two) descending by the whole block (bitonic, padded with zero keys), a
/// thread per compared pair. The pairs of a step with j < 32 that a warp takes (32 consecutive)
/// cover 64 aligned entries, the same ones at every such step: those steps need only the warp's
/// barrier.
__device__ inline void sort_keys_descending(int count, std::uint64_t* keys) {
  int size = 1;
  while (size < count) size *= 2;
  for (int i = count + static_cast<int>(threadIdx.x); i < size; i += static_cast<int>(blockDim.x))
    keys[i] = 0;
  __syncthreads();
  for (int k = 2; k <= size; k *= 2) {
    for (int j = k / 2; j > 0; j /= 2) {
      for (int q = static_cast<int>(threadIdx.x); q < size / 2; q += static_cast<int>(blockDim.x)) {
        const int i = 2 * q - (q & (j - 1));  // q with a zero bit inserted at j
        const bool descending = (i & k) == 0;
        const std::uint64_t a = keys[i], b = keys[i + j];
        if (descending ? a < b : a > b) {
          keys[i] = b;
          keys[i + j] = a;
        }
      }
      if (j >= 32 || j == 1) {
        __syncthreads();
      } else {
        __syncwarp();
      }
    }
  }
}

/// A kept entry of the nucleus list as the chain's draws read it: its id's complement above its
/// probability's bits, so that descending keys order the ids ascending.
__device__ __forceinline__ std::uint64_t kept_key(std::uint64_t rank_key) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rank_key)) << 32) |
         static_cast<std::uint32_t>(rank_key >> 32);
}

/// The bits of 2^-30, the least probability whose mass is a whole number of 2^-53 (a float's
/// 24 bits end at or above 2^-53), and the last first-pass bucket (the top 8 bits) that can hold
/// a smaller one.
inline constexpr std::uint32_t kExactMassBits = 97u << 23;
inline constexpr int kTinyBucket = static_cast<int>(kExactMassBits >> 24);

/// The `count` kept_keys of a row's list ordered by id, ascending (descending keys), in place,
/// by the whole block through `keys` (shared memory for kNucleusList keys): what a draw from the
/// listed nucleus reads.
__device__ inline void order_kept_keys(Global<std::uint64_t> list, int count, std::uint64_t* keys) {
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.x); j < count; j += static_cast<int>(blockDim.x))
    keys[j] = list[j];
  sort_keys_descending(count, keys);
  for (int j = static_cast<int>(threadIdx.x); j < count; j += static_cast<int>(blockDim.x))
    list[j] = keys[j];
  __syncthreads();
}

/// After a walk (sh.found, sh.kept): with `keep` and a cut, the kept entries (sh.keys[0, kept),
/// ranked) written to `list` as kept_keys, their count to *kept. They are ordered by id
/// (order_kept_keys) only where a draw reads them. Returns whether the walk found the cut.
__device__ inline bool keep_nucleus(Global<std::uint64_t> list, NucleusShared& sh,
                                    unsigned int* kept, bool keep) {
  __syncthreads();
  const bool found = sh.found != 0;
  if (found && keep) {
    const int m = static_cast<int>(sh.kept);
    for (int j = static_cast<int>(threadIdx.x); j < m; j += static_cast<int>(blockDim.x)) {
      list[j] = kept_key(sh.keys[j]);
    }
    *kept = sh.kept;
  }
  __syncthreads();
  return found;
}

/// The walk of cut_from_list over sh.keys[0, count) (ranked) where every probability is at least
/// 2^-30: each is a whole number of 2^-53, so the CPU's running sum in double is exact (its last
/// addition, past top_p, rounds the exact sum once, as the conversion of the units does), and the
/// walk is a prefix sum in integer units, by the whole block: a run of consecutive entries per
/// thread, the runs' sums scanned, each thread's first crossing, the least one taken.
__device__ inline bool walk_exact(unsigned int count, float floor, double top_p, RowStats& out,
                                  NucleusShared& sh, unsigned int* kept, Global<std::uint64_t> list,
                                  bool keep) {
  const int threads = static_cast<int>(blockDim.x);
  const int per = (static_cast<int>(count) + threads - 1) / threads;
  const int first = static_cast<int>(threadIdx.x) * per;
  const int end = first + per < static_cast<int>(count) ? first + per : static_cast<int>(count);
  const auto units = [&sh](int j) {
    return static_cast<unsigned long long>(static_cast<double>(key_value(sh.keys[j])) * 0x1p53);
  };
  unsigned long long own = 0u;
  for (int j = first; j < end; ++j) own += units(j);
  // The exclusive prefix of this thread's run: warps scan by shuffles, warp totals in shared.
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  unsigned long long inclusive = own;
  for (int d = 1; d < 32; d *= 2) {
    const unsigned long long other = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += other;
  }
  if (threadIdx.x == 0) sh.found = static_cast<int>(count);  // the least crossing so far
  if (lane == 31) sh.hist_units[warp] = inclusive;  // free until the next gather
  __syncthreads();
  unsigned long long running = inclusive - own;
  for (int w = 0; w < warp; ++w) running += sh.hist_units[w];
  for (int j = first; j < end; ++j) {
    running += units(j);
    if (specdec::detail::reaches_nucleus(static_cast<double>(running) * 0x1p-53, top_p)) {
      atomicMin(&sh.found, j);
      break;
    }
  }
  __syncthreads();
  const int at = sh.found;
  __syncthreads();
  if (at < static_cast<int>(count) && at >= first && at < end) {  // the owner of the crossing
    unsigned long long mass = inclusive - own;
    for (int w = 0; w < warp; ++w) mass += sh.hist_units[w];
    for (int j = first; j <= at; ++j) mass += units(j);
    const float value = key_value(sh.keys[at]);
    const bool stands = value > floor;
    if (stands) {  // told to every thread through sh.row
      sh.row.top_p_value = value;
      sh.row.top_p_last = key_id(sh.keys[at]);
      sh.row.inv_top_p_kept = static_cast<float>(1.0 / (static_cast<double>(mass) * 0x1p-53));
      sh.kept = static_cast<unsigned int>(at) + 1;
    }
    sh.found = stands ? 1 : 0;
  } else if (at >= static_cast<int>(count) && threadIdx.x == 0) {
    sh.found = 0;  // the candidates' mass falls short of top_p
  }
  __syncthreads();
  if (sh.found != 0) {
    out.top_p_value = sh.row.top_p_value;
    out.top_p_last = sh.row.top_p_last;
    out.inv_top_p_kept = sh.row.inv_top_p_kept;
  }
  return keep_nucleus(list, sh, kept, keep);
}

/// The cut from the `count` candidates of `list` (every entry of probability above `floor`, and
/// perhaps some at it), by the whole block: ordered by rank, walked until their mass reaches
/// top_p. The cut stands when every entry left out ranks after it (its probability is above
/// the floor); returns whether it did (and then writes it into `out` and, with `keep`, the kept
/// entries, ranked, as kept_keys into `list`, their count into *kept).
__device__ inline bool cut_from_list(Global<std::uint64_t> list, unsigned int count, float floor,
                              double top_p, RowStats& out, NucleusShared& sh, unsigned int* kept,
                              bool keep) {
  if (count > static_cast<unsigned int>(kNucleusList)) return false;
  for (int j = static_cast<int>(threadIdx.x); j < static_cast<int>(count);
       j += static_cast<int>(blockDim.x)) {
    sh.keys[j] = list[j];
  }
  sort_keys_descending(static_cast<int>(count), sh.keys);
  if (count > 0 && specdec::detail::float_bits(key_value(sh.keys[count - 1])) >= kExactMassBits) {
    return walk_exact(count, floor, top_p, out, sh, kept, list, keep);
  }
  if (threadIdx.x == 0) {
    sh.found = 0;
    double running = 0.0;
    for (unsigned int j = 0; j < count; ++j) {
      running += static_cast<double>(key_value(sh.keys[j]));
      if (!specdec::detail::reaches_nucleus(running, top_p)) continue;
      const float value = key_value(sh.keys[j]);
      if (value > floor) {
        out.top_p_value = value;
        out.top_p_last = key_id(sh.keys[j]);
        out.inv_top_p_kept = static_cast<float>(1.0 / running);
        sh.found = 1;
        sh.kept = j + 1;
      }
      break;
    }
  }
  return keep_nucleus(list, sh, kept, keep);
}

/// Gathers the entries [begin, end) of the row at or above `gate` (a logit) whose probability's
/// bits are at least `floor_bits` into `list` by the whole block, counted in count[r] (more than
/// the list holds are counted, not kept); their masses and counts by bucket into sh.hist_* and,
/// with `histogram`, added to the row's histogram. Loads of 16 bytes; the block's candidates are
/// staged in shared memory, so the list and its count take one atomic per block. Returns the
/// row's count with this block's candidates (for a block gathering alone, the count).
template <class T>
__device__ unsigned int gather_candidates(Global<const T> row, std::int64_t begin,
                                          std::int64_t end, float gate, std::uint32_t floor_bits,
                                          const RowStats& s, Global<std::uint64_t> list,
                                          Global<unsigned int> count, std::int64_t r,
                                          CandidateBuckets buckets,
                                          const CandidateHistograms* histogram,
                                          NucleusShared& sh) {
  for (int b = static_cast<int>(threadIdx.x); b < kNucleusBuckets; b += static_cast<int>(blockDim.x)) {
    sh.hist_units[b] = 0u;
    sh.hist_counts[b] = 0u;
  }
  if (threadIdx.x == 0) sh.gathered = 0u;
  __syncthreads();
  block_for_each<kInFlight<T>>(row + begin, end - begin, [&](float logit, std::int64_t i) {
    if (!(logit >= gate)) return;
    const float p = softmax_of(s, logit);
    const std::uint32_t bits = specdec::detail::float_bits(p);
    if (!(p > 0.0f) || bits < floor_bits) return;
    const unsigned int at = atomicAdd(&sh.gathered, 1u);
    if (at < static_cast<unsigned int>(kNucleusList)) sh.keys[at] = nucleus_key(p, begin + i);
    const int b = buckets.of(bits);
    atomicAdd(&sh.hist_counts[b], 1u);
    if (bits >= kExactMassBits) {  // see kExactMassBits: smaller masses are left out
      atomicAdd(&sh.hist_units[b], static_cast<unsigned long long>(static_cast<double>(p) * 0x1p53));
    }
  });
  __syncthreads();
  const unsigned int gathered = sh.gathered;
  if (threadIdx.x == 0) sh.slot = gathered == 0u ? 0u : count.atomic_add(r, gathered);
  __syncthreads();
  if (gathered == 0u) return sh.slot;
  __syncthreads();
  const unsigned int slot = sh.slot, staged = gathered < static_cast<unsigned int>(kNucleusList)
                                                  ? gathered
                                                  : static_cast<unsigned int>(kNucleusList);
  for (unsigned int j = threadIdx.x; j < staged && slot + j < static_cast<unsigned int>(kNucleusList);
       j += blockDim.x) {
    list[slot + j] = sh.keys[j];
  }
  if (histogram != nullptr) {
    for (int b = static_cast<int>(threadIdx.x); b < kNucleusBuckets;
         b += static_cast<int>(blockDim.x)) {
      if (sh.hist_counts[b] == 0u) continue;
      histogram->counts.atomic_add(r * kNucleusBuckets + b, sh.hist_counts[b]);
      histogram->units.atomic_add(r * kNucleusBuckets + b, sh.hist_units[b]);
    }
  }
  const unsigned int total = sh.slot + gathered;
  __syncthreads();  // sh.keys and sh.slot are read before they are reused
  return total;
}

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
    const bool tie =
        i < n && specdec::detail::float_bits(softmax_of(s, specdec::detail::to_float(row[i]))) == bits;
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
          atomicAdd(&sh.bucket_units[b], static_cast<unsigned long long>(
                                             static_cast<double>(p) * 0x1p53));
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
        const double bucket =
            static_cast<double>(sh.bucket_units[b]) * 0x1p-53 + sh.bucket_mass[b];
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
  const std::int64_t need = specdec::detail::ties_in_nucleus(above, static_cast<double>(v),
                                                             static_cast<std::int64_t>(ties), top_p);
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
  for (int j = 1; j < m; ++j) {  // insertion sort, descending
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

/// The lower edge (bits) of the bucket of the row's histogram (sh.hist_*) holding the cut, by
/// thread 0 for the block: the buckets' exact masses added from the top until they reach top_p;
/// 0 when the candidates at or above it are more than the list holds (or the masses, which leave
/// out entries below 2^-30, never reach top_p).
__device__ inline std::uint32_t cut_bucket_edge(CandidateBuckets buckets, double top_p,
                                                NucleusShared& sh) {
  if (threadIdx.x == 0) {
    sh.found = 0;
    unsigned long long units = 0u;
    unsigned int count = 0u;
    for (int b = static_cast<int>(kNucleusBuckets) - 1; b >= 0; --b) {
      units += sh.hist_units[b];
      count += sh.hist_counts[b];
      if (specdec::detail::reaches_nucleus(static_cast<double>(units) * 0x1p-53, top_p)) {
        if (count <= static_cast<unsigned int>(kNucleusList)) sh.found = static_cast<int>(buckets.edge(b));
        break;
      }
    }
  }
  __syncthreads();
  const auto edge = static_cast<std::uint32_t>(sh.found);
  __syncthreads();
  return edge;
}

/// The top-p cut of every row of `rows` whose warp cuts by top-p alone (row r is blockIdx.x,
/// blockIdx.y takes split.tiles_per_block tiles of it), into stats[r]: the candidates at or above
/// gates[r] (row_stats_kernel's last block wrote it and zeroed the row's histogram) go to the
/// row's list of kNucleusList keys, counted in counts[r], and to its histogram. counts[r] and
/// counters[r] must be 0 at launch. After, counters[r] is 0 and, with `keep` and a cut from the
/// list, the list holds the nucleus as kept_keys (ranked; order_kept_keys orders them by id) and
/// counts[r] their number; else counts[r] is 0.
template <class T>
__global__ void __launch_bounds__(kStatsThreads)
    nucleus_kernel(LogitRowSet<T> rows, std::int64_t n, RowSplit split, RowWarps warps,
                   Global<const float> gates, Global<unsigned int> counts,
                   Global<std::uint64_t> lists, CandidateHistograms histograms,
                   Global<unsigned int> counters, Global<RowStats> stats, bool keep) {
  expect_block_threads(kStatsThreads);
  __shared__ NucleusShared sh;
  const std::int64_t r = blockIdx.x;
  if (threadIdx.x == 0) {  // one read of the row's warp and statistics, not one per thread
    sh.warp = warps.of(r);
    if (top_p_only(sh.warp, n)) sh.row = stats[r];
  }
  __syncthreads();
  const DeviceWarp w = sh.warp;
  if (!top_p_only(w, n)) return;
  RowStats s = sh.row;
  if (s.invalid != 0) return;
  const Global<const T> row = rows.row(r);
  const Global<std::uint64_t> list = lists + r * kNucleusList;
  float gate = n > kSmallNucleusRow ? gates[r] : 0.0f;
  CandidateBuckets buckets = CandidateBuckets::above(softmax_of(s, gate));
  if (n > kSmallNucleusRow) {
    // This block's candidates and their histogram.
    const std::int64_t begin = blockIdx.y * split.tiles_per_block * kTile;
    const std::int64_t stop = (blockIdx.y + 1) * split.tiles_per_block * kTile;
    gather_candidates(row, begin, stop < n ? stop : n, gate, 0u, s, list, counts, r, buckets,
                      &histograms, sh);
  }
  // The last block of the row to finish finds the cut.
  if (!last_block_of_row(counters, r, split.blocks_per_row, sh.last)) return;
  const double top_p = static_cast<double>(w.top_p);
  if (n <= kSmallNucleusRow) {
    if (threadIdx.x == 0) {
      small_nucleus(row, n, top_p, s);
      stats[r] = s;
    }
    return;
  }
  unsigned int kept = 0;  // listed for the draws: the nucleus's entries
  // The whole row gathered again by this block alone (its histogram left in sh.hist_*).
  const auto gather_again = [&](std::uint32_t floor_bits) {
    __syncthreads();
    if (threadIdx.x == 0) counts[r] = 0u;
    __syncthreads();
    return gather_candidates(row, 0, n, gate, floor_bits, s, list, counts, r, buckets, nullptr,
                             sh);
  };
  // The candidates at or above the gate; where they overflow the list, again at or above the
  // edge of the histogram's bucket holding the cut (the cut then stands if it lies above it).
  const auto cut_at = [&](unsigned int listed, bool histogram_in_shared) {
    if (cut_from_list(list, listed, softmax_of(s, gate), top_p, s, sh, &kept, keep)) return true;
    if (listed <= static_cast<unsigned int>(kNucleusList)) return false;
    if (!histogram_in_shared) {
      for (int b = static_cast<int>(threadIdx.x); b < kNucleusBuckets;
           b += static_cast<int>(blockDim.x)) {
        sh.hist_units[b] = histograms.units[r * kNucleusBuckets + b];
        sh.hist_counts[b] = histograms.counts[r * kNucleusBuckets + b];
      }
      __syncthreads();
    }
    const std::uint32_t edge = cut_bucket_edge(buckets, top_p, sh);
    if (edge == 0u) return false;
    return cut_from_list(list, gather_again(edge), specdec::detail::bits_float(edge), top_p, s,
                         sh, &kept, keep);
  };
  const unsigned int listed = counts[r];
  bool found = cut_at(listed, false);
  const float prune = prune_gate(n, w.top_p, s);
  if (!found && gate > prune && listed <= static_cast<unsigned int>(kNucleusList)) {
    // The estimated gate was too high (the cut lies below it): the CPU's prune bound instead.
    gate = prune;
    buckets = CandidateBuckets::above(softmax_of(s, gate));
    found = cut_at(gather_again(0u), true);
  }
  if (!found) search_nucleus(row, n, top_p, s, sh);
  if (threadIdx.x == 0) {
    counts[r] = kept;  // the next call's memset zeroes it
    stats[r] = s;
  }
}

}  // namespace specdec::backend::cuda_impl::detail
