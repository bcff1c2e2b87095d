// SPDX-License-Identifier: MIT
// The scratch of a warp: its size (warp_workspace_size, public) and its layout (WarpScratch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "specdec/core/row_gather.hpp"
#include "specdec/core/tile_sum.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec {
namespace detail {

/// 32-bit words of a warp's scratch for a row of `vocab`: candidate ids, a work list of ids, the
/// candidates' values and a work list of values (each with kScratchSlack entries of room), then the
/// tiles of the sum (three words each).
inline std::size_t warp_scratch_words(std::int64_t vocab) {
  const std::int64_t n = std::max<std::int64_t>(vocab, 0);
  return static_cast<std::size_t>(4 * (n + kScratchSlack) + 3 * ((n + kSumTile - 1) / kSumTile));
}

}  // namespace detail

/// Bytes of workspace a warp of a row of `vocab` entries needs.
inline std::size_t warp_workspace_size(std::int64_t vocab) {
  return Workspace::round_up(detail::warp_scratch_words(vocab) * sizeof(std::int32_t));
}

namespace detail {

/// A warp's scratch (warp_scratch_words words at `base`) for a row of n entries.
/// Each array has n + kScratchSlack entries.
struct WarpScratch {
  std::int32_t* ids;     // candidate ids
  std::int32_t* bucket;  // a list of ids: the kept ids, or the nucleus selection's work ids
  float* values;         // the candidates' logits or probabilities
  float* work_values;    // the nucleus selection's work values
  TileSum* tiles;        // tile_count(n) entries
};

inline WarpScratch warp_scratch(std::int32_t* base, std::int64_t n) {
  const std::int64_t stride = n + kScratchSlack;
  return {base, base + stride, reinterpret_cast<float*>(base + 2 * stride),
          reinterpret_cast<float*>(base + 3 * stride),
          reinterpret_cast<TileSum*>(base + 4 * stride)};
}

}  // namespace detail
}  // namespace specdec
