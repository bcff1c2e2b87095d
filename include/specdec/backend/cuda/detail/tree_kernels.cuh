// SPDX-License-Identifier: MIT
// The batched tree verification kernel: one block per tree, the walk of verify_tree with the
// multi-round (SpecInfer) or recursive (RRS) node rule, the row passes shared by the block.
//
// The walk is detail::verify_tree_unchecked's, and each node runs the same residual walk as the
// CPU (verify/residual_walk.hpp) with block-wide row operations (BlockRows) on a scratch row that
// is never written (VirtualScratch: its entries recomputed from the target and draft rows), with
// the CPU's blocked sums and draws: the tokens are the CPU's bit for bit, and nothing is written
// but the outputs and the candidate lists.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include <type_traits>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/ragged_block.cuh"
#include "specdec/backend/cuda/detail/row_draw.cuh"
#include "specdec/backend/cuda/detail/status_write.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Residual steps a node's scratch row can hold (kept in shared memory): a node whose walk needs
/// more (several hundred rejected children) is refused.
inline constexpr int kMaxResidualSteps = 512;

/// One step of a node's scratch row, applied to every entry in order: [v - scale q]+ (a
/// residual), back to the target row (a reset), or 0 at one token (a removed candidate).
struct ResidualStep {
  enum Kind : int { kResidual, kReset, kZero } kind;
  float scale;
  std::int32_t token;
};

struct TreeShared {
  DrawShared draw;
  ResidualStep steps[kMaxResidualSteps];
  int step_count;
  int overflow;  // a step did not fit: the tree is refused
  double next;   // one_thread's result
  int count;     // children of the current node
};

/// The scratch row of the residual walk, never written: its entries are recomputed from the
/// target and draft rows by replaying the node's steps, with exactly the operations that would
/// have written it (scaled_residual, the copy, the zeroed candidates), so sums and draws over it
/// are the CPU's bit for bit.
struct VirtualScratch {
  TreeShared* sh;
  Global<const float> target;
  Global<const float> draft;

  /// Entry i after the first `steps` steps, and then `extra` (a candidate step) when given.
  __device__ float value(std::int64_t i, int steps, const ResidualStep* extra = nullptr) const {
    const float p = target[i];
    float v = p;
    float q = -1.0f;  // loaded on the first residual step
    const auto apply = [&](const ResidualStep& step) {
      if (step.kind == ResidualStep::kResidual) {
        if (q < 0.0f) q = draft[i];
        v = specdec::detail::scaled_residual(v, step.scale, q);
      } else if (step.kind == ResidualStep::kReset) {
        v = p;
      } else if (step.token == i) {
        v = 0.0f;
      }
    };
    for (int k = 0; k < steps; ++k) apply(sh->steps[k]);
    if (extra != nullptr) apply(*extra);
    return v;
  }
  __device__ float operator()(std::int64_t i) const { return value(i, sh->step_count); }

  /// scratch[i]: read the entry, or (one thread, between barriers) zero it.
  struct Entry {
    const VirtualScratch* scratch;
    std::int64_t i;
    __device__ operator float() const { return (*scratch)(i); }
    __device__ const Entry& operator=(float v) const {
      // The walk only clears removed candidates; a token already cleared since the last reset
      // stays 0 through residual steps, so it needs no second step.
      (void)v;
      if ((*scratch)(i) != 0.0f || !scratch->cleared(i)) scratch->push({ResidualStep::kZero, 0.0f,
                                                                        static_cast<std::int32_t>(i)});
      return *this;
    }
  };
  __device__ Entry operator[](std::int64_t i) const { return {this, i}; }

  __device__ bool cleared(std::int64_t i) const {
    for (int k = sh->step_count - 1; k >= 0; --k) {
      if (sh->steps[k].kind == ResidualStep::kReset) return false;
      if (sh->steps[k].kind == ResidualStep::kZero && sh->steps[k].token == i) return true;
    }
    return false;
  }
  /// Appends a step (one thread); a full list marks the tree refused.
  __device__ void push(const ResidualStep& step) const {
    if (sh->step_count == kMaxResidualSteps) {
      sh->overflow = 1;
      return;
    }
    sh->steps[sh->step_count++] = step;
  }
};

/// A scratch row with one more (candidate) step, for its mass before the step is kept.
struct ScratchWithStep {
  VirtualScratch scratch;
  int steps;
  ResidualStep step;
  __device__ float operator()(std::int64_t i) const { return scratch.value(i, steps, &step); }
};

/// The residual walk's row operations for one block (detail::residual_walk's Rows policy) on a
/// VirtualScratch: every thread calls each with the same arguments; sums are the CPU's blocked
/// sums and draws its sample_row (row_draw.cuh), one-thread sections run on thread 0 between
/// barriers.
struct BlockRows {
  TreeShared* sh;

  /// residual_update: the scratch becomes [source - scale * draft]+ when that mass reaches
  /// `floor_mass` (source: the target row, or the scratch itself); returns the mass or -1.
  template <class Source>
  __device__ double residual_update(const Source&, Global<const float>, float scale,
                                    std::int64_t n, const VirtualScratch& scratch,
                                    double floor_mass) const {
    constexpr bool kFromTarget = !std::is_same_v<Source, VirtualScratch>;
    const ResidualStep step{ResidualStep::kResidual, scale, -1};
    // From the target row the steps so far do not count: the row is the target's.
    const int base = kFromTarget ? 0 : sh->step_count;
    const double mass = exact_row_sum(ScratchWithStep{scratch, base, step}, n, sh->draw);
    if (!(mass >= floor_mass) || mass <= 0.0) return -1.0;
    __syncthreads();
    if (threadIdx.x == 0) {
      if (kFromTarget) sh->step_count = 0;
      scratch.push(step);
    }
    __syncthreads();
    return mass;
  }
  /// copy_row: the scratch becomes the target row; returns its sum.
  __device__ double copy_row(Global<const float> target, std::int64_t n,
                             const VirtualScratch& scratch) const {
    __syncthreads();
    if (threadIdx.x == 0) {
      sh->step_count = 0;
      scratch.push({ResidualStep::kReset, 0.0f, -1});
    }
    __syncthreads();
    return exact_row_sum(TargetRowValue{target}, n, sh->draw);
  }
  __device__ Token sample_row(const VirtualScratch& row, std::int64_t n, float u) const {
    return exact_sample_row(row, n, u, sh->draw);
  }
  __device__ Token sample_row(Global<const float> row, std::int64_t n, float u) const {
    return exact_sample_row(TargetRowValue{row}, n, u, sh->draw);
  }
  template <class F>
  __device__ double one_thread(const F& section) const {
    __syncthreads();
    if (threadIdx.x == 0) sh->next = section();
    __syncthreads();
    const double result = sh->next;
    __syncthreads();  // every thread has read sh->next before it is written again
    return result;
  }
};

/// One block per tree b (blockIdx.x). offsets (B + 1, device memory) cut tokens / parents into
/// trees; tree b's rows start at row offsets[b] + b of target / draft (root row first). ints holds
/// 2 N entries: tree b's candidate tokens and node ids at 2 offsets[b] (a node has fewer children
/// than its tree has nodes), so its size needs no largest tree.
/// Outputs as specdec::verify_tree_batch; bonus and status may be null. Device data is not
/// trusted: the walk only moves to later nodes; a tree holding a token outside [0, n), or a node
/// whose walk needs more than kMaxResidualSteps steps, gets accepted = -1, final_tokens = -1 and
/// its SequenceStatus.
template <bool kRecursive>
__global__ void __launch_bounds__(kDrawThreads) verify_tree_kernel(TreeKernelArgs args) {
  const auto& [offsets, tokens, parents, target, target_stride, draft, draft_stride, vocab, streams,
               ints, accepted_nodes, accepted, final_tokens, bonus, status] = args;
  const int n = static_cast<int>(vocab);
  expect_block_threads(kDrawThreads);
  __shared__ TreeShared sh;
  const auto [b, begin, nodes, first_row, stream] = ragged_block(offsets, streams);
  const Global<std::int32_t> candidates = ints + 2 * begin;
  const Global<std::int32_t> ids = candidates + nodes;
  const Global<const std::int32_t> tree_tokens = tokens + begin;
  const Global<const std::int32_t> tree_parents = parents + begin;
  // A token outside the vocabulary anywhere in the tree fails it, as on the CPU (which checks
  // every node before the walk); the block reads each token once.
  __shared__ int outside_flag;
  if (threadIdx.x == 0) outside_flag = 0;
  __syncthreads();
  for (int j = static_cast<int>(threadIdx.x); j < nodes; j += static_cast<int>(blockDim.x)) {
    const std::int32_t x = tree_tokens[j];
    if (x < 0 || x >= n) atomicExch(&outside_flag, 1);
  }
  __syncthreads();
  const bool outside = outside_flag != 0;
  SequenceStatus code = outside ? SequenceStatus::kTokenOutsideVocab : SequenceStatus::kOk;
  int current = -1;
  int walked = outside ? -1 : 0;
  if (outside && threadIdx.x == 0) {
    final_tokens[b] = -1;
    if (bonus != nullptr) bonus[b] = 0;
  }
  for (; !outside;) {
    __syncthreads();  // the previous node's candidates have been read
    if (threadIdx.x == 0) {
      int count = 0;
      for (int j = current + 1; j < nodes; ++j) {
        const std::int32_t x = tree_tokens[j];
        if (tree_parents[j] == current && x >= 0 && x < n) {
          ids[count] = j;
          candidates[count] = x;
          ++count;
        }
      }
      sh.count = count;
    }
    __syncthreads();
    const int count = sh.count;
    const std::int64_t row = first_row + current + 1;
    const Global<const float> target_row = target + row * target_stride;
    const RandomStream s = stream.at_node(static_cast<std::uint32_t>(current + 1));
    if (count == 0) {
      const int token = exact_sample_row(TargetRowValue{target_row}, n, s.uniform(0), sh.draw);
      if (threadIdx.x == 0) {
        final_tokens[b] = token;
        if (bonus != nullptr) bonus[b] = 1;
      }
      break;
    }
    constexpr auto kRule = kRecursive ? specdec::detail::ResidualRule::kRecursive
                                      : specdec::detail::ResidualRule::kMultiRound;
    const Global<const float> draft_row = draft + row * draft_stride;
    if (threadIdx.x == 0) {
      sh.step_count = 0;
      sh.overflow = 0;
    }
    __syncthreads();
    const NodeVerdict verdict = specdec::detail::residual_walk<kRule>(
        BlockRows{&sh}, target_row, draft_row, n, Global<const std::int32_t>(candidates), count,
        s, VirtualScratch{&sh, target_row, draft_row});
    if (sh.overflow != 0) {
      walked = -1;
      code = SequenceStatus::kResidualOverflow;
      if (threadIdx.x == 0) final_tokens[b] = -1;
      break;
    }
    if (verdict.accepted < 0) {
      if (threadIdx.x == 0) {
        final_tokens[b] = verdict.token;
        if (bonus != nullptr) bonus[b] = 0;
      }
      break;
    }
    current = ids[verdict.accepted];
    if (threadIdx.x == 0) accepted_nodes[begin + walked] = current;
    ++walked;
  }
  if (threadIdx.x == 0) {
    accepted[b] = walked;
    write_status(status, b, code);
  }
}

}  // namespace specdec::backend::cuda_impl::detail
