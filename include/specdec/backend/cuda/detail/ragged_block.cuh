// SPDX-License-Identifier: MIT
// What every verification kernel over a ragged batch does first and last: block blockIdx.x's
// sequence (or tree) in RaggedSlice's layout, the check of its tokens, and a chain's last writes.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/status_write.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/core/philox.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Sequence b = blockIdx.x of a ragged batch: its `count` entries (draft tokens, tree nodes) from
/// `first`, its rows (target rows, emitted tokens, a tree's root row) from `first_row`, and its
/// RandomStream.
struct RaggedBlock {
  std::int64_t b;
  std::int64_t first;
  int count;
  std::int64_t first_row;
  RandomStream stream;
};

/// This block's sequence in the B + 1 CSR `offsets` (its two offsets and its stream read once).
__device__ inline RaggedBlock ragged_block(Global<const std::int32_t> offsets,
                                           Global<const RandomStream> streams) {
  const std::int64_t b = blockIdx.x;
  const specdec::detail::RaggedSlice slice = specdec::detail::RaggedSlice::of(offsets, b);
  return {b, slice.first, static_cast<int>(slice.count), slice.first_row(), streams[b]};
}

/// The arguments of the chain verification kernels (verify_chain_kernel, and without draft rows,
/// warps or row scratch verify_chain_target_only_kernel), one block per sequence of a ragged batch
/// laid out as specdec::ChainBatchArgs: the rows (or logits) `*_stride` entries apart, of `vocab`
/// entries; the CSR draft `offsets` and the draft `tokens`; one stream per sequence; the warp
/// (`warps[b]`, or `shared_warp` when warps is null) and `rows_ws`, two warped rows per sequence,
/// from logits; the outputs as specdec::verify_chain_batch's (status may be null).
template <class T>
struct ChainKernelArgs {
  Global<const T> target{};
  std::int64_t target_stride = 0;
  Global<const T> draft{};
  std::int64_t draft_stride = 0;
  Global<const std::int32_t> offsets{};
  Global<const std::int32_t> tokens{};
  std::int64_t vocab = 0;
  Global<const RandomStream> streams{};
  DeviceWarp shared_warp{};
  Global<const DeviceWarp> warps{};
  Global<float> rows_ws{};
  Global<std::int32_t> emitted{};
  Global<std::int32_t> accepted{};
  Global<std::int32_t> status{};
};

/// The arguments of the tree verification kernels (verify_tree_kernel, and without draft rows
/// verify_tree_target_only_kernel), one block per tree of a ragged batch laid out as
/// specdec::TreeBatchArgs: the CSR `offsets` (B + 1) cutting `tokens` and `parents` into trees;
/// the rows, tree b's from row offsets[b] + b (root row first), `*_stride` entries apart, of
/// `vocab` entries; one stream per tree; `ints`, verify_tree_kernel's scratch of 2 N entries; the
/// outputs as specdec::verify_tree_batch's (bonus and status may be null).
struct TreeKernelArgs {
  Global<const std::int32_t> offsets{};
  Global<const std::int32_t> tokens{};
  Global<const std::int32_t> parents{};
  Global<const float> target{};
  std::int64_t target_stride = 0;
  Global<const float> draft{};
  std::int64_t draft_stride = 0;
  std::int64_t vocab = 0;
  Global<const RandomStream> streams{};
  Global<std::int32_t> ints{};
  Global<std::int32_t> accepted_nodes{};
  Global<std::int32_t> accepted{};
  Global<std::int32_t> final_tokens{};
  Global<std::uint8_t> bonus{};
  Global<std::int32_t> status{};
};

/// Whether one of tokens[0 .. count) lies outside [0, n): every thread reads them all (chains and
/// the trees of one thread's walk are short), so each finds it without a barrier.
template <class N>
__device__ inline bool any_token_outside(Global<const std::int32_t> tokens, int count, N n) {
  bool outside = false;
  for (int j = 0; j < count; ++j) {
    const std::int32_t x = tokens[j];
    outside = outside || x < 0 || x >= n;
  }
  return outside;
}

/// Thread 0's last writes of chain b, which emitted its tokens up to out[accepted_count]:
/// accepted[b] (-1 for an invalid chain), -1 in out past its tokens (all gamma + 1 slots of an
/// invalid chain), and its status.
__device__ inline void finish_chain(Global<std::int32_t> accepted, Global<std::int32_t> out,
                                    std::int64_t b, int gamma, int accepted_count, bool invalid,
                                    Global<std::int32_t> status, SequenceStatus code) {
  if (threadIdx.x != 0) return;
  accepted[b] = invalid ? -1 : accepted_count;
  for (int j = invalid ? 0 : accepted_count + 1; j <= gamma; ++j) out[j] = -1;
  write_status(status, b, code);
}

}  // namespace specdec::backend::cuda_impl::detail
