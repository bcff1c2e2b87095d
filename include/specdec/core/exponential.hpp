// SPDX-License-Identifier: MIT
// The exponentials of the row loops: e^x for the softmax terms (exp_in_range, exp_flush) and a
// rough 2^x for passes that only bound a sum. Branch-free, so every loop over them vectorises, and
// an entry recomputed alone gives the bits of the vectorised loop.
#pragma once

#include <bit>
#include <cstdint>
#include <numbers>

#include "specdec/core/row_loop.hpp"

namespace specdec::detail {

inline constexpr std::uint32_t kExpFloorBits = 0xc2b00000u;  // -88.0f's bits: exp_flush's floor

/// a * b and a + b each rounded on its own: nvcc fuses a product feeding a sum into one FMA by
/// default, which would give the device other bits than the host.
SPECDEC_ENTRY_INLINE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SPECDEC_ENTRY_INLINE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// e^x for -88 <= x <= 0: Cody-Waite reduction x = k ln 2 + r (ln 2 = 0.693359375, whose k
/// multiples are exact, - 2.12194440e-4), then a degree-5 minimax polynomial for e^r on |r| <= ln 2
/// / 2 (relative error below 2e-7 wherever the result is normal, checked in tests/core/
/// test_warp_stats.cpp; five multiply-adds, which bound the row loops). Branch-free, so it
/// vectorises at any ISA level, and a row written in a vectorised loop and an entry recomputed
/// alone give the same bits. Loops whose arguments are at least -88 call it; others exp_flush.
SPECDEC_ENTRY_INLINE float exp_in_range(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = add_rn(mul_rn(x, std::numbers::log2e_v<float>), kRound);
  const float k = shifted - kRound;
  const float r = (x - mul_rn(k, 0.693359375f)) - mul_rn(k, -2.12194440e-4f);
  float y = 8.2962177694e-3f;
  y = add_rn(mul_rn(y, r), 4.1896615177e-2f);
  y = add_rn(mul_rn(y, r), 1.6667549312e-1f);
  y = add_rn(mul_rn(y, r), 4.9999171495e-1f);
  y = add_rn(mul_rn(y, r), 9.9999976158e-1f);
  y = add_rn(mul_rn(y, r), 1.0f);
  // 2^k: `shifted` holds 1.5 * 2^23 + k exactly, so its bits are those of 1.5 * 2^23 plus k, and
  // adding 127 and shifting into the exponent field leaves (k + 127) << 23 (the rest shifts out).
  return mul_rn(y, std::bit_cast<float>((std::bit_cast<std::uint32_t>(shifted) + 127u) << 23));
}

/// e^x for x <= 0 (-inf included): exp_in_range after a clamp to -88, where the result is exactly
/// 0 (the clamp lands on 2^-127, whose exponent field is zero). Every caller passes
/// (logit - max) / T, never above 0.
SPECDEC_ENTRY_INLINE float exp_flush(float x) {
  // The clamp as an unsigned minimum on the bits (negative floats below -88 have larger bits;
  // zero and positive floats smaller ones): a float select keeps GCC from vectorising the loop
  // without SSE4.1.
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t floor_bits = kExpFloorBits;  // a value: device code cannot bind the constant
  return exp_in_range(std::bit_cast<float>(bits < floor_bits ? bits : floor_bits));
}

/// 2^(d * scale) for d * scale in [-126, 0], to a relative 1.1e-4 (a degree-3 minimax polynomial,
/// three multiply-adds, the exponent added to the bits): the terms of a pass that only bounds a
/// row's sum (RoughRow), where the build may fuse the products into the sums.
SPECDEC_ENTRY_INLINE float rough_exp2(float d, float scale) {
  constexpr float kRound = 12582912.0f;
  const float shifted = d * scale + kRound;
  const float k = shifted - kRound;
  const float f = d * scale - k;  // in [-1/2, 1/2]
  float y = 5.5008932948e-2f;
  y = y * f + 2.4221095443e-1f;
  y = y * f + 6.9328290224e-1f;
  y = y * f + 1.0f;
  // k into y's exponent field: the low 9 bits of `shifted` hold k (those of 1.5 * 2^23 are zero).
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(y) +
                              (std::bit_cast<std::uint32_t>(shifted) << 23));
}

}  // namespace specdec::detail
