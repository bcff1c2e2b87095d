// SPDX-License-Identifier: MIT
// Host fills of many draws of one RandomStream: the one place the library fills uniforms or Gumbels
// in bulk. The Philox rounds (detail::philox4x32_10_rounds) run on 16 counters side by side in a
// vector of words, and the Gumbel transform's logs are packet_log's in a vectorised loop: every
// value equals stream.uniform(first + i) / stream.gumbel(first + i) bit for bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__AVX512F__) && defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "specdec/core/packet_log.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/row_loop.hpp"



namespace specdec {
namespace detail {

inline constexpr int kPhiloxLanes = 16;

#if defined(__GNUC__)
/// Sixteen 32-bit words side by side: sixteen Philox counters go through the rounds at once.
using PhiloxLanes = std::uint32_t __attribute__((vector_size(4 * kPhiloxLanes)));

/// mulhilo on sixteen lanes: the even and the odd lanes multiplied as 64-bit lanes, whose halves
/// are the words' high and low parts. With AVX-512 an unsigned 32 x 32 -> 64 multiply does it
/// (GCC would pick the slower 64 x 64 one).
struct LanesMulHiLo {
  // (Vectors by reference: a 64-byte vector by value has an ISA-dependent ABI.)
  void operator()(const PhiloxLanes& a, std::uint32_t b, PhiloxLanes& hi, PhiloxLanes& lo) const {
    using Wide = std::uint64_t __attribute__((vector_size(4 * kPhiloxLanes)));
    const auto words = reinterpret_cast<Wide>(a);
#if defined(__AVX512F__) && defined(__x86_64__)
    const __m512i factor = _mm512_set1_epi64(static_cast<long long>(b));
    const auto even = reinterpret_cast<Wide>(_mm512_mul_epu32(reinterpret_cast<__m512i>(words), factor));
    const auto odd =
        reinterpret_cast<Wide>(_mm512_mul_epu32(reinterpret_cast<__m512i>(words >> 32), factor));
#else
    const auto even = (words & 0xffffffffu) * b;
    const auto odd = (words >> 32) * b;
#endif
    lo = reinterpret_cast<PhiloxLanes>((even & 0xffffffffu) | (odd << 32));
    hi = reinterpret_cast<PhiloxLanes>((even >> 32) | (odd & 0xffffffff00000000u));
  }
};
#endif

/// Draws 4*first_block .. 4*(first_block + kPhiloxLanes) - 1 of `s` as open uniforms.
inline void philox_uniform_batch(const RandomStream& s, std::uint32_t first_block, float* out) {
#if defined(__GNUC__)
  const Uint4 c = s.counter(first_block);
  PhiloxLanes x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  x += c.x;
  PhiloxLanes y = PhiloxLanes{} + c.y, z = PhiloxLanes{} + c.z, w = PhiloxLanes{} + c.w;
  philox4x32_10_rounds(x, y, z, w, s.key(), LanesMulHiLo{});
  // Draw 4j + k is word k of block j: interleave the four words, then the pairs.
  const PhiloxLanes xy0 = __builtin_shufflevector(x, y, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const PhiloxLanes xy1 = __builtin_shufflevector(x, y, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const PhiloxLanes zw0 = __builtin_shufflevector(z, w, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const PhiloxLanes zw1 = __builtin_shufflevector(z, w, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  using Pairs = std::uint64_t __attribute__((vector_size(4 * kPhiloxLanes)));
  const auto xy0p = reinterpret_cast<Pairs>(xy0), xy1p = reinterpret_cast<Pairs>(xy1);
  const auto zw0p = reinterpret_cast<Pairs>(zw0), zw1p = reinterpret_cast<Pairs>(zw1);
  const PhiloxLanes words[4] = {
      reinterpret_cast<PhiloxLanes>(__builtin_shufflevector(xy0p, zw0p, 0, 8, 1, 9, 2, 10, 3, 11)),
      reinterpret_cast<PhiloxLanes>(__builtin_shufflevector(xy0p, zw0p, 4, 12, 5, 13, 6, 14, 7, 15)),
      reinterpret_cast<PhiloxLanes>(__builtin_shufflevector(xy1p, zw1p, 0, 8, 1, 9, 2, 10, 3, 11)),
      reinterpret_cast<PhiloxLanes>(__builtin_shufflevector(xy1p, zw1p, 4, 12, 5, 13, 6, 14, 7, 15))};
  using Floats = float __attribute__((vector_size(4 * kPhiloxLanes)));
  for (int k = 0; k < 4; ++k) {
    // bits_to_open_uniform on every lane.
    const Floats u = (__builtin_convertvector(words[k] >> 9, Floats) + 0.5f) * (1.0f / 8388608.0f);
    std::memcpy(out + kPhiloxLanes * k, &u, sizeof u);
  }
#else
  for (std::uint32_t j = 0; j < kPhiloxLanes; ++j) {
    const Uint4 block = s.block(first_block + j);
    for (int k = 0; k < 4; ++k) out[4 * j + k] = bits_to_open_uniform(block[k]);
  }
#endif
}

/// values[i] = uniform_to_gumbel(values[i]) (packet_log is branch-free: the loop vectorises).
SPECDEC_ROW_LOOP inline void uniforms_to_gumbels_loop(float* values, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) values[i] = uniform_to_gumbel(values[i]);
}
inline void uniforms_to_gumbels(std::span<float> values) {
  uniforms_to_gumbels_loop(values.data(), static_cast<std::int64_t>(values.size()));
}

}  // namespace detail

/// out[i] = stream.uniform(first + i).
inline void fill_uniforms(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  float* values = out.data();
  const auto n = static_cast<std::int64_t>(out.size());
  // Draws up to a Philox block boundary one at a time, then 16 blocks at once, then the rest.
  const std::int64_t head = std::min<std::int64_t>(n, (4u - (first & 3u)) & 3u);
  for (std::int64_t i = 0; i < head; ++i) {
    values[i] = stream.uniform(first + static_cast<std::uint32_t>(i));
  }
  constexpr std::int64_t kBatch = 4 * detail::kPhiloxLanes;
  const std::int64_t batches = (n - head) / kBatch;
  for (std::int64_t b = 0; b < batches; ++b) {
    const std::int64_t i = head + b * kBatch;
    detail::philox_uniform_batch(stream, (first + static_cast<std::uint32_t>(i)) >> 2, values + i);
  }
  const std::int64_t done = head + batches * kBatch;
  const int tail = static_cast<int>(n - done);  // fewer than kBatch
  for (int j = 0; j < tail; ++j) {
    values[done + j] = stream.uniform(first + static_cast<std::uint32_t>(done + j));
  }
}

/// out[i] = stream.gumbel(first + i), bit for bit.
inline void fill_gumbels(const RandomStream& stream, std::uint32_t first, std::span<float> out) {
  fill_uniforms(stream, first, out);
  detail::uniforms_to_gumbels(out);
}

}  // namespace specdec
