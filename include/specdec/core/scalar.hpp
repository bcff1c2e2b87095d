// SPDX-License-Identifier: MIT
// Scalar conversions every row function uses, on the host and in CUDA code alike: a row entry to
// float, and the bit casts of floats and doubles. Plain SPECDEC_HOST_DEVICE code (no Eigen, no
// fmt).
#pragma once

#include <cstdint>
#include <cstring>

#include "specdec/config.hpp"

namespace specdec::detail {

/// A row entry (float, or a half / bfloat16 type convertible to float) as float.
template <class T>
SPECDEC_HOST_DEVICE float to_float(T x) {
  return static_cast<float>(x);
}

/// The bits of a float.
SPECDEC_HOST_DEVICE std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

/// The float with these bits.
SPECDEC_HOST_DEVICE float bits_float(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

SPECDEC_HOST_DEVICE std::uint64_t double_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::uint64_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

}  // namespace specdec::detail
