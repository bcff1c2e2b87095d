// SPDX-License-Identifier: MIT
// The batched drafting kernels: Gumbel-top-k (a row split over blocks of whole tiles) and one
// stochastic-beam-search level (the same split per beam, then one block per sequence), the
// semantics of draft/gumbel_topk.hpp and draft/stochastic_beam.hpp without sorting the vocabulary.
//
// Each block reads its tiles once, perturbing each entry as it is read (the CPU's per-entry math,
// draft/drafting_rows.hpp's gumbel_perturbed, with the same draws by token id), and keeps its best
// k in shared memory: an entry enters only if it ranks before the list's last (ranks_before:
// larger value, ties to the lower id), and each round's entrants are merged in by merge
// positions. The blocks of a row write their lists to the workspace; the last to finish (a fence,
// then a per-row counter) merges them in block order, so the result is the CPU's whatever the
// block order. No perturbed row is written. Beam candidates are selected by a threshold search on
// 64-bit keys of their scores, ties by (parent, token).
// IWYU pragma: private
#pragma once

#include <cstdint>
#include <type_traits>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/block_top_k.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/last_block.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
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

/// The per-block lists of a row split in the workspace: block y of row r keeps its best k at
/// values / ids [(r * S + y) * k, + k), their number at counts[r * S + y]; counters[r] counts
/// the blocks of row r that have finished (zeroed before the launch).
struct TopKLists {
  Global<float> values;
  Global<std::int32_t> ids;
  Global<std::int32_t> counts;
  Global<unsigned int> counters;
};

/// Gumbel-top-k's ranking values of a group of four entries from `first` (a multiple of 4):
/// uniform x of `stream` perturbs token x.
template <RowKind kind>
struct GumbelValues {
  RandomStream stream;
  __device__ __forceinline__ void operator()(std::int64_t first, const float (&x)[4],
                                             float (&v)[4]) const {
    const specdec::detail::Uint4 bits = stream.block(static_cast<std::uint32_t>(first / 4));
    for (int lane = 0; lane < 4; ++lane) {
      v[lane] = specdec::detail::gumbel_perturbed<kind>(
          x[lane], specdec::detail::bits_to_open_uniform(bits[lane]));
    }
  }
};

/// The last block of a row: the lists of the row's `blocks` blocks (from slot `first_slot` of
/// `lists`, each in ranks_before order) merged into sh's list, as many whole lists at a time as
/// the candidates hold (merge_sorted_lists, slots strided over the threads, so loads are
/// coalesced). Ranking is a strict order (ties by id), so the best k of the union is the CPU's
/// whatever the order the blocks finished in. Returns its size. Ends with a barrier.
__device__ inline int merge_block_lists(const TopKLists& lists, std::int64_t first_slot,
                                        int blocks, int k, SplitTopKShared& sh) {
  int kept = 0;
  // Whole lists a round: as many as merge_sorted_lists takes, one at least (k <= the candidates).
  const int fit = kRoundEntries * static_cast<int>(blockDim.x) / k;
  const int per_round = fit < 1 ? 1 : fit < kMaxMergedLists ? fit : kMaxMergedLists;
  for (int first = 0; first < blocks; first += per_round) {
    const int count = blocks - first < per_round ? blocks - first : per_round;
    __syncthreads();  // the last round's candidates are read
    for (int e = threadIdx.x; e < count * k; e += blockDim.x) {
      const std::int64_t slot = first_slot + first + e / k;
      const int i = e % k;
      const int listed = lists.counts[slot];
      if (i == 0) sh.list_counts[e / k] = listed;
      if (i < listed) {
        sh.candidate_values[e] = lists.values[slot * k + i];
        sh.candidate_ids[e] = lists.ids[slot * k + i];
      }
    }
    __syncthreads();
    const int s = merge_sorted_lists(count, k, k, sh);
    if (s > 0) kept = merge_candidates(kept, s, k, sh);
  }
  __syncthreads();
  return kept;
}

/// A row of `n` entries as the blocks of a row split take it: `tiles_per_block` tiles of
/// kRowSplitTile entries each; `vec`: fp32 entries whose groups of four are 16-byte aligned.
struct SplitRow {
  int n = 0;
  int tiles_per_block = 1;
  bool vec = false;
};

/// Where gumbel_top_k_kernel writes row r: tokens[r * token_stride ..] and (values may be null)
/// values[r * value_stride ..], k each, and counts[r].
struct TopKOutputs {
  Global<std::int32_t> tokens{};
  std::int64_t token_stride = 0;
  Global<float> values{};
  std::int64_t value_stride = 0;
  Global<std::int32_t> counts{};
};

/// Gumbel-top-k of one row (`split`) by the blocks blockIdx.y = 0 .. gridDim.y - 1 of a row split:
/// each block keeps its best k of its tiles, writes them to `lists` and counts itself done; the
/// last block of the row merges the lists (the CPU's ranking whatever the order blocks finish in).
/// Returns the row's list size in that last block (the list in sh), -1 in the others. A single
/// block writes no list.
template <RowKind kind, class T>
__device__ int split_top_k(Global<const T> row, const SplitRow& split, const RandomStream& stream,
                           int k, const TopKLists& lists, std::int64_t row_index,
                           SplitTopKShared& sh) {
  const std::int64_t tile = kRowSplitTile;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * split.tiles_per_block * tile;
  const std::int64_t stop = begin + split.tiles_per_block * tile;
  const int kept = block_top_k(row, begin, stop < split.n ? stop : split.n, split.vec,
                               GumbelValues<kind>{stream}, k, sh);
  const int blocks = static_cast<int>(gridDim.y);
  if (blocks == 1) return kept;
  const std::int64_t slot = row_index * blocks + blockIdx.y;
  for (int j = threadIdx.x; j < kept; j += blockDim.x) {
    lists.values[slot * k + j] = sh.list_values[j];
    lists.ids[slot * k + j] = sh.list_ids[j];
  }
  if (threadIdx.x == 0) lists.counts[slot] = kept;
  if (!last_block_of_row(lists.counters, row_index, blocks, sh.flag)) return -1;
  return merge_block_lists(lists, row_index * blocks, blocks, k, sh);
}

/// Thread 0's `stream` for every thread of the block (one load of it, not one per thread).
__device__ inline RandomStream broadcast_stream(const RandomStream& stream, SplitTopKShared& sh) {
  if (threadIdx.x == 0) memcpy(sh.stream, &stream, sizeof(RandomStream));
  __syncthreads();
  RandomStream out;
  memcpy(&out, sh.stream, sizeof(RandomStream));
  return out;
}

/// Grid (rows, S): block (r, y) takes tiles [y tpb, (y + 1) tpb) of row r (`split`, entries of
/// T at rows + r * row_stride, kind `kind`) with streams[r], uniform x perturbing token x
/// (split_top_k). The last block of row r writes `out`'s tokens / values: the min(k, drawable)
/// samples in sampling order, then -1 / -inf; counts[r] their number. k <= kMaxDeviceTopK.
template <RowKind kind, class T>
__global__ void __launch_bounds__(kWarpThreads)
    gumbel_top_k_kernel(Global<const T> rows, std::int64_t row_stride, SplitRow split, int k,
                        Global<const RandomStream> streams, TopKLists lists, TopKOutputs out) {
  expect_block_threads(kWarpThreads);
  __shared__ SplitTopKShared sh;
  const std::int64_t r = blockIdx.x;
  RandomStream mine{};
  if (threadIdx.x == 0) mine = streams[r];
  const RandomStream stream = broadcast_stream(mine, sh);
  const int got = split_top_k<kind>(rows + r * row_stride, split, stream, k, lists, r, sh);
  if (got < 0) return;
  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    out.tokens[r * out.token_stride + j] = j < got ? sh.list_ids[j] : kNoToken;
    if (out.values != nullptr)
      out.values[r * out.value_stride + j] = j < got ? sh.list_values[j] : kNegInf;
  }
  if (threadIdx.x == 0) out.counts[r] = got;
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

/// What thread 0 reads once for a beam's blocks: its live flag, path log probability and score.
struct BeamShared {
  int live;
  float phi;
  float psi;
};

/// Grid (B W, S): the blocks of beam blockIdx.x = b * width + i split its draft row (row b W + i,
/// `split`). For i < beam_counts[b] (clamped to [0, W]) they find its top-W children by
/// Gumbel-top-k with
/// streams[b].at_node(nodes(b, i) + 1) (split_top_k), and the last of them writes for each child j
/// the candidate {truncated_gumbel(psi, phi + value_j, phi + value_0), phi + log row[t_j], i, t_j}
/// (phi = log_probs(b, i), psi = scores(b, i), in double as the CPU) at candidates[(b W + i) W +
/// j] and their number at children[b W + i] (0 for a beam that is not live).
__global__ void __launch_bounds__(kWarpThreads)
    beam_expand_kernel(BeamLevelViews a, int width, SplitRow split,
                       Global<const RandomStream> streams, TopKLists lists,
                       Global<BeamCandidate> candidates, Global<std::int32_t> children) {
  expect_block_threads(kWarpThreads);
  __shared__ SplitTopKShared sh;
  __shared__ BeamShared beam_sh;
  const std::int64_t beam = blockIdx.x;
  const std::int64_t b = beam / width;
  const int i = static_cast<int>(beam % width);
  RandomStream mine{};
  if (threadIdx.x == 0) {
    beam_sh.live = i < live_beams(a.beam_counts[b], width) ? 1 : 0;
    if (beam_sh.live != 0) {
      const auto node = static_cast<std::uint32_t>(a.nodes[b * a.nodes_stride + i]) + 1u;
      mine = streams[b].at_node(node);
      beam_sh.phi = a.log_probs[b * a.log_probs_stride + i];
      beam_sh.psi = a.scores[b * a.scores_stride + i];
    }
  }
  const RandomStream stream = broadcast_stream(mine, sh);
  if (beam_sh.live == 0) {
    if (threadIdx.x == 0 && blockIdx.y == 0) children[beam] = 0;
    return;
  }
  const Global<const float> row = a.draft_rows + beam * a.draft_stride;
  const int got = split_top_k<RowKind::kProbabilities>(row, split, stream, width, lists, beam, sh);
  if (got < 0) return;
  const double phi = beam_sh.phi;
  const double psi = beam_sh.psi;
  const Global<BeamCandidate> out = candidates + beam * width;
  for (int j = threadIdx.x; j < got; j += blockDim.x) {
    const std::int32_t t = sh.list_ids[j];
    out[j] = specdec::detail::beam_candidate(phi, psi, sh.list_values[0], sh.list_values[j],
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
