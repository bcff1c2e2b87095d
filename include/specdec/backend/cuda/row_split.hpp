// SPDX-License-Identifier: MIT
// How a kernel that reads whole rows shares them among blocks: each block takes whole tiles of
// kSumTile (1024) entries, so a tile's sums keep the CPU's lane order (core/tile_sum.hpp) whatever
// the split, and enough blocks per row that a small batch still puts a block on every SM. Plain
// C++: the launchers and the tests compute the same configuration.
#pragma once

#include <algorithm>
#include <cstdint>

#include "specdec/core/tile_combine.hpp"

namespace specdec::backend::cuda_impl {

/// Entries per tile: the softmax sum's tile (core/tile_combine.hpp).
inline constexpr std::int64_t kRowSplitTile = specdec::detail::kSumTile;

/// SMs of an H100 SXM: the count tests assume for a launch configuration.
inline constexpr int kH100Sms = 132;

/// The split of `rows` rows of `vocab` entries: tile_count(vocab) tiles per row, tiles_per_block
/// consecutive tiles per block, blocks_per_row blocks per row (the last may hold fewer tiles).
struct RowSplit {
  std::int64_t tiles = 1;
  std::int64_t tiles_per_block = 1;
  std::int64_t blocks_per_row = 1;

  std::int64_t blocks(std::int64_t rows) const { return rows * blocks_per_row; }
};

/// Blocks enough for two per SM over all rows (`sm_count` SMs), each of whole tiles; never more
/// blocks than a row has tiles.
constexpr RowSplit row_split(std::int64_t rows, std::int64_t vocab, int sm_count) {
  RowSplit s;
  s.tiles = std::max<std::int64_t>(1, (vocab + kRowSplitTile - 1) / kRowSplitTile);
  const std::int64_t r = std::max<std::int64_t>(rows, 1);
  const std::int64_t wanted = std::clamp<std::int64_t>((2 * sm_count + r - 1) / r, 1, s.tiles);
  s.tiles_per_block = (s.tiles + wanted - 1) / wanted;
  s.blocks_per_row = (s.tiles + s.tiles_per_block - 1) / s.tiles_per_block;
  return s;
}

}  // namespace specdec::backend::cuda_impl
