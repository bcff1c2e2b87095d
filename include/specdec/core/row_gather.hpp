// SPDX-License-Identifier: MIT
// Gathers: the ids and logits of the entries of a row at or above a gate, a tile at a time,
// skipping tiles whose largest logit is below it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "specdec/core/compaction.hpp"
#include "specdec/core/key_range.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/tile_sum.hpp"

namespace specdec::detail {

/// Entries of room after each scratch array of a warp: vectorised compactions write past the
/// count they return.
inline constexpr std::int64_t kScratchSlack = 16;

/// The ids (ascending) and logits of the entries of a tile at least `gate`, the tile's first entry
/// having id `first`; returns their count. Entries up to kScratchSlack past it may be written.
/// kSelective: a gate that keeps few entries.
template <bool kSelective, class T>
std::int64_t gather_tile(const T* logits, std::int64_t count, std::int32_t first, float gate,
                         std::int32_t* ids, float* values) {
  std::int64_t m = 0;
  if constexpr (std::is_same_v<T, float>) {
    if (kSelective && host_compact_target() != CompactTarget::kScalar) {
      m = select_at_least(logits, count, gate, ids, first);
      for (std::int64_t j = 0; j < m; ++j) values[j] = logits[ids[j] - first];
      return m;
    }
    m = compact_between<true>(logits, nullptr, count, gate, std::numeric_limits<float>::infinity(),
                              ids, values);
    for (std::int64_t j = 0; j < m; ++j) ids[j] += first;
  } else {
    for (std::int64_t i = 0; i < count; ++i) {
      const float logit = to_float(logits[i]);
      ids[m] = first + static_cast<std::int32_t>(i);
      values[m] = logit;
      m += logit >= gate ? 1 : 0;
    }
  }
  return m;
}

/// The ids (ascending) and logits of the entries whose logit is at least `gate`; returns their
/// count. With the row's `tiles` (tile_pass), tiles whose largest logit is below the gate are
/// skipped unread; with `range`, every tile's keys are added to it as the tile is read (one read
/// of the row checks and gathers). Every entry below m + kScratchSlack may be written.
template <bool kSelective = false, class T>
std::int64_t gather_at_least(const T* logits, std::int64_t n, float gate, std::int32_t* ids,
                             float* values, const TileSum* tiles = nullptr,
                             KeyRange* range = nullptr) {
  std::int64_t m = 0;
  for (std::int64_t b = 0, t = 0; b < n; b += kSumTile, ++t) {
    if (tiles != nullptr && !(tiles[t].max >= gate)) continue;
    const std::int64_t count = std::min(n - b, kSumTile);
    if (range != nullptr) range->add(logits + b, count);
    m += gather_tile<kSelective>(logits + b, count, static_cast<std::int32_t>(b), gate, ids + m,
                                 values + m);
  }
  return m;
}

}  // namespace specdec::detail
