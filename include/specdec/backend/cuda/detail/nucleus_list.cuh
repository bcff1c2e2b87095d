// SPDX-License-Identifier: MIT
// A row's nucleus candidates (nucleus_kernels.cuh gathers them, the chain's draws read the kept
// ones): their keys (the probability's bits above the complement of the id, so that descending
// keys are the ranking), the list a row's blocks gather them into behind a gate, with a
// histogram of their exact masses, and how the last block orders and walks the list to the cut.
// Masses of probabilities of at least 2^-30 are whole numbers of 2^-53: they add exactly, in
// double or as integers, so the cut, its last id and 1 / kept mass are the CPU's bits.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/bitonic.cuh"
#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/block_sweep.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/stats.hpp"

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

/// keep_largest_keys's shared state: a radix pass's digit counts, and the key found so far.
struct KeySelectShared {
  unsigned int digits[256];
  std::uint64_t prefix;      // the digits of the wanted key decided so far
  unsigned long long least;  // the least nonzero key, when every one is kept (atomicMin's type)
  unsigned int rank;         // its rank among the keys that share those digits
  unsigned int count;
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
  float maxima[kMaximaChunk];  // load_tile_maxima's
  DeviceWarp warp;
  RowStats row;
  unsigned int kept;
  unsigned int u[32];
  std::int64_t tie_at;
  int last;
  int found;
  KeySelectShared select;
};

/// Sorts keys[0, count) (shared memory, room for the next power of two) descending by the whole
/// block (bitonic_steps, padded with zero keys).
__device__ inline void sort_keys_descending(int count, std::uint64_t* keys) {
  int size = 1;
  while (size < count) size *= 2;
  for (int i = count + static_cast<int>(threadIdx.x); i < size; i += static_cast<int>(blockDim.x))
    keys[i] = 0;
  __syncthreads();
  bitonic_steps(size, [keys](int i, int j, bool leading) {
    const std::uint64_t a = keys[i], b = keys[j];
    if (leading ? a < b : a > b) {
      keys[i] = b;
      keys[j] = a;
    }
  });
}

/// The k largest nonzero keys of from[0, count) (count <= kNucleusList; nonzero keys distinct,
/// zeros are empty slots) into keys[0, m), in no order, m = min(k, nonzero keys); returns the
/// k-th largest key, or 0 when fewer than k are nonzero. A radix selection, 8 bits a pass from
/// the top, where a sort of count keys would take log2(count)^2 / 2 barriers. By the whole block
/// (kStatsThreads threads); ends with a barrier.
__device__ inline std::uint64_t keep_largest_keys(Global<const std::uint64_t> from, int count,
                                                  int k, std::uint64_t* keys, KeySelectShared& sh) {
  constexpr int kMost = kNucleusList / kStatsThreads;  // a thread's keys, in registers
  const int tid = static_cast<int>(threadIdx.x);
  std::uint64_t mine[kMost];
  int nonzero = 0;
  SPECDEC_UNROLL(16)
  for (int t = 0; t < kMost; ++t) {
    const int j = tid + t * kStatsThreads;
    mine[t] = j < count ? static_cast<std::uint64_t>(from[j]) : 0u;
    nonzero += mine[t] != 0u ? 1 : 0;
  }
  if (tid == 0) {
    sh.count = 0u;
    sh.prefix = 0u;
    sh.rank = static_cast<unsigned int>(k);
    sh.least = ~0ull;
  }
  __syncthreads();
  if (nonzero > 0) atomicAdd(&sh.count, static_cast<unsigned int>(nonzero));
  __syncthreads();
  const bool all = sh.count <= static_cast<unsigned int>(k);
  std::uint64_t mask = 0u;
  for (int shift = 56; shift >= 0 && !all; shift -= 8) {
    for (int d = tid; d < 256; d += kStatsThreads) sh.digits[d] = 0u;
    __syncthreads();
    const std::uint64_t prefix = sh.prefix;
    SPECDEC_UNROLL(16)
    for (int t = 0; t < kMost; ++t) {
      if (mine[t] != 0u && (mine[t] & mask) == prefix)
        atomicAdd(&sh.digits[(mine[t] >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (tid < 32) {  // lane l counts digits 255 - 8 l down to 248 - 8 l, the largest first
      const unsigned int rank = sh.rank;  // read by every lane before the shuffles, then written
      unsigned int c[8], own = 0u;
      for (int i = 0; i < 8; ++i) {
        c[i] = sh.digits[255 - 8 * tid - i];
        own += c[i];
      }
      unsigned int through = own;
      for (int d = 1; d < 32; d *= 2) {
        const unsigned int other = __shfl_up_sync(0xffffffffu, through, d);
        if (tid >= d) through += other;
      }
      const unsigned int before = through - own;
      if (before < rank && rank <= through) {  // the wanted key's digit is this lane's
        unsigned int r = rank - before;
        int i = 0;
        while (r > c[i]) r -= c[i++];
        sh.prefix = prefix | (static_cast<std::uint64_t>(255 - 8 * tid - i) << shift);
        sh.rank = r;
      }
    }
    __syncthreads();
    mask |= std::uint64_t{0xff} << shift;
  }
  // Every key at or above the k-th (every nonzero one when all are kept).
  const std::uint64_t floor = all ? 1u : sh.prefix;
  __syncthreads();
  if (tid == 0) sh.count = 0u;
  __syncthreads();
  SPECDEC_UNROLL(16)
  for (int t = 0; t < kMost; ++t) {
    if (mine[t] >= floor && mine[t] != 0u) {
      keys[atomicAdd(&sh.count, 1u)] = mine[t];
      if (all) atomicMin(&sh.least, static_cast<unsigned long long>(mine[t]));
    }
  }
  __syncthreads();
  if (!all) return floor;
  return sh.count == static_cast<unsigned int>(k) ? static_cast<std::uint64_t>(sh.least) : 0u;
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
  // The exclusive prefix of this thread's run (sh.hist_units is free until the next gather).
  if (threadIdx.x == 0) sh.found = static_cast<int>(count);  // the least crossing so far
  const unsigned long long before = block_scan(own, sh.hist_units).exclusive(own);
  unsigned long long running = before;
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
    unsigned long long mass = before;
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
                                     double top_p, RowStats& out, NucleusShared& sh,
                                     unsigned int* kept, bool keep) {
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

/// Gathers the entries [begin, end) of the row (begin a multiple of kTile) at or above `gate` (a
/// logit) whose probability's bits are at least `floor_bits` into `list` by the whole block,
/// counted in count[r] (more than the list holds are counted, not kept); their masses and counts
/// by bucket into sh.hist_* and, with `histogram`, added to the row's histogram. Loads of 16
/// bytes, over the runs of tiles whose largest logit (the row's TileStats in `tiles`) reaches the
/// gate; the block's candidates are staged in shared memory, so the list and its count take one
/// atomic per block. Returns the row's count with this block's candidates (for a block gathering
/// alone, the count).
template <class T>
__device__ unsigned int gather_candidates(Global<const T> row, std::int64_t begin, std::int64_t end,
                                          float gate, std::uint32_t floor_bits, const RowStats& s,
                                          Global<const TileStats> tiles, Global<std::uint64_t> list,
                                          Global<unsigned int> count, std::int64_t r,
                                          CandidateBuckets buckets,
                                          const CandidateHistograms* histogram, NucleusShared& sh) {
  for (int b = static_cast<int>(threadIdx.x); b < kNucleusBuckets;
       b += static_cast<int>(blockDim.x)) {
    sh.hist_units[b] = 0u;
    sh.hist_counts[b] = 0u;
  }
  if (threadIdx.x == 0) sh.gathered = 0u;
  __syncthreads();
  const auto gather = [&](std::int64_t from, std::int64_t to) {
    block_for_each<kInFlight<T>>(row + from, to - from, [&](float logit, std::int64_t i) {
      if (!(logit >= gate)) return;
      const float p = softmax_of(s, logit);
      const std::uint32_t bits = specdec::detail::float_bits(p);
      if (!(p > 0.0f) || bits < floor_bits) return;
      const unsigned int at = atomicAdd(&sh.gathered, 1u);
      if (at < static_cast<unsigned int>(kNucleusList)) sh.keys[at] = nucleus_key(p, from + i);
      const int b = buckets.of(bits);
      atomicAdd(&sh.hist_counts[b], 1u);
      if (bits >= kExactMassBits) {  // see kExactMassBits: smaller masses are left out
        atomicAdd(&sh.hist_units[b],
                  static_cast<unsigned long long>(static_cast<double>(p) * 0x1p53));
      }
    });
  };
  // The runs of tiles that may hold an entry at or above the gate, each read as one range.
  const std::int64_t first = begin / kTile, stop = (end + kTile - 1) / kTile;
  std::int64_t run = -1;  // the first tile of the run being extended
  for (std::int64_t t = first; t <= stop; ++t) {
    bool read = false;
    if (t < stop) {
      if ((t - first) % kMaximaChunk == 0) load_tile_maxima(tiles, t, stop, sh.maxima);
      read = !(sh.maxima[(t - first) % kMaximaChunk] < gate);
    }
    if (read && run < 0) run = t;
    if (!read && run >= 0) {
      gather(run * kTile, t * kTile < end ? t * kTile : end);
      run = -1;
    }
  }
  __syncthreads();
  const unsigned int gathered = sh.gathered;
  if (threadIdx.x == 0) sh.slot = gathered == 0u ? 0u : count.atomic_add(r, gathered);
  __syncthreads();
  if (gathered == 0u) return sh.slot;
  __syncthreads();
  const unsigned int slot = sh.slot, staged = gathered < static_cast<unsigned int>(kNucleusList)
                                                  ? gathered
                                                  : static_cast<unsigned int>(kNucleusList);
  for (unsigned int j = threadIdx.x;
       j < staged && slot + j < static_cast<unsigned int>(kNucleusList); j += blockDim.x) {
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
        if (count <= static_cast<unsigned int>(kNucleusList))
          sh.found = static_cast<int>(buckets.edge(b));
        break;
      }
    }
  }
  __syncthreads();
  const auto edge = static_cast<std::uint32_t>(sh.found);
  __syncthreads();
  return edge;
}

}  // namespace specdec::backend::cuda_impl::detail
