// SPDX-License-Identifier: MIT
// The warp's parameters (temperature, top-k, top-p, min-p) and their checks. What they mean is in
// core/warp.hpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>

#include "specdec/core/error.hpp"

namespace specdec {

struct Warp {
  float temperature = 1.0f;  // 0 = greedy
  std::int32_t top_k = 0;    // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off

  bool is_greedy() const { return temperature == 0.0f; }
  bool is_identity() const {
    return temperature == 1.0f && top_k == 0 && top_p >= 1.0f && min_p <= 0.0f;
  }

  /// Throws specdec::Error naming the first bad field.
  void validate(std::int64_t vocab) const {
    if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
      detail::fail("temperature", "{} must be finite and >= 0", temperature);
    }
    if (top_k < 0 || top_k > vocab) {
      detail::fail("top_k", "{} is outside [0, vocab = {}]", top_k, vocab);
    }
    if (!(top_p > 0.0f && top_p <= 1.0f)) detail::fail("top_p", "{} is outside (0, 1]", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f)) detail::fail("min_p", "{} is outside [0, 1]", min_p);
  }
};

namespace detail {

/// Rows up to this length are cut over all their entries, without a prune bound.
inline constexpr std::int64_t kSmallRow = 64;

/// `warps` holds one shared warp or one per `unit` (`count` of them), each valid for `vocab`;
/// a bad field is reported as "warps[i].<field>".
inline void check_warp_list(std::span<const Warp> warps, std::int64_t count, std::int64_t vocab,
                            std::string_view unit) {
  if (warps.size() != 1 && warps.size() != static_cast<std::size_t>(count)) {
    fail("warps", "has {} entries, expected 1 (shared) or {} (one per {})", warps.size(), count,
         unit);
  }
  for (std::size_t i = 0; i < warps.size(); ++i) {
    try {
      warps[i].validate(vocab);
    } catch (const Error& e) {
      throw Error(fmt::format("warps[{}].{}", i, e.argument()), e.problem());
    }
  }
}

}  // namespace detail
}  // namespace specdec
