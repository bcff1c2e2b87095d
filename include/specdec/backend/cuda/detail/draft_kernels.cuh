// SPDX-License-Identifier: MIT
// The batched drafting kernels: Gumbel-top-k (one block per row) and one stochastic-beam-search
// level (one block per beam, then one block per sequence), the semantics of draft/gumbel_topk.hpp
// and draft/stochastic_beam.hpp without sorting the vocabulary.
//
// A row's perturbed values (draft/drafting_rows.hpp's gumbel_perturbed, the CPU's per-entry math)
// go to a workspace row. The k best are found by a threshold search on order keys, as in
// warp_kernels.cuh: the k-th largest key is built bit by bit from the top with block-wide counts,
// and the ties at that key are taken in increasing tie order (token id) by the same bitwise search
// over tie values. The at most k winners are gathered into shared memory (a block prefix sum gives
// each thread its slots) and ranked there with the CPU's comparator. Beam candidates are selected
// the same way on 64-bit keys of their scores, ties by (parent, token).
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/draft/drafting_rows.hpp"

namespace specdec::backend::cuda_impl::detail {

using specdec::detail::BeamCandidate;

static_assert(sizeof(BeamCandidate) == sizeof(double) + sizeof(float) + 3 * sizeof(std::int32_t),
              "BeamCandidate has no padding: a device store writes every byte a copy reads");
template <>
inline constexpr bool kDense<BeamCandidate> = true;

/// Threads per block of the beam selection kernel (one block per sequence, W * W candidates).
inline constexpr int kBeamSelectThreads = 128;

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

/// Where the winners of a selection end: every item whose key is above `key`, and the items with
/// key `key` whose tie value is at most `last_tie`.
template <class U>
struct Cut {
  U key;
  std::uint64_t last_tie;
};

/// The cut of the `kk` best of n items by key decreasing, ties in increasing tie value, found by
/// the whole block. key_at(i) is 0 for an item that never wins; 1 <= kk <= the items with a
/// non-zero key. Tie values are distinct among items with equal keys and below 2^tie_bits.
template <class U, class KeyAt, class TieAt>
__device__ Cut<U> find_cut(const KeyAt& key_at, const TieAt& tie_at, int n, unsigned int kk,
                           int tie_bits, Shared& sh) {
  // The largest t with at least kk keys >= t: the kk-th largest key.
  U t = 0;
  for (int bit = static_cast<int>(8 * sizeof(U)) - 1; bit >= 0; --bit) {
    const U candidate = t | (U{1} << bit);
    unsigned int c = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) c += key_at(i) >= candidate ? 1u : 0u;
    if (block_all_reduce(c, Plus{}, sh.u) >= kk) t = candidate;
  }
  unsigned int above = 0, ties = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const U key = key_at(i);
    above += key > t ? 1u : 0u;
    ties += key == t ? 1u : 0u;
  }
  above = block_all_reduce(above, Plus{}, sh.u);
  ties = block_all_reduce(ties, Plus{}, sh.u);
  const unsigned int needed = kk - above;  // >= 1, as fewer than kk keys exceed t
  std::uint64_t last = ~std::uint64_t{0};
  if (needed < ties) {
    // The largest value with fewer than `needed` ties below it: the needed-th smallest tie.
    last = 0;
    for (int bit = tie_bits - 1; bit >= 0; --bit) {
      const std::uint64_t candidate = last | (std::uint64_t{1} << bit);
      unsigned int c = 0;
      for (int i = threadIdx.x; i < n; i += blockDim.x) {
        c += key_at(i) == t && tie_at(i) < candidate ? 1u : 0u;
      }
      if (block_all_reduce(c, Plus{}, sh.u) < needed) last = candidate;
    }
  }
  return {t, last};
}

/// Calls put(slot, i) for every winner i of `cut`, slots 0, 1, ... in increasing i (slots >= cap
/// are dropped). Ends with a barrier.
template <class U, class KeyAt, class TieAt, class Put>
__device__ void gather_winners(const KeyAt& key_at, const TieAt& tie_at, int n, const Cut<U>& cut,
                               unsigned int cap, const Put& put, GatherShared& sh) {
  const auto wins = [&](int i) {
    const U key = key_at(i);
    return key > cut.key || (key == cut.key && tie_at(i) <= cut.last_tie);
  };
  unsigned int local = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) local += wins(i) ? 1u : 0u;
  unsigned int slot = block_exclusive_scan(local, sh);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    if (wins(i)) {
      if (slot < cap) put(slot, i);
      ++slot;
    }
  }
  __syncthreads();
}

/// The ranking key of a perturbed value: its order key, 0 for an entry never drawn (-inf, NaN).
__device__ __forceinline__ std::uint32_t sample_key(float v) {
  return v > kNegInf ? order_key(v) : 0u;
}

struct PerturbedKey {
  Global<const float> perturbed;
  __device__ __forceinline__ std::uint32_t operator()(int i) const {
    return sample_key(perturbed[i]);
  }
};
struct IndexTie {
  __device__ __forceinline__ std::uint64_t operator()(int i) const {
    return static_cast<std::uint64_t>(i);
  }
};

struct TopKShared {
  Shared reduce;
  GatherShared gather;
  float values[kMaxDeviceTopK];
  std::int32_t ids[kMaxDeviceTopK];
  float sorted_values[kMaxDeviceTopK];
  std::int32_t sorted_ids[kMaxDeviceTopK];
};

/// perturbed[i] = gumbel_perturbed<kind>(row[i], stream.uniform(i)) for i < n, by the whole block
/// (one Philox block per four entries). Ends with a barrier.
template <RowKind kind, class T>
__device__ void perturb_row_block(Global<const T> row, int n, const RandomStream& stream,
                                  Global<float> perturbed) {
  const std::int64_t groups = (static_cast<std::int64_t>(n) + 3) / 4;
  for (std::int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    const specdec::detail::Uint4 bits = stream.block(static_cast<std::uint32_t>(g));
    for (int lane = 0; lane < 4; ++lane) {
      const std::int64_t i = 4 * g + lane;
      if (i < n) {
        perturbed[i] = specdec::detail::gumbel_perturbed<kind>(
            load(row, i), specdec::detail::bits_to_open_uniform(bits[lane]));
      }
    }
  }
  __syncthreads();
}

/// The kk = min(k, drawable entries) best perturbed values of a row (n entries at `perturbed`),
/// ranked by ranks_before into sh.sorted_values / sh.sorted_ids, by the whole block. Returns kk.
/// k <= kMaxDeviceTopK. Ends with a barrier.
__device__ inline int top_k_block(Global<const float> perturbed, int n, int k, TopKShared& sh) {
  const PerturbedKey key_at{perturbed};
  unsigned int drawable = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) drawable += key_at(i) != 0u ? 1u : 0u;
  drawable = block_all_reduce(drawable, Plus{}, sh.reduce.u);
  const unsigned int kk =
      drawable < static_cast<unsigned int>(k) ? drawable : static_cast<unsigned int>(k);
  if (kk == 0u) return 0;
  const Cut<std::uint32_t> cut = find_cut<std::uint32_t>(key_at, IndexTie{}, n, kk, 31, sh.reduce);
  gather_winners(
      key_at, IndexTie{}, n, cut, kk,
      [&](unsigned int slot, int i) {
        sh.values[slot] = perturbed[i];
        sh.ids[slot] = i;
      },
      sh.gather);
  for (int j = threadIdx.x; j < static_cast<int>(kk); j += blockDim.x) {
    const float v = sh.values[j];
    const std::int32_t id = sh.ids[j];
    int rank = 0;
    for (int l = 0; l < static_cast<int>(kk); ++l) {
      rank += specdec::detail::ranks_before(sh.values[l], sh.ids[l], v, id) ? 1 : 0;
    }
    sh.sorted_values[rank] = v;
    sh.sorted_ids[rank] = id;
  }
  __syncthreads();
  return static_cast<int>(kk);
}

/// One block per row r (blockIdx.x): Gumbel-top-k of row r (n entries of T at rows + r *
/// row_stride, kind `kind`) with streams[r], uniform x perturbing token x. perturbed_ws holds one
/// row of n floats per row. tokens / values (values may be null) get the min(k, drawable) samples
/// in sampling order, then -1 / -inf; counts[r] their number. k <= kMaxDeviceTopK.
template <RowKind kind, class T>
__global__ void __launch_bounds__(kWarpThreads)
    gumbel_top_k_kernel(Global<const T> rows, std::int64_t row_stride, int n, int k,
                        Global<const RandomStream> streams, Global<float> perturbed_ws,
                        Global<std::int32_t> tokens, std::int64_t token_stride,
                        Global<float> values, std::int64_t value_stride,
                        Global<std::int32_t> counts) {
  expect_block_threads(kWarpThreads);
  __shared__ TopKShared sh;
  const std::int64_t r = blockIdx.x;
  const Global<float> perturbed = perturbed_ws + r * n;
  perturb_row_block<kind>(rows + r * row_stride, n, streams[r], perturbed);
  const int got = top_k_block(perturbed, n, k, sh);
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    tokens[r * token_stride + j] = j < got ? sh.sorted_ids[j] : kNoToken;
    if (values != nullptr) values[r * value_stride + j] = j < got ? sh.sorted_values[j] : kNegInf;
  }
  if (threadIdx.x == 0) counts[r] = got;
}

/// BeamLevelArgs as the kernels see it: every matrix through a global-memory view.
struct BeamLevelViews {
  Global<const float> draft_rows;
  std::int64_t draft_stride;
  Global<const std::int32_t> beam_counts;
  Global<const std::int32_t> nodes;
  std::int64_t nodes_stride;
  Global<const float> log_probs;
  std::int64_t log_probs_stride;
  Global<const float> scores;
  std::int64_t scores_stride;
  Global<std::int32_t> next_parents;
  std::int64_t next_parents_stride;
  Global<std::int32_t> next_tokens;
  std::int64_t next_tokens_stride;
  Global<float> next_log_probs;
  std::int64_t next_log_probs_stride;
  Global<float> next_scores;
  std::int64_t next_scores_stride;
  Global<std::int32_t> next_counts;

  SPECDEC_HOST_DEVICE BeamLevelViews(const BeamLevelArgs& a)  // NOLINT: launch arguments convert
      : draft_rows(a.draft_rows),
        draft_stride(a.draft_stride),
        beam_counts(a.beam_counts),
        nodes(a.nodes),
        nodes_stride(a.nodes_stride),
        log_probs(a.log_probs),
        log_probs_stride(a.log_probs_stride),
        scores(a.scores),
        scores_stride(a.scores_stride),
        next_parents(a.next_parents),
        next_parents_stride(a.next_parents_stride),
        next_tokens(a.next_tokens),
        next_tokens_stride(a.next_tokens_stride),
        next_log_probs(a.next_log_probs),
        next_log_probs_stride(a.next_log_probs_stride),
        next_scores(a.next_scores),
        next_scores_stride(a.next_scores_stride),
        next_counts(a.next_counts) {}
};

/// A sequence's live beams, clamped to [0, width] (device beam counts are not validated).
__device__ __forceinline__ int live_beams(std::int32_t count, int width) {
  return count < 0 ? 0 : count > width ? width : count;
}

/// One block per beam (blockIdx.x = b * width + i): for i < beam_counts[b] (clamped to [0, W]),
/// the top-W children of beam i of sequence b by Gumbel-top-k of its probability row (draft row
/// b W + i, n entries) with streams[b].at_node(nodes(b, i) + 1), and for each child j the
/// candidate {truncated_gumbel(psi, phi + value_j, phi + value_0), phi + log row[t_j], i, t_j}
/// (phi = log_probs(b, i), psi = scores(b, i), in double as the CPU) at candidates[(b W + i) W +
/// j]; children[b W + i] gets their number (0 for a beam that is not live).
__global__ void __launch_bounds__(kWarpThreads)
    beam_expand_kernel(BeamLevelViews a, int width, int n, Global<const RandomStream> streams,
                       Global<float> perturbed_ws, Global<BeamCandidate> candidates,
                       Global<std::int32_t> children) {
  expect_block_threads(kWarpThreads);
  __shared__ TopKShared sh;
  const std::int64_t beam = blockIdx.x;
  const std::int64_t b = beam / width;
  const int i = static_cast<int>(beam % width);
  if (i >= live_beams(a.beam_counts[b], width)) {
    if (threadIdx.x == 0) children[beam] = 0;
    return;
  }
  const Global<const float> row = a.draft_rows + beam * a.draft_stride;
  const std::uint32_t node = static_cast<std::uint32_t>(a.nodes[b * a.nodes_stride + i]) + 1u;
  const Global<float> perturbed = perturbed_ws + beam * n;
  perturb_row_block<RowKind::kProbabilities>(row, n, streams[b].at_node(node), perturbed);
  const int got = top_k_block(perturbed, n, width, sh);
  const double phi = a.log_probs[b * a.log_probs_stride + i];
  const double psi = a.scores[b * a.scores_stride + i];
  const Global<BeamCandidate> out = candidates + beam * width;
  for (int j = threadIdx.x; j < got; j += blockDim.x) {
    const std::int32_t t = sh.sorted_ids[j];
    out[j] = specdec::detail::beam_candidate(phi, psi, sh.sorted_values[0], sh.sorted_values[j],
                                             row[t], i, t);
  }
  if (threadIdx.x == 0) children[beam] = got;
}

/// Candidate c = i * width + j of a sequence: its score's key when beam i drew a j-th child.
struct CandidateKey {
  Global<const BeamCandidate> candidates;
  Global<const std::int32_t> children;
  int width;
  __device__ __forceinline__ std::uint64_t operator()(int c) const {
    return c % width < children[c / width] ? specdec::detail::order_key64(candidates[c].score) : 0u;
  }
};
/// (parent, token), compared as one number: parent < 2^10, 0 <= token < 2^31.
struct CandidateTie {
  Global<const BeamCandidate> candidates;
  __device__ __forceinline__ std::uint64_t operator()(int c) const {
    return (static_cast<std::uint64_t>(candidates[c].parent) << 32) |
           static_cast<std::uint32_t>(candidates[c].token);
  }
};
inline constexpr int kCandidateTieBits = 42;
static_assert(kMaxDeviceTopK <= 1024, "CandidateTie holds parents below 2^10");

struct SelectShared {
  Shared reduce;
  GatherShared gather;
  BeamCandidate kept[kMaxDeviceTopK];
};

/// One block per sequence b (blockIdx.x): the W best candidates of its live beams by
/// beam_ranks_before (the CPU's keep_best), written best first to next_parents, next_tokens,
/// next_log_probs and next_scores (padded with -1 / -1 / -inf / -inf), their number to
/// next_counts[b].
__global__ void __launch_bounds__(kBeamSelectThreads)
    beam_select_kernel(BeamLevelViews a, int width, Global<const BeamCandidate> candidates,
                       Global<const std::int32_t> children) {
  expect_block_threads(kBeamSelectThreads);
  __shared__ SelectShared sh;
  const std::int64_t b = blockIdx.x;
  const std::int64_t w = width;
  const int m = live_beams(a.beam_counts[b], width) * width;
  const Global<const BeamCandidate> c = candidates + b * w * w;
  const CandidateKey key_at{c, children + b * w, width};
  unsigned int total = 0;
  for (int i = threadIdx.x; i < m; i += blockDim.x) total += key_at(i) != 0u ? 1u : 0u;
  total = block_all_reduce(total, Plus{}, sh.reduce.u);
  const int kept = total < static_cast<unsigned int>(width) ? static_cast<int>(total) : width;
  if (kept > 0) {
    const Cut<std::uint64_t> cut = find_cut<std::uint64_t>(
        key_at, CandidateTie{c}, m, static_cast<unsigned int>(kept), kCandidateTieBits, sh.reduce);
    gather_winners(
        key_at, CandidateTie{c}, m, cut, static_cast<unsigned int>(kept),
        [&](unsigned int slot, int i) { sh.kept[slot] = c[i]; }, sh.gather);
    for (int j = threadIdx.x; j < kept; j += blockDim.x) {
      const BeamCandidate mine = sh.kept[j];
      int rank = 0;
      for (int l = 0; l < kept; ++l) {
        rank += specdec::detail::beam_ranks_before(sh.kept[l], mine) ? 1 : 0;
      }
      a.next_parents[b * a.next_parents_stride + rank] = mine.parent;
      a.next_tokens[b * a.next_tokens_stride + rank] = mine.token;
      a.next_log_probs[b * a.next_log_probs_stride + rank] = mine.log_prob;
      a.next_scores[b * a.next_scores_stride + rank] = static_cast<float>(mine.score);
    }
  }
  for (int j = kept + static_cast<int>(threadIdx.x); j < width; j += blockDim.x) {
    a.next_parents[b * a.next_parents_stride + j] = -1;
    a.next_tokens[b * a.next_tokens_stride + j] = kNoToken;
    a.next_log_probs[b * a.next_log_probs_stride + j] = kNegInf;
    a.next_scores[b * a.next_scores_stride + j] = kNegInf;
  }
  if (threadIdx.x == 0) a.next_counts[b] = kept;
}

}  // namespace specdec::backend::cuda_impl::detail
