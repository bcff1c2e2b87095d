// SPDX-License-Identifier: MIT
// The batched tree verification kernel: one block per tree, the walk of verify_tree with the
// multi-round (SpecInfer) or recursive (RRS) node rule, the row passes shared by the block.
//
// The walk is detail::verify_tree_unchecked's, and each node runs the same residual walk as the
// CPU (verify/residual_walk.hpp) with block-wide row operations (BlockRows), so the accept tests
// and draws are the CPU's. Residual masses are summed in another order than the CPU's, so a token
// can differ only when an accept test or an inverse-CDF threshold falls within rounding of the
// compared value.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/chain_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec::backend::cuda_impl::detail {

struct TreeShared {
  ChainShared chain;
  double next;  // mass after the removed tokens are cleared (recursive rule)
  int count;    // children of the current node
};

/// Block-wide residual_update of verify/residual_walk.hpp: scratch = [source - scale * draft]+
/// when its mass is at least `floor_mass`; returns that mass, or -1 with scratch untouched.
/// `source` may be `scratch` (each thread rewrites only the entries it read).
__device__ __forceinline__ double block_residual_update(Global<const float> source,
                                                        Global<const float> draft, float scale,
                                                        int n, Global<float> scratch,
                                                        double floor_mass, TreeShared& sh) {
  double local = 0.0;
  for (int j = static_cast<int>(threadIdx.x); j < n; j += static_cast<int>(blockDim.x)) {
    local += specdec::detail::scaled_residual(source[j], scale, draft[j]);
  }
  const double mass = block_all_reduce(local, Plus{}, sh.chain.warp.d);
  if (!(mass >= floor_mass) || mass <= 0.0) return -1.0;
  for (int j = static_cast<int>(threadIdx.x); j < n; j += static_cast<int>(blockDim.x)) {
    scratch[j] = specdec::detail::scaled_residual(source[j], scale, draft[j]);
  }
  __syncthreads();
  return mass;
}

/// Block-wide copy_row: scratch = source; returns its sum.
__device__ __forceinline__ double block_copy_row(Global<const float> source, int n,
                                                 Global<float> scratch, TreeShared& sh) {
  double local = 0.0;
  for (int j = static_cast<int>(threadIdx.x); j < n; j += static_cast<int>(blockDim.x)) {
    const float v = source[j];
    scratch[j] = v;
    local += v;
  }
  const double sum = block_all_reduce(local, Plus{}, sh.chain.warp.d);
  __syncthreads();
  return sum;
}

/// The residual walk's row operations for one block (detail::residual_walk's Rows policy): every
/// thread of the block calls each with the same arguments; row passes are split across threads,
/// sums reduced block-wide, and one-thread sections run on thread 0 between barriers.
struct BlockRows {
  TreeShared* sh;
  __device__ double residual_update(Global<const float> source, Global<const float> draft,
                                    float scale, std::int64_t n, Global<float> scratch,
                                    double floor_mass) const {
    return block_residual_update(source, draft, scale, static_cast<int>(n), scratch, floor_mass,
                                 *sh);
  }
  __device__ double copy_row(Global<const float> source, std::int64_t n,
                             Global<float> scratch) const {
    return block_copy_row(source, static_cast<int>(n), scratch, *sh);
  }
  __device__ Token sample_row(Global<const float> row, std::int64_t n, float u) const {
    return sample_block(RowValue{row}, static_cast<int>(n), u, sh->chain);
  }
  template <class F>
  __device__ double one_thread(const F& section) const {
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
/// than its tree has nodes), so its size needs no largest tree; scratch `n` floats per tree.
/// Outputs as specdec::verify_tree_batch; bonus may be null. Device data is not trusted: the walk
/// only moves to later nodes, and a child whose token lies outside [0, n) is never a candidate.
template <bool kRecursive>
__global__ void __launch_bounds__(kWarpThreads)
    verify_tree_kernel(Global<const std::int32_t> offsets, Global<const std::int32_t> tokens,
                       Global<const std::int32_t> parents, Global<const float> target,
                       std::int64_t target_stride, Global<const float> draft,
                       std::int64_t draft_stride, int n, Global<const RandomStream> streams,
                       Global<std::int32_t> ints, Global<float> scratch_rows,
                       Global<std::int32_t> accepted_nodes, Global<std::int32_t> accepted,
                       Global<std::int32_t> final_tokens, Global<std::uint8_t> bonus) {
  expect_block_threads(kWarpThreads);
  __shared__ TreeShared sh;
  const std::int64_t b = blockIdx.x;
  const int begin = offsets[b];
  const int nodes = offsets[b + 1] - begin;
  const std::int64_t first_row = begin + b;
  const RandomStream stream = streams[b];
  const Global<std::int32_t> candidates = ints + 2 * static_cast<std::int64_t>(begin);
  const Global<std::int32_t> ids = candidates + nodes;
  const Global<float> scratch = scratch_rows + b * static_cast<std::int64_t>(n);
  const Global<const std::int32_t> tree_tokens = tokens + begin;
  const Global<const std::int32_t> tree_parents = parents + begin;
  int current = -1;
  int walked = 0;
  for (;;) {
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
      const int token = sample_block(RowValue{target_row}, n, s.uniform(0), sh.chain);
      if (threadIdx.x == 0) {
        final_tokens[b] = token;
        if (bonus != nullptr) bonus[b] = 1;
      }
      break;
    }
    constexpr auto kRule = kRecursive ? specdec::detail::ResidualRule::kRecursive
                                      : specdec::detail::ResidualRule::kMultiRound;
    const NodeVerdict verdict = specdec::detail::residual_walk<kRule>(
        BlockRows{&sh}, target_row, draft + row * draft_stride, n,
        Global<const std::int32_t>(candidates), count, s, scratch);
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
  if (threadIdx.x == 0) accepted[b] = walked;
}

}  // namespace specdec::backend::cuda_impl::detail
