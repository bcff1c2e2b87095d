// SPDX-License-Identifier: MIT
// The batched verification kernels of drafts without draft rows (verify/target_only.hpp): one
// block per sequence, the candidates of a position or tree node tried in order against the warped
// target row, the rejected ones removed from it without writing it.
//
// Every sum is the CPU's blocked_sum in the CPU's order (one thread per 1024-entry block, the
// blocks added in order in double) and every draw the CPU's inverse-CDF walk, so tokens equal the
// CPU backend's bit for bit. Nothing but the outputs is written: the residual row is the target
// row read through the list of removed tokens.
// IWYU pragma: private
#pragma once

#include <climits>
#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/ragged_block.cuh"
#include "specdec/backend/cuda/detail/row_draw.cuh"
#include "specdec/backend/cuda/detail/status_write.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/core/blocked_sum.hpp"
#include "specdec/core/inverse_cdf.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Threads per block of the target-only kernels.
inline constexpr int kTargetOnlyThreads = kDrawThreads;
/// Removed tokens a node can hold (kept in shared memory): a node with more children is refused.
inline constexpr int kMaxRemovedTokens = 256;

struct TargetOnlyShared : DrawShared {
  int removed_count;
  std::int32_t removed[kMaxRemovedTokens];
};

/// A warped target row with the tokens in `removed` read as +0 (the CPU's zeroed scratch entries).
struct RemovedRowValue {
  Global<const float> row;
  const std::int32_t* removed;
  int count;
  __device__ __forceinline__ float operator()(std::int64_t i) const {
    for (int k = 0; k < count; ++k) {
      if (removed[k] == i) return 0.0f;
    }
    return row[i];
  }
};

/// Recomputes, in sh.sums (the block sums of the unmasked row, one chunk), the sums of the blocks
/// holding a removed token: the masked row's block sums at the cost of those blocks only.
__device__ __forceinline__ void refresh_removed_blocks(const RemovedRowValue& value, std::int64_t n,
                                                       TargetOnlyShared& sh) {
  constexpr std::int64_t kBlock = specdec::detail::kBlockedSumBlock;
  const std::int64_t b = static_cast<std::int64_t>(threadIdx.x) * kBlock;
  const std::int64_t e = b + kBlock < n ? b + kBlock : n;
  __syncthreads();
  bool hit = false;
  for (int k = 0; k < value.count; ++k)
    hit = hit || (value.removed[k] >= b && value.removed[k] < e);
  if (b < n && hit) sh.sums[threadIdx.x] = specdec::detail::block_sum(value, b, e);
  __syncthreads();
}

/// One node of detail::target_only_row by the whole block: `count` candidates (candidate(k) their
/// tokens, each in [0, n)) tried in order against `row` with the draws of `s`. Returns the index
/// of the accepted candidate and its token, or -1 and the correction; accepted = -2 when the
/// node has more candidates than kMaxRemovedTokens.
template <class Candidate>
__device__ NodeVerdict target_only_node(Global<const float> row, std::int64_t n,
                                        const Candidate& candidate, int count,
                                        const RandomStream& s, TargetOnlyShared& sh) {
  __syncthreads();  // the previous node's removed list has been read
  if (threadIdx.x == 0) sh.removed_count = 0;
  __syncthreads();
  bool materialised = false;
  double mass = 1.0;
  for (int k = 0; k < count; ++k) {
    const std::int32_t x = candidate(k);
    const RemovedRowValue value{row, sh.removed, sh.removed_count};
    const float px = value(x);
    if (specdec::detail::accepts(s.uniform(static_cast<std::uint32_t>(k)), 1.0f,
                                 static_cast<float>(mass), px)) {
      return {k, x};
    }
    if (!materialised) {
      mass = exact_row_sum(TargetRowValue{row}, n, sh);
      materialised = true;
    }
    const double rest = mass - static_cast<double>(px);
    if (rest >= kResidualFloor) {
      if (sh.removed_count == kMaxRemovedTokens) return {-2, -1};
      __syncthreads();  // every thread has read removed_count
      if (threadIdx.x == 0) sh.removed[sh.removed_count++] = x;
      __syncthreads();
      mass = rest;
    }
  }
  const float u = s.uniform(static_cast<std::uint32_t>(count));
  const RemovedRowValue residual{row, sh.removed, sh.removed_count};
  constexpr std::int64_t kChunk = specdec::detail::kBlockedSumBlock * kTargetOnlyThreads;
  if (n > kChunk) return {-1, exact_sample_row(residual, n, u, sh)};
  // sh.sums still holds the unmasked row's block sums from the mass pass.
  refresh_removed_blocks(residual, n, sh);
  return {-1, sample_from_sums(residual, n, u, sh)};
}

/// Sequence b (blockIdx.x) of a ragged batch laid out as specdec::ChainBatchArgs (gamma =
/// offsets[b + 1] - offsets[b] draft tokens from offsets[b], target rows and emitted tokens from
/// offsets[b] + b), warped fp32 target rows, walked as detail::walk_chain walks it: position i's
/// verdict node(row, token, i, stream at position i), the bonus drawn from row gamma. A draft
/// token outside [0, n) (what the CPU rejects as bad input) is never used as an index, and a
/// sequence longer than `max_gamma` is not walked: either gets accepted[b] = -1 and -1 tokens.
/// `sh` is the block's shared memory, which node uses too.
template <class Node>
__device__ void target_only_chain(const ChainKernelArgs<float>& args, int max_gamma,
                                  DrawShared& sh, const Node& node) {
  const auto& [target, target_stride, unused_draft, unused_draft_stride, offsets, tokens, n,
               streams, unused_shared_warp, unused_warps, unused_rows_ws, emitted, accepted,
               status] = args;
  expect_block_threads(kTargetOnlyThreads);
  const auto [b, first_draft, gamma, first_target, stream] = ragged_block(offsets, streams);
  const Global<std::int32_t> out = emitted + first_target;
  const bool outside = any_token_outside(tokens + first_draft, gamma, n);
  const bool invalid = outside || gamma > max_gamma;
  int i = 0;
  int token = -1;
  for (; i < gamma && !invalid; ++i) {
    const std::int32_t x = tokens[first_draft + i];
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    const NodeVerdict verdict = node(target + (first_target + i) * target_stride, x, i, s);
    if (verdict.accepted < 0) {
      token = verdict.token;
      break;
    }
    if (threadIdx.x == 0) out[i] = x;
  }
  if (i == gamma && !invalid) {
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(gamma));
    token = exact_sample_row(TargetRowValue{target + (first_target + gamma) * target_stride}, n,
                             s.uniform(0), sh);
  }
  if (threadIdx.x == 0 && !invalid) out[i] = token;
  finish_chain(accepted, out, b, gamma, i, invalid, status,
               outside   ? SequenceStatus::kTokenOutsideVocab
               : invalid ? SequenceStatus::kChainTooLong
                         : SequenceStatus::kOk);
}

/// verify_chain_target_only for each sequence (target_only_chain; draws of
/// verify_chain_target_only with streams[b]).
__global__ void __launch_bounds__(kTargetOnlyThreads)
    verify_chain_target_only_kernel(ChainKernelArgs<float> args) {
  __shared__ TargetOnlyShared sh;
  target_only_chain(args, INT_MAX, sh,
                    [&](Global<const float> row, std::int32_t x, int, const RandomStream& s) {
                      return target_only_node(row, args.vocab, [x](int) { return x; }, 1, s, sh);
                    });
}

/// One position of detail::synthetic_row by the whole block: `x` (in [0, n)) accepted iff draw 0
/// is below `rate`; otherwise the correction drawn with draw 1 from the row without x (the row
/// itself when x holds all but the residual floor of it), as detail::target_without draws it.
__device__ inline NodeVerdict synthetic_node(Global<const float> row, std::int64_t n,
                                             std::int32_t x, float rate, const RandomStream& s,
                                             TargetOnlyShared& sh) {
  if (s.uniform(0u) < rate) return {0, x};
  const double mass = exact_row_sum(TargetRowValue{row}, n, sh);
  const float u = s.uniform(1u);
  const bool removed = mass - static_cast<double>(row[x]) >= kResidualFloor;
  __syncthreads();  // every thread has read the previous position's list
  if (threadIdx.x == 0) {
    sh.removed[0] = x;
    sh.removed_count = removed ? 1 : 0;
  }
  __syncthreads();
  return {-1, exact_sample_row(RemovedRowValue{row, sh.removed, sh.removed_count}, n, u, sh)};
}

/// vLLM's synthetic rule for each sequence (target_only_chain; draws of verify_chain_synthetic
/// with streams[b]): position i accepted with probability rates.value[i]. A sequence with more
/// positions than rates.count fails with kChainTooLong.
__global__ void __launch_bounds__(kTargetOnlyThreads)
    verify_chain_synthetic_kernel(ChainKernelArgs<float> args, SyntheticRates rates) {
  __shared__ TargetOnlyShared sh;
  target_only_chain(args, rates.count, sh,
                    [&](Global<const float> row, std::int32_t x, int i, const RandomStream& s) {
                      return synthetic_node(row, args.vocab, x, rates.value[i], s, sh);
                    });
}

/// One block per tree b (blockIdx.x), laid out as specdec::TreeBatchArgs (offsets cut tokens /
/// parents into trees; tree b's rows start at row offsets[b] + b, root row first), warped fp32
/// target rows. The walk of verify_tree_target_only: at the current node its children (later
/// nodes whose parent it is, in stored order) are tried with target_only_node; draws from
/// streams[b].at_node(current + 1). A child token outside [0, n) or a node with more than
/// kMaxRemovedTokens children (device data is not scanned on the host) is never used as an index:
/// the tree gets accepted[b] = -1 and final_tokens[b] = -1. bonus may be null.
/// Reads no draft rows nor ints (TreeKernelArgs).
__global__ void __launch_bounds__(kTargetOnlyThreads)
    verify_tree_target_only_kernel(TreeKernelArgs args) {
  const auto& [offsets, tokens, parents, target, target_stride, unused_draft, unused_draft_stride,
               n, streams, unused_ints, accepted_nodes, accepted, final_tokens, bonus, status] =
      args;
  expect_block_threads(kTargetOnlyThreads);
  __shared__ TargetOnlyShared sh;
  const auto [b, begin, nodes, first_row, stream] = ragged_block(offsets, streams);
  const Global<const std::int32_t> tree_tokens = tokens + begin;
  const Global<const std::int32_t> tree_parents = parents + begin;
  bool invalid = any_token_outside(tree_tokens, nodes, n);
  SequenceStatus code = invalid ? SequenceStatus::kTokenOutsideVocab : SequenceStatus::kOk;
  int current = -1;
  int walked = 0;
  int token = -1;
  bool is_bonus = false;
  while (!invalid) {
    int count = 0;
    for (int j = current + 1; j < nodes; ++j) count += tree_parents[j] == current ? 1 : 0;
    const Global<const float> row = target + (first_row + current + 1) * target_stride;
    const RandomStream s = stream.at_node(static_cast<std::uint32_t>(current + 1));
    if (count == 0) {
      token = exact_sample_row(TargetRowValue{row}, n, s.uniform(0), sh);
      is_bonus = true;
      break;
    }
    // The k-th child of `current` in stored order (a walk over the later nodes: trees are small).
    // `last` is an init-capture: clang 15 cannot capture a structured binding.
    const auto child = [&, last = nodes - 1](int k) {
      int j = current + 1;
      for (; j < last; ++j) {
        if (tree_parents[j] == current && k-- == 0) break;
      }
      return j;
    };
    const NodeVerdict verdict = target_only_node(
        row, n, [&](int k) { return tree_tokens[child(k)]; }, count, s, sh);
    if (verdict.accepted == -2) {
      invalid = true;
      code = SequenceStatus::kTooManyChildren;
      break;
    }
    if (verdict.accepted < 0) {
      token = verdict.token;
      break;
    }
    current = child(verdict.accepted);
    if (threadIdx.x == 0) accepted_nodes[begin + walked] = current;
    ++walked;
  }
  if (threadIdx.x == 0) {
    accepted[b] = invalid ? -1 : walked;
    final_tokens[b] = invalid ? -1 : token;
    if (bonus != nullptr) bonus[b] = invalid ? 0 : (is_bonus ? 1 : 0);
    write_status(status, b, code);
  }
}

}  // namespace specdec::backend::cuda_impl::detail
