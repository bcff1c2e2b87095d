// SPDX-License-Identifier: MIT
// A block's best k entries of a range of a row, without sorting it: each thread reads four
// entries a round and keeps those that rank before the list's last (ranks_before: larger value,
// ties to the lower id) as its own sorted list of four; the threads' lists are merged eight at a
// time by merge positions (merge_sorted_lists), and the round's best into the block's list. Gumbel-top-k and the beam level rank
// perturbed entries (draft_kernels.cuh), the statistics path's top-k rows their logits
// (top_k_cut.cuh).
// IWYU pragma: private
#pragma once

#include <cstdint>
#include <type_traits>

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

/// The most lists merge_sorted_lists takes at once.
inline constexpr int kMaxMergedLists = 1024;

/// A block's running top-k list (ranks_before order), the candidates of a round and the merge
/// buffer, in shared memory.
struct SplitTopKShared {
  Shared reduce;
  int list_counts[kMaxMergedLists];  // merge_sorted_lists: each list's entries
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

/// How many of the n entries of a list in ranks_before order rank before (v, id): a binary search
/// whose steps select rather than branch.
__device__ __forceinline__ int ranked_before_sorted(const float* values, const std::int32_t* ids,
                                                    int n, float v, std::int32_t id) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    const float vm = values[mid];
    const bool before = (vm > v) | ((vm == v) & (ids[mid] < id));  // ranks_before, unbranched
    lo = before ? mid + 1 : lo;
    hi = before ? hi : mid;
  }
  return lo;
}

/// Whether perturbed value v of token id enters a list of `kept` of at most k: it is drawable
/// (not -inf or NaN, as the CPU's heap) and, once the list is full, ranks before its last.
__device__ __forceinline__ bool enters_list(float v, std::int32_t id, int kept, int k,
                                            const SplitTopKShared& sh) {
  if (!(v > kNegInf)) return false;
  return kept < k || ranks_before(v, id, sh.list_values[k - 1], sh.list_ids[k - 1]);
}

/// Lists merged at once by merge_sorted_lists: an entry ranks itself against the other
/// kMergeGroup - 1 lists of its group (4: the fewest steps in the latency model, against 2, 8, 16).
inline constexpr int kMergeGroup = 4;

/// `lists` lists side by side in sh's candidates, list l at [l * length, ..) holding
/// sh.list_counts[l] <= length distinct entries in ranks_before order, become one: the best
/// min(k, all) entries in ranks_before order from candidate 0. Level by level, groups of
/// kMergeGroup lists are merged by merge positions: an entry's place in its group's list is its
/// index plus the entries of the group's other lists that rank before it (a binary search in
/// each), so no entry waits on a sort and a list's unused slots are never read. lists <=
/// kMaxMergedLists, lists * length <= kRoundEntries * blockDim.x. Returns the entries kept. By the
/// whole block; ends with a barrier.
__device__ inline int merge_sorted_lists(int lists, int length, int k, SplitTopKShared& sh) {
  float* values = sh.candidate_values;
  std::int32_t* ids = sh.candidate_ids;
  int* counts = sh.list_counts;
  while (lists > 1) {
    const int group = lists < kMergeGroup ? lists : kMergeGroup;
    const int groups = (lists + group - 1) / group;
    const int out_length = k < group * length ? k : group * length;
    int place[kRoundEntries];
    float v[kRoundEntries];
    std::int32_t id[kRoundEntries];
    for (int j = 0; j < kRoundEntries; ++j) {
      // Entries taken index-major (every list's first entry, then every second, ...), so the
      // few entries of sparse lists, at their fronts, fall to different threads.
      const int q = j * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
      const int list = q % lists, first = list - list % group;
      int p = q / lists;
      place[j] = -1;
      if (q >= lists * length || p >= counts[list]) continue;
      v[j] = values[list * length + p];
      id[j] = ids[list * length + p];
      for (int l = first; l < first + group && l < lists && p < out_length; ++l) {
        if (l != list) p += ranked_before_sorted(values + l * length, ids + l * length, counts[l],
                                                 v[j], id[j]);
      }
      if (p < out_length) place[j] = list / group * out_length + p;
    }
    int merged = 0;  // thread g < groups: its group's entries kept
    if (static_cast<int>(threadIdx.x) < groups) {
      const int first = static_cast<int>(threadIdx.x) * group;
      for (int l = first; l < first + group && l < lists; ++l) merged += counts[l];
      merged = merged < out_length ? merged : out_length;
    }
    __syncthreads();
    for (int j = 0; j < kRoundEntries; ++j) {
      if (place[j] >= 0) {
        values[place[j]] = v[j];
        ids[place[j]] = id[j];
      }
    }
    if (static_cast<int>(threadIdx.x) < groups) counts[threadIdx.x] = merged;
    __syncthreads();
    lists = groups;
    length = out_length;
  }
  return counts[0] < k ? counts[0] : k;
}

/// The list becomes the best min(k, kept + s) of its `kept` entries and the s candidates
/// (distinct tokens in ranks_before order, from candidate 0), by merge positions: an entry's place
/// is the number of entries of both sides that rank before it. Returns the new size. Ends with a
/// barrier.
__device__ inline int merge_candidates(int kept, int s, int k, SplitTopKShared& sh) {
  // An entry of either side goes to its index plus the other side's entries ranking before it.
  const auto place_side = [&](const float* values, const std::int32_t* ids, int n,
                              const float* other_values, const std::int32_t* other_ids,
                              int other_n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      const int place =
          i + ranked_before_sorted(other_values, other_ids, other_n, values[i], ids[i]);
      if (place < k) {
        sh.merged_values[place] = values[i];
        sh.merged_ids[place] = ids[i];
      }
    }
  };
  place_side(sh.list_values, sh.list_ids, kept, sh.candidate_values, sh.candidate_ids, s);
  place_side(sh.candidate_values, sh.candidate_ids, s, sh.list_values, sh.list_ids, kept);
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

/// Orders a thread's four entries in ranks_before order (a sorting network).
__device__ __forceinline__ void sort_four(float (&v)[kRoundEntries],
                                          std::int32_t (&id)[kRoundEntries]) {
  constexpr int kPairs[5][2] = {{0, 1}, {2, 3}, {0, 2}, {1, 3}, {1, 2}};
  for (const auto& pair : kPairs) {
    const int a = pair[0], b = pair[1];
    if (ranks_before(v[b], id[b], v[a], id[a])) {
      const float tv = v[a];
      const std::int32_t tid = id[a];
      v[a] = v[b];
      id[a] = id[b];
      v[b] = tv;
      id[b] = tid;
    }
  }
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
    if (first < end) {
      float x[4];
      load_group(row, first, end, vec, x);
      values(first, x, v);
      for (int lane = 0; lane < 4; ++lane) {
        ids[lane] = static_cast<std::int32_t>(first + lane);
        in[lane] = first + lane < end && enters_list(v[lane], ids[lane], kept, k, sh);
      }
    }
    // The thread's entrants as a sorted list at candidates [4 t, 4 t + 4) (the others after it).
    int entrants = 0;
    for (int lane = 0; lane < 4; ++lane) {
      entrants += in[lane] ? 1 : 0;
      if (!in[lane]) v[lane] = kNegInf;  // ranks after every entrant
    }
    sort_four(v, ids);
    __syncthreads();  // the last round's candidates are read
    for (int lane = 0; lane < 4; ++lane) {
      sh.candidate_values[4 * threadIdx.x + lane] = v[lane];
      sh.candidate_ids[4 * threadIdx.x + lane] = ids[lane];
    }
    sh.list_counts[threadIdx.x] = entrants;
    __syncthreads();
    const int s = merge_sorted_lists(static_cast<int>(blockDim.x), 4, k, sh);
    if (s > 0) kept = merge_candidates(kept, s, k, sh);
  }
  return kept;
}

}  // namespace specdec::backend::cuda_impl::detail
