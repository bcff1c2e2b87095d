// SPDX-License-Identifier: MIT
// Scalar kernels of drafting shared by the host and the CUDA backend: the logarithm and perturbed
// values of Gumbel-top-k and their ranking, the truncated Gumbel of stochastic beam search and the
// ranking of beam candidates. Plain SPECDEC_HOST_DEVICE code (no Eigen, no fmt), compiled for the
// host and by nvcc.
#pragma once

#include <cstdint>
#include <cstring>

#include "specdec/config.hpp"
#include "specdec/core/log_space.hpp"
#include "specdec/core/token.hpp"

// Whether packet_madd fuses: as Eigen's pmadd does on the host (FMA instructions enabled) and
// always on the device.
#if defined(__CUDA_ARCH__) || defined(__FMA__) || defined(__ARM_FEATURE_FMA) || \
    (defined(_MSC_VER) && defined(__AVX2__))
#define SPECDEC_PACKET_FMA 1
#else
#define SPECDEC_PACKET_FMA 0
#endif

namespace specdec {

/// What a row handed to Gumbel-top-k holds.
enum class RowKind {
  kLogWeights,     // log-probabilities or logits (any additive shift); -inf = never drawn
  kProbabilities,  // probabilities (any positive scale); 0 = never drawn
};

namespace detail {

SPECDEC_HOST_DEVICE std::uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}
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

/// a * b + c, fused exactly when Eigen's packet multiply-add is (see SPECDEC_PACKET_FMA).
SPECDEC_HOST_DEVICE float packet_madd(float a, float b, float c) {
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
SPECDEC_HOST_DEVICE float packet_log(float input) {
  const float min_normal = bits_float(0x00800000u);
  const float x0 = input > min_normal ? input : min_normal;
  const std::uint32_t bits = float_bits(x0);
  // x0 = m 2^e with m in [0.5, 1).
  float e = static_cast<float>(static_cast<int>(bits >> 23)) - 126.0f;
  float m = bits_float((bits & 0x807fffffu) | 0x3f000000u);
  // Shift m to [sqrt(1/2), sqrt(2)) - 1.
  const bool low = m < 0.707106781186547524f;
  const float low_m = low ? m : 0.0f;
  m = m - 1.0f;
  e = e - (low ? 1.0f : 0.0f);
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
  if (input == 0.0f) return kNegInf;
  if (!(input >= 0.0f)) return bits_float(0xffffffffu);  // NaN
  if (input == -kNegInf) return input;
  return m;
}

/// Gumbel-top-k's perturbed value of one entry: log_weight(x) + Gumbel of the uniform u, with
/// the Gumbel -log(-log(u)) and (kProbabilities) log(x) taken by packet_log: what the host kernel
/// perturb_row_host computes, entry for entry. -inf for a banned entry (probability 0 or log-weight
/// -inf); a NaN never ranks (the CPU rejects such rows).
template <RowKind kind>
SPECDEC_HOST_DEVICE float gumbel_perturbed(float x, float u) {
  const float minus_gumbel = packet_log(-packet_log(u));
  if constexpr (kind == RowKind::kProbabilities) {
    return packet_log(x) - minus_gumbel;
  } else {
    return x - minus_gumbel;
  }
}

/// Gumbel-top-k's order: token a (perturbed value va) ranks before token b (value vb) when its
/// value is larger, ties going to the lower token id.
SPECDEC_HOST_DEVICE bool ranks_before(float va, std::int32_t a, float vb, std::int32_t b) {
  return va > vb || (va == vb && a < b);
}

/// One candidate extension (parent, token) of a beam level.
struct BeamCandidate {
  double score;    // the ranking value (psi' for RSD-S)
  float log_prob;  // path log probability of the extension
  std::int32_t parent;
  Token token;
};

/// The order of beam candidates: score decreasing, ties to the lower parent index, then the lower
/// token.
SPECDEC_HOST_DEVICE bool beam_ranks_before(const BeamCandidate& a, const BeamCandidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.parent != b.parent) return a.parent < b.parent;
  return a.token < b.token;
}

}  // namespace detail

/// The perturbed value `g` of a child conditioned on its siblings' maximum being `bound` (the
/// parent's truncated value) instead of `z` (their actual maximum, z >= g):
/// -log(exp(-bound) - exp(-z) + exp(-g)), computed stably (Kool et al. App. B.3):
/// v = bound - g + log1mexp(g - z), result = bound - max(v, 0) - log1p(exp(-|v|)).
/// The child with g == z gets exactly `bound`; every result is <= bound and increasing in g.
SPECDEC_HOST_DEVICE double truncated_gumbel(double bound, double g, double z) {
  const double a = g - z < 0.0 ? g - z : 0.0;
  const double v = bound - g + log1mexp(a);
  return bound - (v > 0.0 ? v : 0.0) - log1p(exp(-fabs(v)));
}

}  // namespace specdec
