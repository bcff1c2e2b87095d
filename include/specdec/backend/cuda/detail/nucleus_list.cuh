// SPDX-License-Identifier: MIT
// A row's nucleus candidates (nucleus_kernels.cuh gathers them, the chain's draws read the kept
// ones): their keys (the probability's bits above the complement of the id, so that descending
// keys are the ranking), the list a row's blocks gather them into behind a gate, with a
// histogram of their exact masses, and how the last block selects the cut from the list.
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

/// select_exact_cut's shared state: a radix pass's digit masses, and the digits of the cut's key
/// decided so far.
struct MassSelectShared {
  unsigned long long units[256];  // masses in units of 2^-53
  std::uint64_t prefix;           // the digits of the cut's key decided so far
  unsigned long long above;       // the mass of the keys ranked above the prefix's range
  int found;
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
  MassSelectShared mass;
};

/// A row's candidate list (kNucleusList keys in global memory) and what a cut leaves there for the
/// draws: with `keep`, the kept entries as kept_keys, their count in *kept.
struct RowList {
  Global<std::uint64_t> keys;
  unsigned int* kept;
  bool keep;
};

/// Where gather_candidates finds row `r`'s candidates and lists them: the row, its statistics and
/// its tiles' maxima; its list and the batch's counts (count[r]).
template <class T>
struct CandidateRow {
  Global<const T> row;
  const RowStats& stats;
  Global<const TileStats> tiles;
  Global<std::uint64_t> list;
  Global<unsigned int> count;
  std::int64_t r;
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

/// After a selection or walk (sh.found, sh.kept): with list.keep and a cut, the kept entries
/// (sh.keys[0, kept), in any order) written to the list as kept_keys, their count to *list.kept.
/// They are ordered by id (order_kept_keys) only where a draw reads them. Returns whether the walk
/// found the cut.
__device__ inline bool keep_nucleus(const RowList& list, NucleusShared& sh) {
  __syncthreads();
  const bool found = sh.found != 0;
  if (found && list.keep) {
    const int m = static_cast<int>(sh.kept);
    for (int j = static_cast<int>(threadIdx.x); j < m; j += static_cast<int>(blockDim.x)) {
      list.keys[j] = kept_key(sh.keys[j]);
    }
    *list.kept = sh.kept;
  }
  __syncthreads();
  return found;
}

/// The mass of a candidate's key in units of 2^-53: exact for a probability of at least 2^-30.
__device__ __forceinline__ unsigned long long key_units(std::uint64_t key) {
  return static_cast<unsigned long long>(static_cast<double>(key_value(key)) * 0x1p53);
}

/// How select_exact_cut ended.
enum class ExactCut {
  kFound,  // the cut is in `out` (when it stands above the floor)
  kShort,  // the candidates' mass falls short of top_p, or the cut lies at or below the floor
  kTiny,   // a candidate below 2^-30, whose mass is no whole number of 2^-53: not selected
};

/// The cut of cut_from_list among the `count` keys of `list`, whose masses by bucket of `buckets`
/// are `histogram` (shared memory), when every probability is at least 2^-30: each mass is a
/// whole number of 2^-53, so the CPU's running sum in double is exact (its last addition, past
/// top_p, rounds the exact sum once, as the conversion of the units does) and the cut is the
/// largest key whose mass with every larger key's reaches top_p. Found without a sort: the
/// histogram's buckets added from the top give the bucket holding the cut, then a radix selection
/// weighted by mass over the keys in it, 8 bits a pass: each pass a histogram of the masses of the
/// keys that share the digits found so far (integer atomics, so the same in any order), one warp
/// adding the digits' masses from the largest until they reach top_p. The passes stop when one
/// key shares them (one or two for a list of thousands), with no tie left to walk (a key holds its
/// id). The kept keys go to sh.keys[0, sh.kept), in no order. By the whole block (kStatsThreads
/// threads).
__device__ inline ExactCut select_exact_cut(Global<const std::uint64_t> list, unsigned int count,
                                            float floor, double top_p, CandidateBuckets buckets,
                                            const unsigned long long* histogram, RowStats& out,
                                            NucleusShared& sh) {
  constexpr int kMost = kNucleusList / kStatsThreads;  // a thread's keys, in registers
  const int tid = static_cast<int>(threadIdx.x);
  MassSelectShared& m = sh.mass;
  // The keys two by two (16-byte loads, a warp's side by side).
  std::uint64_t mine[kMost];
  SPECDEC_UNROLL(8)
  for (int t = 0; t < kMost / 2; ++t) {
    const int j = 2 * (tid + t * kStatsThreads);
    mine[2 * t] = 0u;
    mine[2 * t + 1] = 0u;
    if (j + 1 < static_cast<int>(count)) {
      const Vec<std::uint64_t, 2> pair = list.load_vec<2>(j);
      mine[2 * t] = pair.v[0];
      mine[2 * t + 1] = pair.v[1];
    } else if (j < static_cast<int>(count)) {
      mine[2 * t] = list[j];
    }
  }
  // Keys below 2^-30, or below the buckets' base (the exponential rounds down by an ulp in
  // places), are left to the caller. The others as their offsets from the base, whose top bits
  // are the bucket: a bucket is then a range of the offsets' digits.
  const std::uint64_t base = static_cast<std::uint64_t>(buckets.base) << 32;
  unsigned int odd = 0u;
  SPECDEC_UNROLL(16)
  for (int t = 0; t < kMost; ++t) {
    const auto bits = static_cast<std::uint32_t>(mine[t] >> 32);
    odd |= static_cast<unsigned int>(mine[t] != 0u) &
           (static_cast<unsigned int>(bits < kExactMassBits) |
            static_cast<unsigned int>(bits < buckets.base));
    mine[t] = mine[t] != 0u ? mine[t] - base : 0u;  // a key's offset is never 0 (its id's is not)
  }
  if (block_all_reduce(odd, Plus{}, sh.u) != 0u) return ExactCut::kTiny;
  const auto reaches = [top_p](unsigned long long units) {
    return specdec::detail::reaches_nucleus(static_cast<double>(units) * 0x1p-53, top_p);
  };
  // The bucket holding the cut: lane l adds buckets 63 - 2 l and 62 - 2 l.
  static_assert(kNucleusBuckets == 64);
  if (tid == 0) m.found = 0;
  __syncthreads();
  if (tid < 32) {
    const unsigned long long high = histogram[63 - 2 * tid], low = histogram[62 - 2 * tid];
    unsigned long long through = high + low;
    for (int d = 1; d < 32; d *= 2) {
      const unsigned long long other = __shfl_up_sync(0xffffffffu, through, d);
      if (tid >= d) through += other;
    }
    const unsigned long long before = through - high - low;
    if (!reaches(before) && reaches(through)) {
      const bool in_high = reaches(before + high);
      m.prefix = static_cast<std::uint64_t>(in_high ? 63 - 2 * tid : 62 - 2 * tid)
                 << (32 + buckets.shift);
      m.above = in_high ? before : before + high;
      m.found = 1;
    }
  }
  __syncthreads();
  if (m.found == 0) return ExactCut::kShort;
  std::uint64_t prefix = m.prefix, mask = ~std::uint64_t{0} << (32 + buckets.shift);
  unsigned long long above = m.above;
  for (int at = 24 + buckets.shift;; at -= 8) {  // the digits below the bucket's
    const int shift = at > 0 ? at : 0;  // the last digit may repeat bits already found
    unsigned int sharing = 0u;          // this thread's keys that share the digits found so far
    SPECDEC_UNROLL(16)
    for (int t = 0; t < kMost; ++t)
      sharing += static_cast<unsigned int>(mine[t] != 0u && (mine[t] & mask) == prefix);
    // (Its barriers also order the reads of m before this pass writes it.)
    if (block_all_reduce(sharing, Plus{}, sh.u) == 1u) break;
    for (int d = tid; d < 256; d += kStatsThreads) m.units[d] = 0u;
    if (tid == 0) m.found = 0;
    __syncthreads();
    SPECDEC_UNROLL(16)
    for (int t = 0; t < kMost; ++t) {
      if (mine[t] != 0u && (mine[t] & mask) == prefix)
        atomicAdd(&m.units[(mine[t] >> shift) & 0xffu], key_units(mine[t] + base));
    }
    __syncthreads();
    if (tid < 32) {  // lane l adds digits 255 - 8 l down to 248 - 8 l, the largest first
      unsigned long long u[8], own = 0u;
      for (int i = 0; i < 8; ++i) {
        u[i] = m.units[255 - 8 * tid - i];
        own += u[i];
      }
      unsigned long long through = own;
      for (int d = 1; d < 32; d *= 2) {
        const unsigned long long other = __shfl_up_sync(0xffffffffu, through, d);
        if (tid >= d) through += other;
      }
      unsigned long long running = above + (through - own);
      if (!reaches(running) && reaches(above + through)) {  // the cut's digit is this lane's
        int i = 0;
        while (!reaches(running + u[i])) running += u[i++];
        m.prefix = prefix | (static_cast<std::uint64_t>(255 - 8 * tid - i) << shift);
        m.above = running;
        m.found = 1;
      }
    }
    __syncthreads();
    if (m.found == 0) return ExactCut::kShort;
    prefix = m.prefix;
    above = m.above;
    mask |= std::uint64_t{0xff} << shift;
  }
  // The one key that shares the digits is the cut; it and every larger key are kept, each
  // thread's at its place in thread order.
  SPECDEC_UNROLL(16)
  for (int t = 0; t < kMost; ++t) {
    if (mine[t] != 0u && (mine[t] & mask) == prefix) m.prefix = mine[t];
  }
  __syncthreads();
  const std::uint64_t cut = m.prefix;  // an offset, as `mine`
  unsigned int kept = 0u;
  SPECDEC_UNROLL(16)
  for (int t = 0; t < kMost; ++t) kept += static_cast<unsigned int>(mine[t] >= cut);
  const BlockScan<unsigned int> place = block_scan(kept, sh.u);
  unsigned int slot = place.exclusive(kept);
  SPECDEC_UNROLL(16)
  for (int t = 0; t < kMost; ++t) {
    if (mine[t] >= cut) sh.keys[slot++] = mine[t] + base;
  }
  if (tid == 0) sh.kept = place.total;
  const float value = key_value(cut + base);
  if (!(value > floor)) return ExactCut::kShort;  // an entry left out may rank before it
  out.top_p_value = value;
  out.top_p_last = key_id(cut + base);
  out.inv_top_p_kept =
      static_cast<float>(1.0 / (static_cast<double>(above + key_units(cut + base)) * 0x1p-53));
  return ExactCut::kFound;
}

/// The cut from the `count` candidates of the row's list (every entry of probability above
/// `floor`, and perhaps some at it; their histogram by `buckets` in sh.hist_units), by the whole
/// block: selected by select_exact_cut or, where a candidate lies below 2^-30, ordered by rank
/// and walked by one thread until their mass reaches top_p.
/// The cut stands when every entry left out ranks after it (its probability is above the floor);
/// returns whether it did (and then writes it into `out`, the kept entries into sh.keys[0,
/// sh.kept) and, with list.keep, into the list as kept_keys, their count into *list.kept).
__device__ inline bool cut_from_list(const RowList& list, unsigned int count, float floor,
                                     double top_p, CandidateBuckets buckets, RowStats& out,
                                     NucleusShared& sh) {
  if (count > static_cast<unsigned int>(kNucleusList)) return false;
  const ExactCut exact =
      select_exact_cut(list.keys, count, floor, top_p, buckets, sh.hist_units, out, sh);
  if (exact != ExactCut::kTiny) {
    if (threadIdx.x == 0) sh.found = exact == ExactCut::kFound ? 1 : 0;
    return keep_nucleus(list, sh);
  }
  // Some candidate below 2^-30: ranked by a sort, their masses added in rank order in double.
  for (int j = static_cast<int>(threadIdx.x); j < static_cast<int>(count);
       j += static_cast<int>(blockDim.x)) {
    sh.keys[j] = list.keys[j];
  }
  sort_keys_descending(static_cast<int>(count), sh.keys);
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
  return keep_nucleus(list, sh);
}

/// Gathers the entries [begin, end) of the row (begin a multiple of kTile) at or above `gate` (a
/// logit) whose probability's bits are at least `floor_bits` into its list by the whole block,
/// counted in count[r] (more than the list holds are counted, not kept); their masses and counts
/// by bucket into sh.hist_* and, with `histogram`, added to the row's histogram. Loads of 16
/// bytes, over the runs of tiles whose largest logit (the row's TileStats in `tiles`) reaches the
/// gate; the block's candidates are staged in shared memory, so the list and its count take one
/// atomic per block. Returns the row's count with this block's candidates (for a block gathering
/// alone, the count).
template <class T>
__device__ unsigned int gather_candidates(const CandidateRow<T>& source, std::int64_t begin,
                                          std::int64_t end, float gate, std::uint32_t floor_bits,
                                          CandidateBuckets buckets,
                                          const CandidateHistograms* histogram, NucleusShared& sh) {
  const RowStats& s = source.stats;
  const Global<std::uint64_t> list = source.list;
  const Global<unsigned int> count = source.count;
  const std::int64_t r = source.r;
  for (int b = static_cast<int>(threadIdx.x); b < kNucleusBuckets;
       b += static_cast<int>(blockDim.x)) {
    sh.hist_units[b] = 0u;
    sh.hist_counts[b] = 0u;
  }
  if (threadIdx.x == 0) sh.gathered = 0u;
  __syncthreads();
  const auto gather = [&](std::int64_t from, std::int64_t to) {
    block_for_each<kInFlight<T>>(source.row + from, to - from, [&](float logit, std::int64_t i) {
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
      if ((t - first) % kMaximaChunk == 0) load_tile_maxima(source.tiles, t, stop, sh.maxima);
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
