// SPDX-License-Identifier: MIT
// The last launch of the chain step from logits: one block per sequence, on the statistics the
// first launch left (row_stats_kernels.cuh). The accept tests read p(x) and q(x) at the drafted
// tokens only; the correction at a rejection and the bonus token are drawn from rows recomputed
// entry by entry from the logits and never written, with the CPU's blocked sums and inverse-CDF
// walk (target_only_kernels.cuh). So a sequence gets verify_chain_logits's tokens bit for bit,
// and its rows are read once more only where a draw needs them.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/detail/target_only_kernels.cuh"
#include "specdec/core/warped_probability.hpp"
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
};

/// The residual [p - q]+ of two warped rows recomputed from their logits.
template <class T>
struct ResidualLogitValue {
  WarpedLogitValue<T> target;
  WarpedLogitValue<T> draft;
  __device__ __forceinline__ float operator()(std::int64_t i) const {
    return specdec::detail::scaled_residual(target(i), 1.0f, draft(i));
  }
};

/// sample_row(value, n, u) (the CPU's draw) for a row that may be one-hot.
template <class T>
__device__ int draw_warped(const WarpedLogitValue<T>& row, std::int64_t n, float u,
                           TargetOnlyShared& sh) {
  if (row.stats.greedy >= 0) return static_cast<int>(row.stats.greedy);
  return exact_sample_row(row, n, u, sh);
}

/// The correction after a rejection: the residual [p - q]+ when its mass reaches the floor, else
/// the target row (rejection_correction_filled's rule and draws).
template <class T>
__device__ int draw_correction(const WarpedLogitValue<T>& p, const WarpedLogitValue<T>& q,
                               std::int64_t n, float u, TargetOnlyShared& sh) {
  constexpr std::int64_t kChunk = specdec::detail::kBlockedSumBlock * kTargetOnlyThreads;
  const ResidualLogitValue<T> residual{p, q};
  double mass;
  if (n <= kChunk) {
    // One chunk: the block sums stay in shared memory for the draw, which then reads only the
    // block it scans.
    const int count = chunk_sums(residual, n, 0, sh);
    mass = 0.0;
    for (int k = 0; k < count; ++k) mass += sh.sums[k];
    if (mass >= kResidualFloor && mass > 0.0) return sample_from_sums(residual, n, u, sh);
  } else {
    mass = exact_row_sum(residual, n, sh);
    if (mass >= kResidualFloor && mass > 0.0) return exact_sample_row(residual, n, u, sh);
  }
  return draw_warped(p, n, u, sh);
}

/// Standard rejection sampling of every sequence (blockIdx.x = b) of a chain batch whose rows'
/// statistics are in `stats` (target rows first, `target_rows` of them, then the draft rows),
/// with the draws of specdec::verify_chain_batch: position i uses streams[b].at_position(position
/// + i), draw 0 tests and draw 1 corrects; the bonus is draw 0 at position + gamma. emitted gets
/// the tokens then -1 padding, accepted[b] the count. A sequence with a draft token outside
/// [0, n), an invalid row, or a token of draft probability 0 at a tested position (what the CPU
/// reports as bad input) gets accepted[b] = -1 and only -1 tokens.
template <class T>
__global__ void __launch_bounds__(kTargetOnlyThreads)
    chain_logits_finish_kernel(LogitRowSet<T> rows, std::int64_t n,
                               Global<const RowStats> stats, Global<const std::int32_t> offsets,
                               Global<const std::int32_t> tokens,
                               Global<const RandomStream> streams, Global<std::int32_t> emitted,
                               Global<std::int32_t> accepted) {
  expect_block_threads(kTargetOnlyThreads);
  __shared__ TargetOnlyShared sh;
  const std::int64_t b = blockIdx.x;
  const std::int64_t first_draft = offsets[b];
  const int gamma = static_cast<int>(offsets[b + 1] - first_draft);
  const std::int64_t first_target = first_draft + b;
  const RandomStream stream = streams[b];
  const Global<std::int32_t> out = emitted + first_target;
  // A row's statistics, read by one thread for the block.
  __shared__ RowStats row_stats[2];
  const auto load_stats = [&](std::int64_t target_row, std::int64_t draft_row) {
    __syncthreads();
    if (threadIdx.x == 0) {
      row_stats[0] = stats[target_row];
      if (draft_row >= 0) row_stats[1] = stats[draft_row];
    }
    __syncthreads();
  };
  bool invalid = false;
  int i = 0;
  for (; i < gamma; ++i) {
    const std::int32_t x = tokens[first_draft + i];
    const std::int64_t target_row = first_target + i, draft_row = rows.target_rows + first_draft + i;
    load_stats(target_row, draft_row);
    if (x < 0 || x >= n || row_stats[0].invalid != 0 || row_stats[1].invalid != 0) {
      invalid = true;
      break;
    }
    const WarpedLogitValue<T> p{rows.row(target_row), row_stats[0].warp_stats()};
    const WarpedLogitValue<T> q{rows.row(draft_row), row_stats[1].warp_stats()};
    const float qx = q(x);
    if (!(qx > 0.0f)) {  // the draft cannot have drawn x
      invalid = true;
      break;
    }
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    if (specdec::detail::accepts(s.uniform(0), qx, 1.0f, p(x))) {
      if (threadIdx.x == 0) out[i] = x;
      continue;
    }
    const int token = draw_correction(p, q, n, s.uniform(1), sh);
    if (threadIdx.x == 0) out[i] = token;
    break;
  }
  if (i == gamma && !invalid) {
    load_stats(first_target + gamma, -1);
    if (row_stats[0].invalid != 0) {
      invalid = true;
    } else {
      const RandomStream s =
          stream.at_position(stream.position + static_cast<std::uint32_t>(gamma));
      const WarpedLogitValue<T> bonus{rows.row(first_target + gamma), row_stats[0].warp_stats()};
      const int token = draw_warped(bonus, n, s.uniform(0), sh);
      if (threadIdx.x == 0) out[gamma] = token;
    }
  }
  if (threadIdx.x == 0) {
    accepted[b] = invalid ? -1 : i;
    for (int j = invalid ? 0 : i + 1; j <= gamma; ++j) out[j] = -1;
  }
}

}  // namespace specdec::backend::cuda_impl::detail
