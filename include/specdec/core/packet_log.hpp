// SPDX-License-Identifier: MIT
// The library's one logarithm for random noise: Eigen 3.4's vectorised float log written as scalar
// SPECDEC_HOST_DEVICE code, so the Gumbel transform (core/philox.hpp's uniform_to_gumbel) gives
// the same bits in a vectorised host loop, in scalar host code and in a CUDA thread. The device
// always fuses multiply-adds; the host does when compiled with FMA instructions, and then host
// and device agree bit for bit (otherwise in the last bit only).
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/log_space.hpp"
#include "specdec/core/scalar.hpp"

// Whether packet_madd fuses: as Eigen's pmadd does on the host (FMA instructions enabled) and
// always on the device.
#if defined(__CUDA_ARCH__) || defined(__FMA__) || defined(__ARM_FEATURE_FMA) || \
    (defined(_MSC_VER) && defined(__AVX2__))
#define SPECDEC_PACKET_FMA 1
#else
#define SPECDEC_PACKET_FMA 0
#endif

// The Gumbel transform's row loops vectorise only with the log inlined, which GCC may decline in a
// large caller (a call per entry, ten times slower): on the host it is always inlined.
#if defined(__GNUC__) && !defined(__CUDACC__)
#define SPECDEC_NOISE_INLINE [[gnu::always_inline]] inline
#else
#define SPECDEC_NOISE_INLINE SPECDEC_HOST_DEVICE
#endif

namespace specdec::detail {

/// a * b + c, fused exactly when Eigen's packet multiply-add is (see SPECDEC_PACKET_FMA).
SPECDEC_NOISE_INLINE float packet_madd(float a, float b, float c) {
#if SPECDEC_PACKET_FMA
  return fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

/// The natural logarithm as Eigen 3.4 computes it on packets (plog_float: Cephes' polynomial on
/// the mantissa, inputs below the smallest normal float clamped to it), written as scalar code:
/// bit-identical to Eigen's vectorised log, so a row's perturbed values are the same wherever
/// an entry falls (packet, head or tail of a vectorised loop, a thread of a GPU block).
/// log(0) = -inf, log(+inf) = +inf, NaN for negative or NaN input.
SPECDEC_NOISE_INLINE float packet_log(float input) {
  // Selects on bits, not branches or float selects: a loop over entries then vectorises.
  const auto keep = [](bool c, std::uint32_t bits) { return bits & (0u - static_cast<std::uint32_t>(c)); };
  const std::uint32_t input_bits = float_bits(input);
  // max(input, smallest normal) on the bits (negative inputs and NaN end up as NaN below).
  const std::uint32_t bits = static_cast<std::int32_t>(input_bits) > 0x00800000
                                 ? input_bits
                                 : 0x00800000u;
  // bits = m 2^e with m in [0.5, 1).
  float e = static_cast<float>(static_cast<int>(bits >> 23)) - 126.0f;
  float m = bits_float((bits & 0x807fffffu) | 0x3f000000u);
  // Shift m to [sqrt(1/2), sqrt(2)) - 1.
  const bool low = m < 0.707106781186547524f;
  const float low_m = bits_float(keep(low, float_bits(m)));
  m = m - 1.0f;
  e = e - bits_float(keep(low, 0x3f800000u));  // 1 when low
  m = m + low_m;
  const float m2 = m * m;
  const float m3 = m2 * m;
  float y = packet_madd(7.0376836292E-2f, m, -1.1514610310E-1f);
  float y1 = packet_madd(-1.2420140846E-1f, m, +1.4249322787E-1f);
  float y2 = packet_madd(+2.0000714765E-1f, m, -2.4999993993E-1f);
  y = packet_madd(y, m, 1.1676998740E-1f);
  y1 = packet_madd(y1, m, -1.6668057665E-1f);
  y2 = packet_madd(y2, m, +3.3333331174E-1f);
  y = packet_madd(y, m3, y1);
  y = packet_madd(y, m3, y2);
  y = y * m3;
  y = packet_madd(-0.5f, m2, y);
  m = m + y;
  m = packet_madd(e, static_cast<float>(0.693147180559945309417232121458176568), m);
  // log(negative or NaN) = NaN, log(+-0) = -inf, log(+inf) = +inf, in that order of precedence.
  std::uint32_t result = float_bits(m);
  const auto choose = [&](bool c, std::uint32_t value) {
    result = keep(!c, result) | keep(c, value);
  };
  choose(input_bits > 0x7f800000u, 0xffffffffu);
  choose((input_bits & 0x7fffffffu) == 0u, 0xff800000u);
  choose(input_bits == 0x7f800000u, 0x7f800000u);
  return bits_float(result);
}

}  // namespace specdec::detail
