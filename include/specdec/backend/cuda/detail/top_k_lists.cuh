// SPDX-License-Identifier: MIT
// The first half of the top-k cut on the statistics path, done by the statistics launch in its
// one read of the row: each block keeps the best k of its part of the row (block_top_k.cuh,
// ranked by logit, ties to the lowest id: core/top_k.hpp's order) as keys in the row's candidate
// list, and notes whether its part holds a NaN or +inf. The second half (top_k_cut.cuh) selects
// the k best of the lists.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/block_top_k.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/core/order_key.hpp"

namespace specdec::backend::cuda_impl::detail {

/// A top-k candidate's key: the order of its logit (both zeros alike) above the complement of its
/// id, so that descending keys rank as select_top_k does (larger logit, then lower id). Never 0,
/// which marks an empty slot of a block's list.
__device__ __forceinline__ std::uint64_t logit_key(float logit, std::int32_t id) {
  const auto order =
      static_cast<std::uint32_t>(specdec::detail::signed_order_key(logit + 0.0f)) ^ 0x80000000u;
  return (static_cast<std::uint64_t>(order) << 32) | (0xffffffffu - static_cast<std::uint32_t>(id));
}

/// A block's ranking values for top-k: the logits themselves; a NaN or +inf read sets *bad (the
/// row is invalid; -inf is never drawable, and NaN never enters a list).
struct LogitValues {
  int* bad;
  __device__ __forceinline__ void operator()(std::int64_t, const float (&x)[4],
                                             float (&v)[4]) const {
    for (int lane = 0; lane < 4; ++lane) {
      v[lane] = x[lane];
      *bad |= (x[lane] != x[lane] || x[lane] == -kNegInf) ? 1 : 0;
    }
  }
};

/// How many blocks of a row keep a list: as many as the row has, while their lists of k fit the
/// row's candidate list.
__device__ __forceinline__ int top_k_parts(const RowSplit& split, int k) {
  const auto fit = static_cast<std::int64_t>(kNucleusListSize / k);
  return static_cast<int>(split.blocks_per_row < fit ? split.blocks_per_row : fit);
}

/// What a block found in its part of a top-k row, the same in every thread.
struct TopKPart {
  bool bad;       // a NaN or +inf (the row is invalid)
  bool drawable;  // an entry above -inf
};

/// Block blockIdx.y's best k of its part of the row (`parts` parts of whole tiles) as logit_keys
/// into list[y k, (y + 1) k), padded with 0; a block past the parts does nothing.
template <class T>
__device__ TopKPart keep_block_top_k(Global<const T> row, std::int64_t n, const RowSplit& split,
                                     int k, int parts, Global<std::uint64_t> list,
                                     SplitTopKShared& sh) {
  const int part = static_cast<int>(blockIdx.y);
  if (part >= parts) return {false, false};
  const std::int64_t tiles = (split.tiles + parts - 1) / parts;
  const std::int64_t begin = part * tiles * kRowSplitTile, stop = begin + tiles * kRowSplitTile;
  int bad = 0;
  const int kept = begin < n ? block_top_k(row, begin, stop < n ? stop : n, row.vector_aligned(0),
                                           LogitValues{&bad}, k, sh)
                             : 0;
  for (int j = static_cast<int>(threadIdx.x); j < k; j += static_cast<int>(blockDim.x)) {
    list[static_cast<std::int64_t>(part) * k + j] =
        j < kept ? logit_key(sh.list_values[j], sh.list_ids[j]) : 0u;
  }
  return {block_all_reduce(static_cast<unsigned int>(bad), Plus{}, sh.reduce.u) != 0u, kept > 0};
}

}  // namespace specdec::backend::cuda_impl::detail
