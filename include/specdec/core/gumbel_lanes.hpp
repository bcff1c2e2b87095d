// SPDX-License-Identifier: MIT
// Private: the Gumbel transform -log(-log u) on a vector unit's width of uniforms at once, in the
// copy compiled for each target (core/philox_lanes.hpp's run_on_lanes). Both logs take inputs
// that are positive, normal and finite (u in [2^-24, 1 - 2^-24], -log u in [5.9e-8, 16.7]), where
// packet_log's clamp and its special cases change nothing: the same operations less those, so
// every target gives uniform_to_gumbel's bits (tests/core/test_philox.cpp tries every uniform).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "specdec/core/lane_isa.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/philox_lanes.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace specdec::detail {

#if defined(SPECDEC_LANES_X86) || defined(SPECDEC_LANES_NEON)

/// log = packet_log(x) on every lane for positive, normal, finite x, bit for bit. (Vectors by
/// reference: by value, GCC notes an ABI change at every helper of a target wider than the
/// build's.)
template <class Lanes>
[[gnu::always_inline]] inline void log_of_normal_lanes(const typename Lanes::Floats& x,
                                                       typename Lanes::Floats& log) {
  using Words = typename Lanes::Words;
  using Floats = typename Lanes::Floats;
  using Mask = decltype(Floats{} < Floats{});  // signed words: -1 where true
  const auto bits = reinterpret_cast<Words>(x);
  // x = m 2^e with m in [0.5, 1); the sign bit is clear.
  const auto m_half = reinterpret_cast<Floats>((bits & 0x007fffffu) | 0x3f000000u);
  const Mask low = m_half < 0.707106781186547524f;
  // e (e - 1 when low) is a small integer: one conversion gives packet_log's float steps' value.
  const Floats e = __builtin_convertvector(reinterpret_cast<Mask>(bits >> 23) - 126 + low, Floats);
  // packet_log's (m - 1) + (low ? m : 0) as (m + (low ? m : 0)) - 1: both are exact, so equal.
  const Floats m = (m_half + reinterpret_cast<Floats>(reinterpret_cast<Words>(m_half) &
                                                      reinterpret_cast<Words>(low))) -
                   1.0f;
  const Floats m2 = m * m;
  const Floats m3 = m2 * m;
  const auto c = [](float v) { return Floats{} + v; };
  Floats y = Lanes::madd(c(7.0376836292E-2f), m, c(-1.1514610310E-1f));
  Floats y1 = Lanes::madd(c(-1.2420140846E-1f), m, c(+1.4249322787E-1f));
  Floats y2 = Lanes::madd(c(+2.0000714765E-1f), m, c(-2.4999993993E-1f));
  y = Lanes::madd(y, m, c(1.1676998740E-1f));
  y1 = Lanes::madd(y1, m, c(-1.6668057665E-1f));
  y2 = Lanes::madd(y2, m, c(+3.3333331174E-1f));
  y = Lanes::madd(y, m3, y1);
  y = Lanes::madd(y, m3, y2);
  y = y * m3;
  y = Lanes::madd(c(-0.5f), m2, y);
  log = Lanes::madd(e, c(static_cast<float>(0.693147180559945309417232121458176568)), m + y);
}

#endif

/// u[k] = uniform_to_gumbel(u[k]) on Lanes::kGumbelVectors vectors at once (two hide the
/// multiply-adds' latency where the registers hold them).
template <class Lanes>
[[gnu::always_inline]] inline void gumbels_of_uniforms(typename Lanes::Floats* u) {
  for (int k = 0; k < Lanes::kGumbelVectors; ++k) {
    typename Lanes::Floats log_u;
    log_of_normal_lanes<Lanes>(u[k], log_u);
    log_of_normal_lanes<Lanes>(-log_u, u[k]);
    u[k] = -u[k];
  }
}

/// values[i] = uniform_to_gumbel(values[i]) for uniforms values[i] in (0, 1). (No lambdas inside:
/// one would be compiled for the build's target, and the wider helpers not inlined into it.)
struct GumbelTransform {
  static void run_scalar(float* values, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) values[i] = uniform_to_gumbel(values[i]);
  }
#if defined(SPECDEC_LANES_X86) || defined(SPECDEC_LANES_NEON)
  template <class Lanes>
  [[gnu::always_inline]] static void run(float* values, std::int64_t n) {
    using Floats = typename Lanes::Floats;
    constexpr int kVectors = Lanes::kGumbelVectors, kStep = kVectors * Lanes::kWords;
    std::int64_t i = 0;
    for (; i + kStep <= n; i += kStep) {
      Floats u[kVectors];
      std::memcpy(u, values + i, sizeof u);
      gumbels_of_uniforms<Lanes>(u);
      std::memcpy(values + i, u, sizeof u);
    }
    if (i == n) return;
    // The rest in vectors too (scalar code here could be fused differently: this copy's target
    // has FMA instructions), padded with 1/2.
    Floats u[kVectors];
    for (Floats& v : u) v = Floats{} + 0.5f;
    std::memcpy(u, values + i, static_cast<std::size_t>(n - i) * sizeof(float));
    gumbels_of_uniforms<Lanes>(u);
    std::memcpy(values + i, u, static_cast<std::size_t>(n - i) * sizeof(float));
  }
#endif
};

/// values[i] = uniform_to_gumbel(values[i]) on `target`'s lanes; every value in (0, 1).
inline void uniforms_to_gumbels(LaneTarget target, std::span<float> values) {
  run_on_lanes<GumbelTransform>(target, values.data(), static_cast<std::int64_t>(values.size()));
}

}  // namespace specdec::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
