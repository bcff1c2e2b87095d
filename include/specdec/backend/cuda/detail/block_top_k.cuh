// SPDX-License-Identifier: MIT
// A block's best k entries of a range of a row, without sorting it: each thread reads four
// entries a round and keeps those that rank before the list's last (ranks_before: larger value,
// ties to the lower id); a warp first keeps its best k of a round when k is small, and the round's
// entrants are merged into the list by merge positions. Gumbel-top-k and the beam level rank
// perturbed entries (draft_kernels.cuh), the statistics path's top-k rows their logits
// (top_k_cut.cuh).
// IWYU pragma: private
#pragma once

#include <cstdint>
#include <type_traits>

#include "specdec/backend/cuda/detail/bitonic.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/draft/drafting_rows.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Per-thread counts and their prefix sums (blockDim.x <= 1024).
struct GatherShared {
  unsigned int counts[1024];
  unsigned int warp_counts[32];
};

/// Block-wide exclusive prefix sum: the sum of `local` over the threads before this one.
__device__ inline unsigned int block_exclusive_scan(unsigned int local, GatherShared& sh) {
  const int tid = static_cast<int>(threadIdx.x);
  __syncthreads();  // earlier readers of sh are done
  sh.counts[tid] = local;
  __syncthreads();
  const int warp = tid >> 5;
  if (tid < static_cast<int>(blockDim.x >> 5)) {
    unsigned int sum = 0;
    for (int i = 0; i < 32; ++i) sum += sh.counts[tid * 32 + i];
    sh.warp_counts[tid] = sum;
  }
  __syncthreads();
  unsigned int before = 0;
  for (int w = 0; w < warp; ++w) before += sh.warp_counts[w];
  for (int i = warp * 32; i < tid; ++i) before += sh.counts[i];
  return before;
}

using specdec::detail::ranks_before;

/// Entries one thread perturbs per round of a block's scan: one Philox block of four uniforms.
inline constexpr int kRoundEntries = 4;
/// Candidates a round can bring: every entry of the round.
inline constexpr int kRoundCandidates = kWarpThreads * kRoundEntries;

/// A block's running top-k list (ranks_before order), the candidates of a round and the merge
/// buffer, in shared memory.
struct SplitTopKShared {
  Shared reduce;
  GatherShared gather;
  float list_values[kMaxDeviceTopK];
  std::int32_t list_ids[kMaxDeviceTopK];
  float merged_values[kMaxDeviceTopK];
  std::int32_t merged_ids[kMaxDeviceTopK];
  float candidate_values[kRoundCandidates];
  std::int32_t candidate_ids[kRoundCandidates];
  alignas(RandomStream) unsigned char stream[sizeof(RandomStream)];  // broadcast by thread 0
  int flag;
  int count;
};

/// Block-wide exclusive prefix sum of `local`; *total gets the sum over the block.
__device__ inline unsigned int block_scan_with_total(unsigned int local, unsigned int* total,
                                                     GatherShared& sh) {
  const unsigned int before = block_exclusive_scan(local, sh);
  unsigned int sum = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) sum += sh.warp_counts[w];
  *total = sum;
  return before;
}

/// How many of the n entries of a list in ranks_before order rank before (v, id).
__device__ __forceinline__ int ranked_before_sorted(const float* values, const std::int32_t* ids,
                                                    int n, float v, std::int32_t id) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (ranks_before(values[mid], ids[mid], v, id)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// How many of n unordered entries rank before (v, id), counted up to `limit` (an entry with
/// `limit` entries before it has no place in the list: the scan stops there).
__device__ __forceinline__ int ranked_before_any(const float* values, const std::int32_t* ids,
                                                 int n, float v, std::int32_t id, int limit) {
  int c = 0;
  for (int j = 0; j < n && c < limit; ++j) c += ranks_before(values[j], ids[j], v, id) ? 1 : 0;
  return c;
}

/// Whether perturbed value v of token id enters a list of `kept` of at most k: it is drawable
/// (not -inf or NaN, as the CPU's heap) and, once the list is full, ranks before its last.
__device__ __forceinline__ bool enters_list(float v, std::int32_t id, int kept, int k,
                                            const SplitTopKShared& sh) {
  if (!(v > kNegInf)) return false;
  return kept < k || ranks_before(v, id, sh.list_values[k - 1], sh.list_ids[k - 1]);
}

/// Above this many candidates a merge first sorts them: ranking each against all the others
/// costs a warp s steps whenever one of its lanes holds a leading candidate, a bitonic sort
/// log2(s)^2 / 2 steps of the whole block.
inline constexpr int kSortCandidatesFrom = 32;

/// The s candidates of sh in ranks_before order, by a bitonic sort of (value, id) pairs in place,
/// padded to a power of two (at most kRoundCandidates) with entries that rank after every
/// drawable one. By the whole block; ends with a barrier.
__device__ inline void sort_candidates(int s, SplitTopKShared& sh) {
  float* values = sh.candidate_values;
  std::int32_t* ids = sh.candidate_ids;
  int size = 1;
  while (size < s) size *= 2;
  for (int i = s + static_cast<int>(threadIdx.x); i < size; i += static_cast<int>(blockDim.x)) {
    values[i] = kNegInf;
    ids[i] = 0x7fffffff;
  }
  __syncthreads();
  // A pair ends in ranks_before order in a leading run, reversed in a trailing one.
  bitonic_steps(size, [values, ids](int i, int j, bool leading) {
    const float va = values[i], vb = values[j];
    const std::int32_t a = ids[i], b = ids[j];
    if (leading ? ranks_before(vb, b, va, a) : ranks_before(va, a, vb, b)) {
      values[i] = vb;
      ids[i] = b;
      values[j] = va;
      ids[j] = a;
    }
  });
}

/// The list becomes the best min(k, kept + s) of its `kept` entries and the s candidates
/// (distinct tokens; `sorted`: already in ranks_before order), by merge positions: an entry's
/// place is the number of entries of both sides that rank before it. Returns the new size. Ends
/// with a barrier.
__device__ inline int merge_candidates(int kept, int s, bool sorted, int k, SplitTopKShared& sh) {
  if (!sorted && s > kSortCandidatesFrom) {
    sort_candidates(s, sh);
    sorted = true;
  }
  for (int i = threadIdx.x; i < kept; i += blockDim.x) {
    const float v = sh.list_values[i];
    const std::int32_t id = sh.list_ids[i];
    const int place =
        i + (sorted ? ranked_before_sorted(sh.candidate_values, sh.candidate_ids, s, v, id)
                    : ranked_before_any(sh.candidate_values, sh.candidate_ids, s, v, id, k - i));
    if (place < k) {
      sh.merged_values[place] = v;
      sh.merged_ids[place] = id;
    }
  }
  for (int j = threadIdx.x; j < s; j += blockDim.x) {
    const float v = sh.candidate_values[j];
    const std::int32_t id = sh.candidate_ids[j];
    const int in_list = ranked_before_sorted(sh.list_values, sh.list_ids, kept, v, id);
    if (in_list >= k) continue;
    const int place = in_list + (sorted ? j
                                        : ranked_before_any(sh.candidate_values, sh.candidate_ids,
                                                            s, v, id, k - in_list));
    if (place < k) {
      sh.merged_values[place] = v;
      sh.merged_ids[place] = id;
    }
  }
  __syncthreads();
  const int size = kept + s < k ? kept + s : k;
  for (int i = threadIdx.x; i < size; i += blockDim.x) {
    sh.list_values[i] = sh.merged_values[i];
    sh.list_ids[i] = sh.merged_ids[i];
  }
  __syncthreads();
  return size;
}

/// Four entries of a row from `first` (a multiple of 4) up to `end`, as floats: one 16-byte
/// load for a full group of an fp32 row whose groups are aligned (`vec`), else one by one.
template <class T>
__device__ __forceinline__ void load_group(Global<const T> row, std::int64_t first,
                                           std::int64_t end, bool vec, float (&x)[4]) {
  if constexpr (std::is_same_v<T, float>) {
    if (vec && first + 4 <= end) {
      const Vec<float, 4> v = row.template load_vec<4>(first);
      for (int lane = 0; lane < 4; ++lane) x[lane] = v.v[lane];
      return;
    }
  }
  for (int lane = 0; lane < 4; ++lane)
    x[lane] = first + lane < end ? load(row, first + lane) : 0.0f;
}

/// Below this k a warp first keeps only its best k entrants of a round (k rounds of a warp-wide
/// selection): the block's best k are among them, and the merge then ranks 16 k candidates, not
/// every entrant (the round that fills an empty list admits them all).
inline constexpr int kWarpSelectTopK = 32;

/// in[j] stays set only for the warp's best k entries (ids distinct, every set entry drawable)
/// among those with in[j] set, by k rounds of a warp-wide maximum in ranks_before order.
__device__ inline void warp_keep_best(const float (&v)[kRoundEntries],
                                      const std::int32_t (&id)[kRoundEntries],
                                      bool (&in)[kRoundEntries], int k) {
  bool chosen[kRoundEntries] = {};
  for (int round = 0; round < k; ++round) {
    int best = -1;  // this thread's best entry not yet chosen
    for (int j = 0; j < kRoundEntries; ++j) {
      if (in[j] && !chosen[j] && (best < 0 || ranks_before(v[j], id[j], v[best], id[best])))
        best = j;
    }
    bool has = best >= 0;
    float bv = has ? v[best] : 0.0f;
    std::int32_t bid = has ? id[best] : 0;
    for (int mask = 16; mask > 0; mask /= 2) {
      const bool other_has = __shfl_xor_sync(0xffffffffu, has ? 1 : 0, mask) != 0;
      const float ov = __shfl_xor_sync(0xffffffffu, bv, mask);
      const std::int32_t oid = __shfl_xor_sync(0xffffffffu, bid, mask);
      if (other_has && (!has || ranks_before(ov, oid, bv, bid))) {
        has = true;
        bv = ov;
        bid = oid;
      }
    }
    if (!has) break;  // the warp's entrants are all chosen (the same in every lane)
    if (best >= 0 && id[best] == bid) chosen[best] = true;
  }
  for (int j = 0; j < kRoundEntries; ++j) in[j] = chosen[j];
}

/// The block's best min(k, drawable) entries of row[begin, end) (begin a multiple of 4), ranked
/// by the values `values(first, x, v)` gives each group of four read, in the list of sh
/// (ranks_before order): rounds of 4 entries per thread, each entry kept only if it enters the
/// list. Returns the list's size. Ends with a barrier.
template <class Values, class T>
__device__ int block_top_k(Global<const T> row, std::int64_t begin, std::int64_t end, bool vec,
                           const Values& values, int k, SplitTopKShared& sh) {
  int kept = 0;
  const std::int64_t round = kRoundEntries * static_cast<std::int64_t>(blockDim.x);
  for (std::int64_t base = begin; base < end; base += round) {
    const std::int64_t first = base + kRoundEntries * static_cast<std::int64_t>(threadIdx.x);
    float v[4] = {};
    std::int32_t ids[4] = {};
    bool in[4] = {false, false, false, false};
    unsigned int local = 0;
    if (first < end) {
      float x[4];
      load_group(row, first, end, vec, x);
      values(first, x, v);
      for (int lane = 0; lane < 4; ++lane) {
        ids[lane] = static_cast<std::int32_t>(first + lane);
        in[lane] = first + lane < end && enters_list(v[lane], ids[lane], kept, k, sh);
      }
    }
    if (k < kWarpSelectTopK) warp_keep_best(v, ids, in, k);
    for (int lane = 0; lane < 4; ++lane) local += in[lane] ? 1u : 0u;
    unsigned int s = 0;
    unsigned int slot = block_scan_with_total(local, &s, sh.gather);
    for (int lane = 0; lane < 4; ++lane) {
      if (in[lane]) {
        sh.candidate_values[slot] = v[lane];
        sh.candidate_ids[slot] = static_cast<std::int32_t>(first + lane);
        ++slot;
      }
    }
    __syncthreads();
    if (s > 0u) kept = merge_candidates(kept, static_cast<int>(s), false, k, sh);
  }
  return kept;
}

}  // namespace specdec::backend::cuda_impl::detail
