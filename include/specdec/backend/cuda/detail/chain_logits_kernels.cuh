// SPDX-License-Identifier: MIT
// The last launch of the chain step from logits: one block per sequence, on the statistics the
// first launches left (row_stats_kernels.cuh, nucleus_kernels.cuh). The accept tests read p(x) and
// q(x) at the drafted tokens only; the correction at a rejection and the bonus token are drawn,
// with the CPU's blocked sums and inverse-CDF walk (row_draw.cuh), from rows recomputed entry by
// entry from the logits and never written, or for a cut row (top-p, top-k, min-p) from its listed
// kept entries. So a sequence gets verify_chain_logits's tokens bit for bit; an uncut row is read
// once more only where a draw needs it, a cut row not again.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/last_block.cuh"
#include "specdec/backend/cuda/detail/nucleus_list.cuh"
#include "specdec/backend/cuda/detail/row_draw.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/detail/status_write.cuh"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/core/warp/stats.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec::backend::cuda_impl::detail {

/// A warped row recomputed from its logits: warped_probability of every entry.
template <class T>
struct WarpedLogitValue {
  Global<const T> logits;
  specdec::detail::WarpStats stats;
  __device__ __forceinline__ float operator()(std::int64_t i) const {
    return specdec::detail::warped_probability(stats, specdec::detail::to_float(logits[i]), i);
  }
  __device__ __forceinline__ Global<const T> source() const { return logits; }
  __device__ __forceinline__ float map(float logit, std::int64_t i) const {
    return specdec::detail::warped_probability(stats, logit, i);
  }
};

/// A warped row given as fp32 probabilities in global memory (no statistics: stats.greedy = -1).
struct ProbabilityRowValue {
  Global<const float> row;
  specdec::detail::WarpStats stats;
  __device__ __forceinline__ float operator()(std::int64_t i) const { return row[i]; }
  __device__ __forceinline__ Global<const float> source() const { return row; }
  __device__ __forceinline__ float map(float x, std::int64_t) const { return x; }
};

/// The residual [p - q]+ of two warped rows; a whole block is read by 16-byte loads of both.
template <class Row>
struct ResidualOfRows {
  Row target;
  Row draft;
  __device__ __forceinline__ float operator()(std::int64_t i) const {
    return specdec::detail::scaled_residual(target(i), 1.0f, draft(i));
  }
  template <class Sync>
  __device__ void fill(std::int64_t b, std::int64_t e, float* buf, int rank, int size,
                       const Sync&) const {
    if (e - b == kSumBlock && size >= 32 && target.source().vector_aligned(b) &&
        draft.source().vector_aligned(b)) {
      fill_whole_block(target.source(), draft.source(), b, buf, rank, size,
                       [this](float p, float q, std::int64_t i) {
                         return specdec::detail::scaled_residual(target.map(p, i), 1.0f,
                                                                 draft.map(q, i));
                       });
      return;
    }
    for (std::int64_t i = rank; i < e - b; i += size) buf[i] = (*this)(b + i);
  }
};

/// A cut row held as its kept entries (the list the nucleus kernel left: kept_keys, ids ascending,
/// with a top-p row's softmax probabilities, or the warped ones of a row cut by top-k or min-p),
/// read as the warped row: the listed value times `inv_kept` (list_scale) there, +0 elsewhere; with
/// `residual`, as [that - q]+ with q the draft's warped row at the same ids. The CPU's SparseRow:
/// its sums and draws are those of the written row, and the logits are not read again (q only at
/// the nucleus's ids). The draws index a chunk of the row first (`starts`, in shared memory: each
/// 1024-entry block's first listed entry), so a block is filled without a search, and one listing
/// few entries is summed from them alone.
template <class Row>
struct NucleusRow {
  Global<const std::uint64_t> list;
  std::int64_t count;
  float inv_kept;
  bool residual;
  Row q;
  int* starts;

  static constexpr std::int64_t kChunk = static_cast<std::int64_t>(kSumBlock) * kDrawThreads;

  __device__ __forceinline__ std::int64_t id_at(std::uint64_t key) const {
    return static_cast<std::int64_t>(0xffffffffu - static_cast<std::uint32_t>(key >> 32));
  }
  __device__ __forceinline__ float value_at(std::uint64_t key) const {
    const float p = specdec::detail::bits_float(static_cast<std::uint32_t>(key)) * inv_kept;
    return residual ? specdec::detail::scaled_residual(p, 1.0f, q(id_at(key))) : p;
  }
  /// The block of the chunk at `base` holding listed entry j: -1 before the chunk, kDrawThreads
  /// after it.
  __device__ __forceinline__ int block_of(std::int64_t j, std::int64_t base) const {
    if (j < 0) return -1;
    const std::int64_t at = id_at(list[j]) - base;
    if (at < 0) return -1;
    return at >= kChunk ? kDrawThreads : static_cast<int>(at / kSumBlock);
  }
  /// starts[k] = the first listed entry whose id is at least base + 1024 k (k <= kDrawThreads),
  /// by the whole block: each listed entry fills the slots between its block and the previous
  /// entry's.
  __device__ void index_chunk(std::int64_t base, int* table) const {
    for (int k = static_cast<int>(threadIdx.x); k <= kDrawThreads;
         k += static_cast<int>(blockDim.x)) {
      table[k] = static_cast<int>(count);
    }
    __syncthreads();
    for (std::int64_t first = 0; first < count; first += blockDim.x) {
      const std::int64_t j = first + threadIdx.x;
      const int block = j < count ? block_of(j, base) : kDrawThreads;
      int previous = __shfl_up_sync(0xffffffffu, block, 1);  // one read of each entry
      if (threadIdx.x % 32 == 0) previous = j < count ? block_of(j - 1, base) : kDrawThreads;
      for (int k = previous + 1; k <= block; ++k) table[k] = static_cast<int>(j);
    }
  }
  __device__ __forceinline__ int block_slot(std::int64_t b) const {
    return static_cast<int>((b % kChunk) / kSumBlock);
  }
  /// How many entries the block at b lists.
  __device__ __forceinline__ int listed(std::int64_t b) const {
    const int k = block_slot(b);
    return starts[k + 1] - starts[k];
  }
  /// detail::block_sum of the block [b, e) by a warp from its listed entries alone (the zeros
  /// between them leave the CPU's sums as they are): lane j < 8 adds those at offsets j mod 8
  /// in order, lane 0 the tail first, then the lanes' sums, as warp_block_sum does.
  __device__ float sparse_sum(std::int64_t b, std::int64_t e) const {
    constexpr int kLanes = specdec::detail::kBlockedSumLanes;
    const int lane = static_cast<int>(threadIdx.x) % 32, k = block_slot(b);
    const std::int64_t whole = (e - b) / kLanes * kLanes;
    float partial = 0.0f, block = 0.0f;
    if (lane < kLanes) {
      for (int j = starts[k]; j < starts[k + 1]; ++j) {
        const std::uint64_t key = list[j];
        const std::int64_t at = id_at(key) - b;
        if (at < whole && at % kLanes == lane) partial += value_at(key);
        if (at >= whole && lane == 0) block += value_at(key);
      }
    }
    for (int j = 0; j < kLanes; ++j) block += __shfl_sync(0xffffffffu, partial, j);
    return __shfl_sync(0xffffffffu, block, 0);  // lane 0 added the tail
  }
  template <class Sync>
  __device__ void fill(std::int64_t b, std::int64_t e, float* buf, int rank, int size,
                       const Sync& sync) const {
    const int k = block_slot(b);
    for (std::int64_t i = rank; i < e - b; i += size) buf[i] = 0.0f;
    sync();
    for (std::int64_t j = starts[k] + rank; j < starts[k + 1]; j += size) {
      const std::uint64_t key = list[j];
      buf[id_at(key) - b] = value_at(key);
    }
  }
  __device__ std::int64_t last_positive(std::int64_t) const {
    for (std::int64_t j = count - 1; j >= 0; --j) {
      const std::uint64_t key = list[j];
      if (value_at(key) > 0.0f) return id_at(key);
    }
    return 0;
  }
};

/// What a listed row's entries are multiplied by: 1 / the nucleus's mass for a row cut by top-p
/// alone (its list holds softmax probabilities), else 1 (the list of a row cut by top-k or min-p
/// holds its warped probabilities).
__device__ __forceinline__ float list_scale(const specdec::detail::WarpStats& s) {
  return s.top_k_last >= 0 || s.min_p_threshold > 0.0f ? 1.0f : s.inv_top_p_kept;
}

/// sample_row(value, n, u) (the CPU's draw) for a row that may be one-hot, or held as its
/// kept entries (`nucleus` entries listed).
template <class Row>
__device__ int draw_warped(const Row& row, Global<const std::uint64_t> list, std::int64_t nucleus,
                           std::int64_t n, float u, DrawShared& sh, bool sums_ready = false) {
  if (row.stats.greedy >= 0) return static_cast<int>(row.stats.greedy);
  if (nucleus > 0) {
    return exact_sample_row(
        NucleusRow<Row>{list, nucleus, list_scale(row.stats), false, row, sh.starts}, n, u, sh);
  }
  return exact_sample_row(row, n, u, sh, sums_ready);
}

/// draw_correction's rule on `residual`, with p (listed when nucleus > 0) the fallback;
/// `sums_ready`: sh.sums already holds the residual's block sums (a row of one chunk).
template <class Row, class Residual>
__device__ int draw_residual(const Residual& residual, const Row& p,
                             Global<const std::uint64_t> list, std::int64_t nucleus, std::int64_t n,
                             float u, DrawShared& sh, bool sums_ready) {
  constexpr std::int64_t kChunk = specdec::detail::kBlockedSumBlock * kDrawThreads;
  double mass;
  if (n <= kChunk) {
    // One chunk: the block sums stay in shared memory for the draw, which then reads only the
    // block it scans.
    const int count = sums_ready ? static_cast<int>((n + kSumBlock - 1) / kSumBlock)
                                 : chunk_sums(residual, n, 0, sh);
    mass = 0.0;
    for (int k = 0; k < count; ++k) mass += sh.sums[k];
    if (mass >= kResidualFloor && mass > 0.0) return sample_from_sums(residual, n, u, sh);
  } else {
    mass = exact_row_sum(residual, n, sh);
    if (mass >= kResidualFloor && mass > 0.0) return exact_sample_row(residual, n, u, sh);
  }
  return draw_warped(p, list, nucleus, n, u, sh);
}

/// The correction after a rejection: the residual [p - q]+ when its mass reaches the floor, else
/// the target row (rejection_correction_filled's and rejection_correction_sparse's rule and
/// draws); `nucleus` > 0: p is held as its nucleus, listed.
template <class Row>
__device__ int draw_correction(const Row& p, const Row& q, Global<const std::uint64_t> list,
                               std::int64_t nucleus, std::int64_t n, float u, DrawShared& sh,
                               bool sums_ready = false) {
  if (nucleus > 0) {
    return draw_residual(NucleusRow<Row>{list, nucleus, list_scale(p.stats), true, q, sh.starts}, p,
                         list, nucleus, n, u, sh, false);
  }
  return draw_residual(ResidualOfRows<Row>{p, q}, p, list, 0, n, u, sh, sums_ready);
}

static_assert(kRowSplitTile == kSumBlock, "a row's tiles are the draw's blocks");

/// How the last launch of a chain step from logits splits a draw from a whole row (no cut) over
/// blocks: as row_split shares a row's tiles (1024-entry blocks, the draw's blocks) among enough
/// blocks to fill the GPU, for rows of one chunk (whose block sums shared memory holds); one
/// block per sequence otherwise.
inline RowSplit draw_split(std::int64_t batch, std::int64_t vocab, int sm_count) {
  const RowSplit split = row_split(batch, vocab, sm_count);
  if (split.tiles <= kDrawThreads) return split;
  return RowSplit{.tiles = split.tiles, .tiles_per_block = split.tiles, .blocks_per_row = 1};
}

/// The fewest 1024-entry blocks a cut row (top-p, top-k, min-p) must span for its draw to be
/// split too, recomputing the row from its logits with the cut as a predicate entry by entry:
/// on shorter rows the one block's draw from the listed entries is short and reads no logit again.
inline constexpr std::int64_t kSplitCutTiles = 24;

/// Standard rejection sampling of every sequence (blockIdx.x = b) of a chain batch. kLogits: rows
/// of logits of type T whose statistics are in `stats` (target rows first, `target_rows` of
/// them, then the draft rows); else warped fp32 rows (T = float; stats, lists and counts null).
/// Draws are those of specdec::verify_chain_batch: position i uses streams[b].at_position(position
/// + i), draw 0 tests and draw 1 corrects; the bonus is draw 0 at position + gamma. emitted gets
/// the tokens then -1 padding, accepted[b] the count. A sequence with a draft token outside
/// [0, n), an invalid row, or a token of draft probability 0 at a tested position (what the CPU
/// reports as bad input) gets accepted[b] = -1 and only -1 tokens.
///
/// With gridDim.y > 1 (draw_split; kLogits only) every block of a sequence makes its accept
/// tests; a draw from a whole row (no cut, or a cut row of kSplitCutTiles blocks or more, its
/// cut a predicate entry by entry) is then split: block y sums its share of the row's
/// 1024-entry blocks into draw_sums[b * tiles ..] (tiles = the row's blocks), and the last block
/// to finish (draw_counters[b], 0 at launch and after) draws from those sums, reading only the
/// block it scans. Any other step is made by block 0 alone.
template <class T, bool kLogits = true>
__global__ void __launch_bounds__(kDrawThreads)
    chain_finish_kernel(LogitRowSet<T> rows, std::int64_t n, Global<const RowStats> stats,
                        Global<std::uint64_t> lists, Global<const unsigned int> nucleus_counts,
                        Global<const std::int32_t> offsets, Global<const std::int32_t> tokens,
                        Global<const RandomStream> streams, Global<std::int32_t> emitted,
                        Global<std::int32_t> accepted, Global<float> draw_sums = {},
                        Global<unsigned int> draw_counters = {},
                        Global<std::int32_t> status = {}) {
  expect_block_threads(kDrawThreads);
  __shared__ DrawShared sh;
  const std::int64_t b = blockIdx.x;
  // The sequence's offsets and stream, read by one thread for the block.
  __shared__ std::int32_t sequence_offsets[2];
  __shared__ RandomStream sequence_stream;
  if (threadIdx.x == 0) {
    sequence_offsets[0] = offsets[b];
    sequence_offsets[1] = offsets[b + 1];
    sequence_stream = streams[b];
  }
  __syncthreads();
  const std::int64_t first_draft = sequence_offsets[0];
  const int gamma = static_cast<int>(sequence_offsets[1] - first_draft);
  const std::int64_t first_target = first_draft + b;
  const RandomStream stream = sequence_stream;
  const Global<std::int32_t> out = emitted + first_target;
  // A row's statistics (and how many entries its nucleus lists), read by one thread for the
  // block.
  __shared__ RowStats row_stats[2];
  __shared__ unsigned int nucleus;
  const auto load_stats = [&](std::int64_t target_row, std::int64_t draft_row) {
    __syncthreads();
    if (threadIdx.x == 0) {
      if constexpr (kLogits) {
        row_stats[0] = stats[target_row];
        const bool listed = row_stats[0].top_p_last >= 0 || row_stats[0].top_k_last >= 0 ||
                            row_stats[0].min_p_threshold > 0.0f;
        nucleus = listed ? nucleus_counts[target_row] : 0u;
        if (draft_row >= 0) row_stats[1] = stats[draft_row];
      } else {
        row_stats[0].invalid = 0;
        row_stats[1].invalid = 0;
        nucleus = 0u;
      }
    }
    __syncthreads();
  };
  // Row r's nucleus list (none without logits), ordered by id for the draw from it (the
  // nucleus launch leaves it in no order; the block's row buffers hold the sort).
  static_assert(sizeof(sh.block) >= sizeof(std::uint64_t) * kNucleusList);
  const auto nucleus_list = [&](std::int64_t r, unsigned int listed) {
    const Global<std::uint64_t> list = kLogits ? lists + r * kNucleusListSize : lists;
    if (listed > 0) {
      order_kept_keys(list, static_cast<int>(listed),
                      reinterpret_cast<std::uint64_t*>(&sh.block[0][0]));
    }
    return Global<const std::uint64_t>(list);
  };
  // Row r as the tests and draws read it: recomputed from its logits and statistics, or read as
  // given.
  const auto row_with = [&](std::int64_t r, const RowStats& st) {
    if constexpr (kLogits) {
      return WarpedLogitValue<T>{rows.row(r), st};
    } else {
      return ProbabilityRowValue{rows.row(r), specdec::detail::WarpStats::uncut()};
    }
  };
  const auto row_of = [&](std::int64_t r, int slot) { return row_with(r, row_stats[slot]); };
  // Every position's accept test at once (thread t tests position t, blockDim.x at a time):
  // the first position not accepted, and whether it was rejected or bad input, decide the step,
  // as the CPU's walk in order does; the accepted tokens are written as they are found.
  __shared__ int stop, stop_kind;  // kind: 1 rejected, 2 invalid
  __shared__ SequenceStatus stop_code;  // why an invalid stop is
  if (threadIdx.x == 0) stop = gamma;
  __syncthreads();
  for (int base = 0; base < gamma; base += static_cast<int>(blockDim.x)) {
    const int t = base + static_cast<int>(threadIdx.x);
    int kind = 0;
    SequenceStatus code = SequenceStatus::kOk;
    if (t < gamma) {
      const std::int32_t x = tokens[first_draft + t];
      const std::int64_t target_row = first_target + t,
                         draft_row = rows.target_rows + first_draft + t;
      RowStats ps{}, qs{};
      if constexpr (kLogits) {
        ps = stats[target_row];
        qs = stats[draft_row];
      }
      if (x < 0 || x >= n || ps.invalid != 0 || qs.invalid != 0) {
        kind = 2;
        code = x < 0 || x >= n ? SequenceStatus::kTokenOutsideVocab
                               : row_status(ps.invalid != 0 ? ps.invalid : qs.invalid);
      } else {
        const float qx = row_with(draft_row, qs)(x);
        if (!(qx > 0.0f)) {  // the draft cannot have drawn x
          kind = 2;
          code = SequenceStatus::kZeroDraftProbability;
        } else {
          const RandomStream s =
              stream.at_position(stream.position + static_cast<std::uint32_t>(t));
          kind =
              specdec::detail::accepts(s.uniform(0), qx, 1.0f, row_with(target_row, ps)(x)) ? 0 : 1;
        }
      }
      if (kind != 0) atomicMin(&stop, t);
    }
    __syncthreads();
    if (t == stop) {
      stop_kind = kind;
      stop_code = code;
    }
    __syncthreads();
    if (stop < gamma) break;
  }
  const int i = stop;
  bool invalid = i < gamma && stop_kind == 2;
  // The row the step draws from: the correction's at a rejection, else the bonus row.
  const bool correct = i < gamma && !invalid;
  const std::int64_t target_row = first_target + i,
                     draft_row = correct ? rows.target_rows + first_draft + i : -1;
  if (!invalid) load_stats(target_row, draft_row);
  invalid = invalid || (!correct && row_stats[0].invalid != 0);
  const SequenceStatus code = !invalid                 ? SequenceStatus::kOk
                              : i < gamma && !correct ? stop_code
                                                      : row_status(row_stats[0].invalid);
  // A cut row of kSplitCutTiles blocks or more is split too: its entries are recomputed from the
  // logits with the cut applied (warped_probability), the written row the listed draw reads.
  const bool split = gridDim.y > 1 && !invalid &&
                     (nucleus == 0 || (n + kSumBlock - 1) / kSumBlock >= kSplitCutTiles) &&
                     (correct || row_of(target_row, 0).stats.greedy < 0);
  const unsigned int listed = split ? 0u : nucleus;  // a split draw reads no list
  if (split) {
    // This block's share of the draw row's block sums; the last block to finish draws.
    const auto count = static_cast<int>((n + kSumBlock - 1) / kSumBlock);
    const int per = (count + static_cast<int>(gridDim.y) - 1) / static_cast<int>(gridDim.y);
    const int first = static_cast<int>(blockIdx.y) * per;
    const int last = first + per < count ? first + per : count;
    const Global<float> sums = draw_sums + b * count;
    if (correct) {
      block_sums_to(
          ResidualOfRows<decltype(row_of(0, 0))>{row_of(target_row, 0), row_of(draft_row, 1)}, n,
          first, last, sums, sh);
    } else {
      block_sums_to(row_of(target_row, 0), n, first, last, sums, sh);
    }
    if (!last_block_of_row(draw_counters, b, gridDim.y, sh.last)) return;
    for (int k = static_cast<int>(threadIdx.x); k < count; k += static_cast<int>(blockDim.x))
      sh.sums[k] = sums[k];
    __syncthreads();
  } else if (blockIdx.y != 0) {
    return;
  }
  for (int t = static_cast<int>(threadIdx.x); t < i && !invalid; t += static_cast<int>(blockDim.x))
    out[t] = tokens[first_draft + t];  // the accepted drafts
  if (correct) {
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    const int token =
        draw_correction(row_of(target_row, 0), row_of(draft_row, 1),
                        nucleus_list(target_row, listed), listed, n, s.uniform(1), sh, split);
    if (threadIdx.x == 0) out[i] = token;
  } else if (!invalid) {
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(gamma));
    const int token = draw_warped(row_of(target_row, 0), nucleus_list(target_row, listed), listed,
                                  n, s.uniform(0), sh, split);
    if (threadIdx.x == 0) out[gamma] = token;
  }
  if (threadIdx.x == 0) {
    accepted[b] = invalid ? -1 : i;
    for (int j = invalid ? 0 : i + 1; j <= gamma; ++j) out[j] = -1;
    write_status(status, b, code);
  }
}

}  // namespace specdec::backend::cuda_impl::detail
