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

/// The split of a chain step's statistics launch: row_split's for twice the SMs (four blocks an
/// SM, not two). In the latency model (H100, B 1, V 128256, device arguments) every chain case
/// gains: T + top-k 50 63.0 -> 55.2 us, T + top-p 43.1 -> 42.3 us, min-p 33.7 -> 33.2 us, B 16
/// at V 32000 60.0 -> 59.4 us; eight blocks an SM lose (top-p 50.4 us). The statistics'
/// buffers are per tile, so any split of whole tiles fits the workspace.
constexpr RowSplit statistics_row_split(std::int64_t rows, std::int64_t vocab, int sm_count) {
  return row_split(rows, vocab, 2 * sm_count);
}

/// The split of the drafting launches (Gumbel-top-k, the beam level): row_split's with at least
/// two tiles a block. Their row's last block merges one list per block, and at B = 1 and V =
/// 128256 halving the lists (126 -> 63) shortens that merge more than the longer reads cost (the
/// latency model, H100: Gumbel-top-k k = 8 13.4 -> 12.4 us; three or four tiles a block 15.5 us).
/// Never more blocks than row_split's, whose workspace sizes therefore hold its lists.
constexpr RowSplit draft_row_split(std::int64_t rows, std::int64_t vocab, int sm_count) {
  RowSplit s = row_split(rows, vocab, sm_count);
  if (s.tiles_per_block < 2 && s.tiles > 1) {
    s.tiles_per_block = 2;
    s.blocks_per_row = (s.tiles + 1) / 2;
  }
  return s;
}

}  // namespace specdec::backend::cuda_impl
