// SPDX-License-Identifier: MIT
// What every verification kernel over a ragged batch does first and last: block blockIdx.x's
// sequence (or tree) in RaggedSlice's layout, the check of its tokens, and a chain's last writes.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/status_write.cuh"
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
