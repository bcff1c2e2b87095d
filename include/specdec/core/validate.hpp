// SPDX-License-Identifier: MIT
// Input checks used by every public entry point. Each throws specdec::Error naming the argument
// (with the offending index) and the bad value.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "specdec/core/checked.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/row_loop.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

/// How far a probability row's sum may stray from 1 before it is rejected. Generous enough for
/// rows computed in fp16/bf16 and summed in fp32 over 256k entries.
inline constexpr double kProbabilitySumTolerance = 1e-3;

namespace detail {

/// One read of a probability row (a row loop): whether some entry is not finite or negative (-0
/// passes), and its sum (16 float lanes per block of 1024, blocks in double) into `sum`.
template <class T>
SPECDEC_ROW_LOOP bool probability_row_is_bad(const T* row, std::size_t n, double& sum) {
  // Vectorisable loops (a serial double sum costs 4 cycles an entry): bad entries flagged by their
  // bits, the sum in vectors of lanes.
  constexpr std::size_t kLanes = 16, kBlock = 1024;
  std::uint32_t bad = 0;
  double total = 0.0;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    for (std::size_t i = b; i < e; ++i) {
      // Finite and >= 0: below +inf's bits, or -0.
      const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(row[i]));
      bad |= static_cast<std::uint32_t>(bits >= 0x7f800000u) &
             static_cast<std::uint32_t>(bits != 0x80000000u);
    }
    std::size_t i = b;
    float block = 0.0f;
#if defined(__GNUC__)
    // A vector of lanes: left to itself, GCC may vectorise this loop across blocks of 16 with
    // transposes (slower than the scalar loop).
    using Floats4 = float __attribute__((vector_size(16)));  // SSE's width: no emulated vectors
    Floats4 lanes[kLanes / 4] = {};
    for (; i + kLanes <= e; i += kLanes) {
      for (std::size_t k = 0; k < kLanes / 4; ++k) {
        Floats4 x;
        if constexpr (std::is_same_v<T, float>) {
          std::memcpy(&x, row + i + 4 * k, sizeof x);
        } else {
          for (std::size_t j = 0; j < 4; ++j) x[j] = static_cast<float>(row[i + 4 * k + j]);
        }
        lanes[k] += x;
      }
    }
    for (const Floats4& lane : lanes) {
      for (std::size_t j = 0; j < 4; ++j) block += lane[j];
    }
#endif
    for (; i < e; ++i) block += static_cast<float>(row[i]);
    total += static_cast<double>(block);
  }
  sum = total;
  return bad != 0;
}

}  // namespace detail

/// A probability row: non-empty, every entry finite and >= 0, sum within `tolerance` of 1.
template <class T = float>
void check_probability_row(const ArgName& name, std::type_identity_t<std::span<const T>> row,
                           double tolerance = kProbabilitySumTolerance) {
  if (row.empty()) detail::fail(name, "the row is empty");
  double sum = 0.0;
  const bool bad = detail::probability_row_is_bad(row.data(), row.size(), sum);
  // A bad row is scanned again to name the entry.
  if (bad) {
    for (std::size_t k = 0; k < row.size(); ++k) {
      const float v = static_cast<float>(row[k]);
      if (!std::isfinite(v) || v < 0.0f) {
        detail::fail(name[static_cast<std::int64_t>(k)], "{} is not a probability (finite, >= 0)",
                     v);
      }
    }
  }
  if (!(std::abs(sum - 1.0) <= tolerance)) {
    detail::fail(name, "sums to {} instead of 1 (tolerance {})", sum, tolerance);
  }
}

/// A logits row: non-empty, no NaN and no +inf; -inf marks a banned token, but not all of them.
template <class T = float>
void check_logits_row(const ArgName& name, std::type_identity_t<std::span<const T>> row) {
  if (row.empty()) detail::fail(name, "the row is empty");
  // One vectorisable pass over the bits; a bad row is scanned again to name the entry.
  std::uint32_t bad = 0, finite = 0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const auto magnitude = std::bit_cast<std::uint32_t>(static_cast<float>(row[i])) & 0x7fffffffu;
    const auto sign = std::bit_cast<std::uint32_t>(static_cast<float>(row[i])) >> 31;
    // NaN, or +inf (-inf marks a banned token).
    bad |= static_cast<std::uint32_t>(magnitude > 0x7f800000u) |
           (static_cast<std::uint32_t>(magnitude == 0x7f800000u) & (sign ^ 1u));
    finite |= static_cast<std::uint32_t>(magnitude < 0x7f800000u);
  }
  if (bad != 0) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      const float v = static_cast<float>(row[i]);
      if (std::isnan(v) || v == std::numeric_limits<float>::infinity()) {
        detail::fail(name[static_cast<std::int64_t>(i)], "{} is not a valid logit (finite or -inf)",
                     v);
      }
    }
  }
  if (finite == 0) detail::fail(name, "every logit is -inf");
}

namespace detail {

// Argument checks of the library's entry points (a user validates rows with the two checks above).

inline void check_size(const ArgName& name, std::size_t got, std::size_t expected) {
  if (got != expected) fail(name, "has {} elements, expected {}", got, expected);
}

inline void check_token(const ArgName& name, std::int64_t token, std::int64_t vocab) {
  if (token < 0 || token >= vocab) {
    fail(name, "token {} is outside the vocabulary [0, {})", token, vocab);
  }
}

template <class T = Token>
void check_tokens(const ArgName& name, std::type_identity_t<std::span<const T>> tokens,
                  std::int64_t vocab) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    check_token(name[static_cast<std::int64_t>(i)], tokens[i], vocab);
  }
}

/// lo <= value <= hi (use the open/closed variants below where the bounds are excluded).
template <class T>
void check_in_closed(std::string_view name, T value, T lo, T hi) {
  if (!(value >= lo && value <= hi)) fail(name, "{} is outside [{}, {}]", value, lo, hi);
}
template <class T>
void check_in_half_open(std::string_view name, T value, T lo, T hi) {
  if (!(value >= lo && value < hi)) fail(name, "{} is outside [{}, {})", value, lo, hi);
}
template <class T>
void check_positive(std::string_view name, T value) {
  if (!(value > T(0))) fail(name, "{} must be > 0", value);
}
template <class T>
void check_finite(std::string_view name, T value) {
  if (!std::isfinite(static_cast<double>(value))) fail(name, "{} must be finite", value);
}

}  // namespace detail
}  // namespace specdec
