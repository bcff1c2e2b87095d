// SPDX-License-Identifier: MIT
// Host fills of many draws of one RandomStream: the one place the library fills uniforms or Gumbels
// in bulk. The Philox rounds and the Gumbel transform run on the widest vector unit the CPU has
// (core/philox_lanes.hpp, core/gumbel_lanes.hpp): every value equals stream.uniform(first + i) /
// stream.gumbel(first + i) bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "specdec/core/gumbel_lanes.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/philox_lanes.hpp"

namespace specdec {

/// out[i] = stream.uniform(first + i).
inline void fill_uniforms(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  float* values = out.data();
  const auto n = static_cast<std::int64_t>(out.size());
  // Draws up to a Philox block boundary one at a time, then whole blocks on the lanes, then the rest.
  const std::int64_t head = std::min<std::int64_t>(n, (4u - (first & 3u)) & 3u);
  for (std::int64_t i = 0; i < head; ++i) {
    values[i] = stream.uniform(first + static_cast<std::uint32_t>(i));
  }
  const std::int64_t blocks = (n - head) / 4;
  detail::philox_uniform_blocks(detail::host_lane_target(), stream,
                                (first + static_cast<std::uint32_t>(head)) >> 2, blocks,
                                values + head);
  for (std::int64_t i = head + 4 * blocks; i < n; ++i) {
    values[i] = stream.uniform(first + static_cast<std::uint32_t>(i));
  }
}

/// out[i] = stream.gumbel(first + i), bit for bit.
inline void fill_gumbels(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  // A chunk's uniforms are transformed while they are still in the first-level cache.
  constexpr std::size_t kChunk = 4096;
  const detail::LaneTarget target = detail::host_lane_target();
  for (std::size_t b = 0; b < out.size(); b += kChunk) {
    const std::span<float> chunk = out.subspan(b, std::min(kChunk, out.size() - b));
    fill_uniforms(stream, first + static_cast<std::uint32_t>(b), chunk);
    detail::uniforms_to_gumbels(target, chunk);
  }
}

}  // namespace specdec
