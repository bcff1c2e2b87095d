// SPDX-License-Identifier: MIT
// Checked size arithmetic: products, sums and narrowing conversions of sizes, slots and indices
// that throw specdec::Error naming the argument instead of wrapping around.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "specdec/core/error.hpp"

namespace specdec::detail {

/// "int32", "uint64", ...: the type an overflow message names.
template <std::integral T>
[[nodiscard]] std::string integer_type_name() {
  return fmt::format("{}int{}", std::is_signed_v<T> ? "" : "u",
                     std::numeric_limits<T>::digits + (std::is_signed_v<T> ? 1 : 0));
}

/// `a symbol b` as `overflows(a, b, &out)` computes it (a __builtin_*_overflow), or an Error
/// naming `name` when the result does not fit in `T`.
template <std::integral T, class Overflows>
[[nodiscard]] T checked_op(const ArgName& name, T a, T b, const char* symbol,
                           const Overflows& overflows) {
  T out;
  if (overflows(a, b, &out))
    fail(name, "{} {} {} overflows {}", a, symbol, b, integer_type_name<T>());
  return out;
}

/// `a * b`, or an Error naming `name` when the product does not fit in `T`.
template <std::integral T>
[[nodiscard]] T checked_mul(const ArgName& name, T a, T b) {
  return checked_op(name, a, b, "x",
                    [](T x, T y, T* out) { return __builtin_mul_overflow(x, y, out); });
}

/// `a + b`, or an Error naming `name` when the sum does not fit in `T`.
template <std::integral T>
[[nodiscard]] T checked_add(const ArgName& name, T a, T b) {
  return checked_op(name, a, b, "+",
                    [](T x, T y, T* out) { return __builtin_add_overflow(x, y, out); });
}

/// `value` converted to `To`, or an Error naming `name` when it is out of `To`'s range.
template <std::integral To, std::integral From>
[[nodiscard]] To checked_narrow(const ArgName& name, From value) {
  if (!std::in_range<To>(value)) {
    fail(name, "{} is outside [{}, {}]", value, std::numeric_limits<To>::min(),
         std::numeric_limits<To>::max());
  }
  return static_cast<To>(value);
}

/// A floating-point `value` that must be a whole number within `To`'s range (a shape or an offset
/// read from a file): no silent truncation of 1.5, no undefined conversion of 1e300 or NaN.
template <std::integral To>
[[nodiscard]] To checked_integer(const ArgName& name, double value) {
  // 2^digits is exact in double; the range test is done before any conversion.
  constexpr double upper = [] {
    double power = 1.0;
    for (int i = 0; i < std::numeric_limits<To>::digits; ++i) power *= 2.0;
    return power;
  }();
  constexpr double lower = std::is_signed_v<To> ? -upper : 0.0;
  if (!(value >= lower && value < upper) || value != std::floor(value)) {
    fail(name, "{} is not an integer in [{}, {}]", value, std::numeric_limits<To>::min(),
         std::numeric_limits<To>::max());
  }
  return static_cast<To>(value);
}

}  // namespace specdec::detail
