// SPDX-License-Identifier: MIT
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) and the
// counter layout every algorithm in the library draws from.
//
// Key     = the 64-bit seed.
// Counter = (draw / 4, node | domain << 24, position, sequence); a draw is one 32-bit lane.
// A draw therefore depends only on (seed, sequence, position, node, domain, draw index): never on
// batch layout, thread count or call order.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>

#include "specdec/config.hpp"
#include "specdec/core/packet_log.hpp"
#if !defined(__CUDACC__)
#include "specdec/core/error.hpp"  // host only: fmt is kept out of nvcc translation units
#endif

namespace specdec {

/// Which value of a draw a bulk fill writes: RandomStream::uniform or RandomStream::gumbel.
enum class RandomKind { kUniform, kGumbel };

namespace detail {

/// One Philox counter or output block: four 32-bit lanes.
struct Uint4 {
  std::uint32_t x, y, z, w;
  SPECDEC_HOST_DEVICE std::uint32_t operator[](int i) const {
    return i == 0 ? x : i == 1 ? y : i == 2 ? z : w;
  }
  friend bool operator==(const Uint4&, const Uint4&) = default;
};

/// One Philox key: two 32-bit words.
struct Uint2 {
  std::uint32_t x, y;
};

inline constexpr std::uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

/// The high and low halves of the 64-bit product of two 32-bit words.
struct ScalarMulHiLo {
  SPECDEC_HOST_DEVICE void operator()(std::uint32_t a, std::uint32_t b, std::uint32_t& hi,
                                      std::uint32_t& lo) const {
    const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
    hi = static_cast<std::uint32_t>(product >> 32);
    lo = static_cast<std::uint32_t>(product);
  }
};

/// Philox4x32-10 on the counter (x, y, z, w), replaced by its output block. U is one 32-bit word,
/// or a host vector of them (counters side by side, core/philox_lanes.hpp) with its own `mulhilo`.
template <class U, class MulHiLo>
SPECDEC_HOST_DEVICE void philox4x32_10_rounds(U& x, U& y, U& z, U& w, Uint2 key,
                                              const MulHiLo& mulhilo) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.x += kPhiloxWeyl0;
      key.y += kPhiloxWeyl1;
    }
    U hi0{}, lo0{}, hi1{}, lo1{};
    mulhilo(x, kPhiloxMul0, hi0, lo0);
    mulhilo(z, kPhiloxMul1, hi1, lo1);
    x = hi1 ^ y ^ key.x;
    y = lo1;
    z = hi0 ^ w ^ key.y;
    w = lo0;
  }
}

/// The Philox4x32 bijection with 10 rounds (Random123's philox4x32-10).
SPECDEC_HOST_DEVICE Uint4 philox4x32_10(Uint4 counter, Uint2 key) {
  philox4x32_10_rounds(counter.x, counter.y, counter.z, counter.w, key, ScalarMulHiLo{});
  return counter;
}

/// Maps 32 random bits to a float strictly inside (0, 1): (k + 1/2) / 2^23 for the top 23 bits.
/// Every value is exactly representable, the smallest is 2^-24 and the largest 1 - 2^-24.
SPECDEC_HOST_DEVICE float bits_to_open_uniform(std::uint32_t bits) {
  return (static_cast<float>(bits >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

/// A standard Gumbel variate from a uniform in (0, 1): -log(-log(u)), both logs packet_log's, so
/// a vectorised host fill (core/noise.hpp), a scalar draw and a CUDA thread give the same bits.
SPECDEC_NOISE_INLINE float uniform_to_gumbel(float u) {
  return -packet_log(-packet_log(u));
}

}  // namespace detail

/// Which part of an algorithm draws: disjoint counter ranges for drafting and verification.
enum class Domain : std::uint32_t {
  kDraft = 1,   // drafting (i.i.d. draws, Gumbel noise, beam sampling)
  kVerify = 2,  // acceptance tests and correction / bonus draws
  kSample = 3,  // plain sampling from the target (autoregressive reference)
  kUser = 15,   // free for callers
};

inline constexpr std::uint32_t kMaxNode = (1u << 24) - 1;

/// The random numbers of one (sequence, position, node, domain): an indexable stream of uniforms.
/// Cheap to copy; `uniform(i)` is a pure function of the fields and `i`.
struct RandomStream {
  std::uint64_t seed = 0;
  std::uint32_t sequence = 0;
  std::uint32_t position = 0;
  std::uint32_t node = 0;  // < 2^24
  Domain domain = Domain::kVerify;

  SPECDEC_HOST_DEVICE detail::Uint2 key() const {
    return {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)};
  }
  /// The Philox counter of draws 4*block .. 4*block+3.
  SPECDEC_HOST_DEVICE detail::Uint4 counter(std::uint32_t block_index) const {
    return {block_index, node | (static_cast<std::uint32_t>(domain) << 24), position, sequence};
  }
  /// Four 32-bit lanes: draws 4*block .. 4*block+3.
  SPECDEC_HOST_DEVICE detail::Uint4 block(std::uint32_t block_index) const {
    return detail::philox4x32_10(counter(block_index), key());
  }
  SPECDEC_HOST_DEVICE std::uint32_t bits(std::uint32_t draw) const {
    return block(draw >> 2)[static_cast<int>(draw & 3u)];
  }
  /// A uniform strictly inside (0, 1).
  SPECDEC_HOST_DEVICE float uniform(std::uint32_t draw) const {
    return detail::bits_to_open_uniform(bits(draw));
  }
  SPECDEC_HOST_DEVICE float gumbel(std::uint32_t draw) const {
    return detail::uniform_to_gumbel(uniform(draw));
  }
  /// The same stream at another node (children of a tree node, say).
  SPECDEC_HOST_DEVICE RandomStream at_node(std::uint32_t n) const {
    RandomStream s = *this;
    s.node = n;
    return s;
  }
  SPECDEC_HOST_DEVICE RandomStream at_position(std::uint32_t p) const {
    RandomStream s = *this;
    s.position = p;
    return s;
  }
  SPECDEC_HOST_DEVICE RandomStream in_domain(Domain d) const {
    RandomStream s = *this;
    s.domain = d;
    return s;
  }
};

#if !defined(__CUDACC__)
/// Uniforms supplied by the caller (to compare two backends bit for bit, or to replay a run).
/// Draw i reads values[i]; each value must lie strictly inside (0, 1).
struct SuppliedUniforms {
  std::span<const float> values;

  /// Throws specdec::Error if a value is outside (0, 1).
  explicit SuppliedUniforms(std::span<const float> v, std::string_view name = "uniforms")
      : values(v) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!(v[i] > 0.0f && v[i] < 1.0f)) {
        detail::fail(fmt::format("{}[{}]", name, i), "{} is not strictly inside (0, 1)", v[i]);
      }
    }
  }
  float uniform(std::uint32_t draw) const {
    if (draw >= values.size()) {
      detail::fail("uniforms", "draw {} requested but only {} uniforms were supplied", draw,
                   values.size());
    }
    return values[draw];
  }
  float gumbel(std::uint32_t draw) const { return detail::uniform_to_gumbel(uniform(draw)); }
};
#endif  // !defined(__CUDACC__)

/// Anything an algorithm can draw uniforms from: RandomStream or SuppliedUniforms.
template <class S>
concept UniformSource = requires(const S& s, std::uint32_t i) {
  { s.uniform(i) } -> std::convertible_to<float>;
};

}  // namespace specdec
