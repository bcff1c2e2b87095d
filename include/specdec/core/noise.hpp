// SPDX-License-Identifier: MIT
// Host fast paths that fill many draws of one RandomStream at once: the Philox rounds run on 16
// blocks side by side (structure of arrays, so the compiler vectorises them) and the logs of the
// Gumbel transform go through Eigen's vectorised log. Bit-identical to stream.uniform(i) /
// stream.gumbel(i) up to the last ulp of the log (see tests/core/test_philox.cpp).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <span>

#include "specdec/core/philox.hpp"

namespace specdec {
namespace detail {

inline constexpr int kPhiloxLanes = 16;

/// Draws 4*first_block .. 4*(first_block + 16) - 1 of `s` as open uniforms.
inline void philox_uniform_batch(const RandomStream& s, std::uint32_t first_block, float* out) {
  std::uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
  const std::uint32_t word1 = s.node | (static_cast<std::uint32_t>(s.domain) << 24);
  for (int j = 0; j < kPhiloxLanes; ++j) {
    c0[j] = first_block + static_cast<std::uint32_t>(j);
    c1[j] = word1;
    c2[j] = s.position;
    c3[j] = s.sequence;
  }
  Uint2 key = s.key();
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.x += 0x9E3779B9u;
      key.y += 0xBB67AE85u;
    }
    for (int j = 0; j < kPhiloxLanes; ++j) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * c0[j];
      const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c2[j];
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      c0[j] = hi1 ^ c1[j] ^ key.x;
      c1[j] = lo1;
      c2[j] = hi0 ^ c3[j] ^ key.y;
      c3[j] = lo0;
    }
  }
  for (int j = 0; j < kPhiloxLanes; ++j) {
    out[4 * j + 0] = bits_to_open_uniform(c0[j]);
    out[4 * j + 1] = bits_to_open_uniform(c1[j]);
    out[4 * j + 2] = bits_to_open_uniform(c2[j]);
    out[4 * j + 3] = bits_to_open_uniform(c3[j]);
  }
}

}  // namespace detail

/// out[i] = stream.uniform(first + i).
inline void fill_uniforms(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  const auto n = static_cast<std::int64_t>(out.size());
  std::int64_t i = 0;
  for (; i < n && ((first + i) & 3u) != 0; ++i)
    out[i] = stream.uniform(first + static_cast<std::uint32_t>(i));
  constexpr std::int64_t kBatch = 4 * detail::kPhiloxLanes;
  for (; i + kBatch <= n; i += kBatch) {
    detail::philox_uniform_batch(stream, (first + static_cast<std::uint32_t>(i)) >> 2,
                                 out.data() + i);
  }
  for (; i < n; ++i) out[i] = stream.uniform(first + static_cast<std::uint32_t>(i));
}

/// out[i] = stream.gumbel(first + i).
inline void fill_gumbels(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  fill_uniforms(stream, first, out);
  auto g = Eigen::Map<Eigen::ArrayXf>(out.data(), static_cast<Eigen::Index>(out.size()));
  g = -(-g.log()).log();
}

}  // namespace specdec
