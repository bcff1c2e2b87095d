// SPDX-License-Identifier: MIT
// Philox uniforms on a vector unit's width of counters at once (core/lane_isa.hpp's lanes), each
// instruction set's copy compiled for its own target and the widest one the CPU has chosen at run
// time, so a build for the baseline x86-64 runs AVX2 or AVX-512 where the CPU has them. Integer
// rounds and the same conversion: every target gives stream.uniform's bits.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string_view>
#include <utility>

#include "specdec/core/error.hpp"
#include "specdec/core/lane_isa.hpp"
#include "specdec/core/philox.hpp"

// GCC reads the lanes' piecewise initialisation below as possibly uninitialised, and notes ABI
// changes for vectors passed between helpers that are always inlined into one target's copy.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

// Each target's copy is compiled for its target and chosen at run time with GCC; other compilers
// run the widest lanes the build itself targets.
#if defined(SPECDEC_LANES_X86) && !defined(__clang__)
#define SPECDEC_LANES_DISPATCH 1
#endif

namespace specdec::detail {

#if defined(SPECDEC_LANES_X86) || defined(SPECDEC_LANES_NEON)

/// Lanes::kInFlight vectors of counter words: Philox's rounds (philox4x32_10_rounds) run on all of
/// them at once, each multiply's latency hidden behind the others'.
template <class Lanes>
struct WordsInFlight {
  typename Lanes::Words v[Lanes::kInFlight];

  // (Helpers on vectors are always inlined: they only exist inside one target's copy.)
  [[gnu::always_inline]] friend WordsInFlight operator^(const WordsInFlight& a,
                                                       const WordsInFlight& b) {
    WordsInFlight r = a;
    for (int k = 0; k < Lanes::kInFlight; ++k) r.v[k] ^= b.v[k];
    return r;
  }
  [[gnu::always_inline]] friend WordsInFlight operator^(const WordsInFlight& a, std::uint32_t key) {
    WordsInFlight r = a;
    for (int k = 0; k < Lanes::kInFlight; ++k) r.v[k] ^= key;
    return r;
  }
};

template <class Lanes>
struct InFlightMulHiLo {
  [[gnu::always_inline]] void operator()(const WordsInFlight<Lanes>& a, std::uint32_t b, WordsInFlight<Lanes>& hi,
                  WordsInFlight<Lanes>& lo) const {
    for (int k = 0; k < Lanes::kInFlight; ++k) Lanes::mulhilo(a.v[k], b, hi.v[k], lo.v[k]);
  }
};

/// out = the words of a's and b's first halves (second halves if kHigh) interleaved: a0 b0 a1 b1 ...
template <bool kHigh, class V, std::size_t... I>
[[gnu::always_inline]] inline void zip_half(const V& a, const V& b, V& out,
                                            std::index_sequence<I...>) {
  constexpr int lanes = static_cast<int>(sizeof...(I));
  out = __builtin_shufflevector(a, b,
                                static_cast<int>((kHigh ? lanes / 2 : 0) + I / 2 + (I % 2) * lanes)...);
}

template <bool kHigh, class V>
[[gnu::always_inline]] inline void zip_half(const V& a, const V& b, V& out) {
  zip_half<kHigh>(a, b, out, std::make_index_sequence<sizeof(V) / sizeof(a[0])>{});
}

/// Blocks Lanes's kernel draws per step.
template <class Lanes>
inline constexpr int kGroupBlocks = Lanes::kWords * Lanes::kInFlight;

/// out[i] = s.uniform(4 * first_block + i) for i < 4 * groups * kGroupBlocks<Lanes>.
template <class Lanes>
void philox_uniform_groups(const RandomStream& s, std::uint32_t first_block, std::int64_t groups,
                           float* out) {
  using Words = typename Lanes::Words;
  using Pairs = typename Lanes::Pairs;
  using Floats = typename Lanes::Floats;
  constexpr int kWords = Lanes::kWords;
  const Uint4 c = s.counter(first_block);
  Words offsets{};  // 0, 1, 2, ...: the counters' places in a vector
  for (int j = 0; j < kWords; ++j) offsets[j] = static_cast<std::uint32_t>(j);
  for (std::int64_t g = 0; g < groups; ++g) {
    WordsInFlight<Lanes> x{}, y{}, z{}, w{};
    for (int k = 0; k < Lanes::kInFlight; ++k) {
      const auto first = c.x + static_cast<std::uint32_t>(g * kGroupBlocks<Lanes> + k * kWords);
      x.v[k] = offsets + first;
      y.v[k] = Words{} + c.y;
      z.v[k] = Words{} + c.z;
      w.v[k] = Words{} + c.w;
    }
    philox4x32_10_rounds(x, y, z, w, s.key(), InFlightMulHiLo<Lanes>{});
    float* group_out = out + 4 * g * kGroupBlocks<Lanes>;
    for (int k = 0; k < Lanes::kInFlight; ++k) {
      // Draw 4j + i is word i of block j: interleave x with y and z with w, then the pairs.
      Words xy[2], zw[2];
      zip_half<false>(x.v[k], y.v[k], xy[0]);
      zip_half<true>(x.v[k], y.v[k], xy[1]);
      zip_half<false>(z.v[k], w.v[k], zw[0]);
      zip_half<true>(z.v[k], w.v[k], zw[1]);
      Pairs pairs[4];
      for (int h = 0; h < 2; ++h) {
        zip_half<false>(reinterpret_cast<Pairs>(xy[h]), reinterpret_cast<Pairs>(zw[h]), pairs[2 * h]);
        zip_half<true>(reinterpret_cast<Pairs>(xy[h]), reinterpret_cast<Pairs>(zw[h]),
                       pairs[2 * h + 1]);
      }
      const Words words[4] = {reinterpret_cast<Words>(pairs[0]), reinterpret_cast<Words>(pairs[1]),
                              reinterpret_cast<Words>(pairs[2]), reinterpret_cast<Words>(pairs[3])};
      for (int i = 0; i < 4; ++i) {
        // bits_to_open_uniform on every lane.
        const Floats u =
            (__builtin_convertvector(words[i] >> 9, Floats) + 0.5f) * (1.0f / 8388608.0f);
        std::memcpy(group_out + 4 * kWords * k + kWords * i, &u, sizeof u);
      }
    }
  }
}

#endif

// Each target's copy: its lanes' code inlined (flatten) into a function compiled for the target.
#if defined(SPECDEC_LANES_DISPATCH)
#define SPECDEC_LANES_COPY(isa) [[gnu::target(isa), gnu::flatten]] inline
#else
#define SPECDEC_LANES_COPY(isa) inline
#endif

/// The largest group any target draws at once, in blocks.
inline constexpr int kMaxGroupBlocks = 64;

/// Blocks `target` draws per kernel step (1 for the scalar code).
inline int lane_group_blocks(LaneTarget target) {
  switch (target) {
#if defined(SPECDEC_LANES_X86)
    case LaneTarget::kSse2: return kGroupBlocks<Sse2Lanes>;
#if defined(SPECDEC_LANES_DISPATCH) || defined(__AVX2__)
    case LaneTarget::kAvx2: return kGroupBlocks<Avx2Lanes>;
#endif
#if defined(SPECDEC_LANES_DISPATCH) || defined(__AVX512F__)
    case LaneTarget::kAvx512: return kGroupBlocks<Avx512Lanes>;
#endif
#elif defined(SPECDEC_LANES_NEON)
    case LaneTarget::kNeon: return kGroupBlocks<NeonLanes>;
#endif
    default: return 1;
  }
}

inline std::string_view lane_target_name(LaneTarget target) {
  constexpr std::array<std::string_view, 5> names = {"scalar", "sse2", "avx2", "avx512", "neon"};
  return names[static_cast<std::size_t>(target)];
}

/// Every target this build can run on this CPU, narrowest first (the tests compare them all).
inline std::span<const LaneTarget> available_lane_targets() {
  static const auto targets = [] {
    std::array<LaneTarget, 4> list{LaneTarget::kScalar};
    std::size_t n = 1;
#if defined(SPECDEC_LANES_X86)
    list[n++] = LaneTarget::kSse2;
#if defined(SPECDEC_LANES_DISPATCH)
    if (__builtin_cpu_supports("avx2")) list[n++] = LaneTarget::kAvx2;
    if (__builtin_cpu_supports("avx512f")) list[n++] = LaneTarget::kAvx512;
#else
#if defined(__AVX2__)
    list[n++] = LaneTarget::kAvx2;
#endif
#if defined(__AVX512F__)
    list[n++] = LaneTarget::kAvx512;
#endif
#endif
#elif defined(SPECDEC_LANES_NEON)
    list[n++] = LaneTarget::kNeon;
#endif
    return std::pair{list, n};
  }();
  return std::span<const LaneTarget>(targets.first.data(), targets.second);
}

/// The target host noise runs on: the widest available, or the one the environment variable
/// SPECDEC_LANES names (scalar, sse2, avx2, avx512 or neon; to time a narrower unit, or to keep
/// off AVX-512). Asked once per process; the values are the same on every target.
inline LaneTarget host_lane_target() {
  static const LaneTarget target = [] {
    const auto targets = available_lane_targets();
    const char* chosen = std::getenv("SPECDEC_LANES");
    if (chosen == nullptr || *chosen == '\0') return targets.back();
    for (const LaneTarget t : targets) {
      if (lane_target_name(t) == chosen) return t;
    }
    std::string available;
    for (const LaneTarget t : targets) available += fmt::format(" {}", lane_target_name(t));
    fail("SPECDEC_LANES", "'{}' is not one of the targets this build and CPU run:{}", chosen,
         available);
  }();
  return target;
}

/// Kernel::run<Lanes>(args...) in the copy compiled for `target` (one of available_lane_targets()),
/// Kernel::run_scalar(args...) for LaneTarget::kScalar: other host loops chosen at run time as
/// Philox's are (core/gumbel_lanes.hpp, the bound loop of draft/gumbel_topk.hpp). Each copy's
/// target is exactly its lanes' (a tuning option more and GCC calls their helpers out of line).
#if defined(SPECDEC_LANES_X86)
template <class Kernel, class... Args>
SPECDEC_LANES_COPY("sse2")
void run_lanes_sse2(Args... args) {
  Kernel::template run<Sse2Lanes>(args...);
}
#if defined(SPECDEC_LANES_DISPATCH) || defined(__AVX2__)
template <class Kernel, class... Args>
SPECDEC_LANES_COPY("avx2")
void run_lanes_avx2(Args... args) {
  Kernel::template run<Avx2Lanes>(args...);
}
#endif
#if defined(SPECDEC_LANES_DISPATCH) || defined(__AVX512F__)
template <class Kernel, class... Args>
SPECDEC_LANES_COPY("avx512f")
void run_lanes_avx512(Args... args) {
  Kernel::template run<Avx512Lanes>(args...);
}
#endif
#endif
template <class Kernel, class... Args>
void run_on_lanes(LaneTarget target, Args... args) {
  switch (target) {
#if defined(SPECDEC_LANES_X86)
    case LaneTarget::kSse2:
      return run_lanes_sse2<Kernel>(args...);
#if defined(SPECDEC_LANES_DISPATCH) || defined(__AVX2__)
    case LaneTarget::kAvx2:
      return run_lanes_avx2<Kernel>(args...);
#endif
#if defined(SPECDEC_LANES_DISPATCH) || defined(__AVX512F__)
    case LaneTarget::kAvx512:
      return run_lanes_avx512<Kernel>(args...);
#endif
#elif defined(SPECDEC_LANES_NEON)
    case LaneTarget::kNeon:
      return Kernel::template run<NeonLanes>(args...);
#endif
    default:
      return Kernel::run_scalar(args...);
  }
}

/// run_on_lanes' kernel of philox_uniform_blocks: `groups` lane groups of blocks from
/// `first_block` (one block a group on the scalar path).
struct PhiloxUniformGroups {
#if defined(SPECDEC_LANES_X86) || defined(SPECDEC_LANES_NEON)
  template <class Lanes>
  static void run(RandomStream s, std::uint32_t first_block, std::int64_t groups, float* out) {
    philox_uniform_groups<Lanes>(s, first_block, groups, out);
  }
#endif
  static void run_scalar(RandomStream s, std::uint32_t first_block, std::int64_t groups,
                         float* out) {
    for (std::int64_t j = 0; j < groups; ++j) {
      const Uint4 block = s.block(first_block + static_cast<std::uint32_t>(j));
      for (int k = 0; k < 4; ++k) out[4 * j + k] = bits_to_open_uniform(block[k]);
    }
  }
};

/// out[i] = s.uniform(4 * first_block + i) for i < 4 * blocks, on `target`'s lanes (one of
/// available_lane_targets()).
inline void philox_uniform_blocks(LaneTarget target, const RandomStream& s,
                                  std::uint32_t first_block, std::int64_t blocks, float* out) {
  const int group = lane_group_blocks(target);
  const auto run = [&](std::uint32_t first, std::int64_t groups, float* values) {
    run_on_lanes<PhiloxUniformGroups>(target, s, first, groups, values);
  };
  const std::int64_t groups = blocks / group;
  run(first_block, groups, out);
  const std::int64_t done = groups * group;
  if (done == blocks) return;
  // The last blocks: one more step into a buffer (the rounds cost more than the copy).
  float rest[4 * kMaxGroupBlocks];
  run(first_block + static_cast<std::uint32_t>(done), 1, rest);
  std::copy_n(rest, 4 * (blocks - done), out + 4 * done);
}

}  // namespace specdec::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
