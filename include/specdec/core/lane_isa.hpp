// SPDX-License-Identifier: MIT
// Private: the instruction sets the host noise runs on, as vectors of 32-bit words (GCC / Clang
// vector extensions) and the operations the extensions cannot express well: Philox's
// 32 x 32 -> 64 multiply, and the Gumbel transform's multiply-add fused exactly when packet_madd
// is. These are the noise's only intrinsics. Each multiply is compiled for its
// own target, so a build for the baseline CPU can still call the wider ones once the CPU says it
// has them (core/philox_lanes.hpp chooses).
#pragma once

#include <cstdint>

#include "specdec/core/packet_log.hpp"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__CUDACC__)
#include <immintrin.h>
#define SPECDEC_LANES_X86 1
#elif defined(__GNUC__) && defined(__aarch64__) && defined(__ARM_NEON) && !defined(__CUDACC__)
#include <arm_neon.h>
#define SPECDEC_LANES_NEON 1
#endif

// GCC notes ABI changes for vectors passed to helpers that are always inlined into one target's
// copy.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace specdec::detail {

#if defined(SPECDEC_LANES_X86) && !SPECDEC_PACKET_FMA
// a * b + c in two roundings, as packet_madd without FMA: the empty asm keeps the compiler from
// fusing the product, or a product that c is, into the sum (an AVX-512 target implies FMA).
#define SPECDEC_UNFUSED_MADD(a, b, c)            \
  do {                                           \
    Floats product = (a) * (b), addend = (c);    \
    asm("" : "+v"(product), "+v"(addend));       \
    return product + addend;                     \
  } while (false)
#endif

/// Where host noise is computed: one word at a time, or a vector unit's width of words at once.
enum class LaneTarget { kScalar, kSse2, kAvx2, kAvx512, kNeon };

#if defined(SPECDEC_LANES_X86)

/// SSE2 (every x86-64 CPU): four words, two counter vectors in flight (16 registers).
struct Sse2Lanes {
  static constexpr LaneTarget kTarget = LaneTarget::kSse2;
  static constexpr int kWords = 4, kInFlight = 2;
  static constexpr int kGumbelVectors = 1;  // Gumbel transforms in flight (16 registers)
  using Words = std::uint32_t __attribute__((vector_size(16)));
  using Pairs = std::uint64_t __attribute__((vector_size(16)));
  using Floats = float __attribute__((vector_size(16)));
  /// hi:lo = a * b per word: the even words, then the odd ones, multiplied as 64-bit lanes.
  [[gnu::target("sse2")]] static void mulhilo(const Words& a, std::uint32_t b, Words& hi, Words& lo) {
    const __m128i factor = _mm_set1_epi32(static_cast<int>(b));
    const auto even = reinterpret_cast<Pairs>(_mm_mul_epu32(reinterpret_cast<__m128i>(a), factor));
    const auto odd = reinterpret_cast<Pairs>(
        _mm_mul_epu32(_mm_srli_epi64(reinterpret_cast<__m128i>(a), 32), factor));
    lo = reinterpret_cast<Words>((even & 0xffffffffu) | (odd << 32));
    hi = reinterpret_cast<Words>((even >> 32) | (odd & 0xffffffff00000000u));
  }
  /// a * b + c rounded as packet_madd rounds it.
  [[gnu::target("sse2")]] static Floats madd(Floats a, Floats b, Floats c) {
#if SPECDEC_PACKET_FMA
    return reinterpret_cast<Floats>(_mm_fmadd_ps(
        reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b), reinterpret_cast<__m128>(c)));
#else
    SPECDEC_UNFUSED_MADD(a, b, c);
#endif
  }
};

/// AVX2: eight words, four counter vectors in flight (the multiply's latency hidden).
struct Avx2Lanes {
  static constexpr LaneTarget kTarget = LaneTarget::kAvx2;
  static constexpr int kWords = 8, kInFlight = 4;
  static constexpr int kGumbelVectors = 1;  // (two spill the 16 registers' constants)
  using Words = std::uint32_t __attribute__((vector_size(32)));
  using Pairs = std::uint64_t __attribute__((vector_size(32)));
  using Floats = float __attribute__((vector_size(32)));
  [[gnu::target("avx2")]] static void mulhilo(const Words& a, std::uint32_t b, Words& hi, Words& lo) {
    const __m256i factor = _mm256_set1_epi32(static_cast<int>(b));
    const __m256i even = _mm256_mul_epu32(reinterpret_cast<__m256i>(a), factor);
    const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(reinterpret_cast<__m256i>(a), 32), factor);
    // One blend per half: the odd words' products already sit in the odd lanes' places.
    lo = reinterpret_cast<Words>(_mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xaa));
    hi = reinterpret_cast<Words>(_mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xaa));
  }
  [[gnu::target("avx2")]] static Floats madd(Floats a, Floats b, Floats c) {
#if SPECDEC_PACKET_FMA
    return reinterpret_cast<Floats>(_mm256_fmadd_ps(
        reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b), reinterpret_cast<__m256>(c)));
#else
    SPECDEC_UNFUSED_MADD(a, b, c);
#endif
  }
};

/// AVX-512: sixteen words, four counter vectors in flight.
struct Avx512Lanes {
  static constexpr LaneTarget kTarget = LaneTarget::kAvx512;
  static constexpr int kWords = 16, kInFlight = 4;
  static constexpr int kGumbelVectors = 2;  // (32 registers)
  using Words = std::uint32_t __attribute__((vector_size(64)));
  using Pairs = std::uint64_t __attribute__((vector_size(64)));
  using Floats = float __attribute__((vector_size(64)));
  [[gnu::target("avx512f")]] static void mulhilo(const Words& a, std::uint32_t b, Words& hi,
                                                 Words& lo) {
    const __m512i factor = _mm512_set1_epi32(static_cast<int>(b));
    // (Zero-masked multiplies and the extensions' shifts: GCC's unmasked forms read an undefined
    // register, which its uninitialised-value warning reports.)
    const auto words = reinterpret_cast<Pairs>(a);
    const auto even = reinterpret_cast<Pairs>(
        _mm512_maskz_mul_epu32(0xff, reinterpret_cast<__m512i>(words), factor));
    const auto odd = reinterpret_cast<Pairs>(
        _mm512_maskz_mul_epu32(0xff, reinterpret_cast<__m512i>(words >> 32), factor));
    lo = reinterpret_cast<Words>((even & 0xffffffffu) | (odd << 32));
    hi = reinterpret_cast<Words>((even >> 32) | (odd & 0xffffffff00000000u));
  }
  [[gnu::target("avx512f")]] static Floats madd(Floats a, Floats b, Floats c) {
#if SPECDEC_PACKET_FMA
    return reinterpret_cast<Floats>(_mm512_fmadd_ps(
        reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b), reinterpret_cast<__m512>(c)));
#else
    SPECDEC_UNFUSED_MADD(a, b, c);
#endif
  }
};

#elif defined(SPECDEC_LANES_NEON)

/// NEON (every AArch64 CPU): four words, four counter vectors in flight (32 registers).
struct NeonLanes {
  static constexpr LaneTarget kTarget = LaneTarget::kNeon;
  static constexpr int kWords = 4, kInFlight = 4;
  static constexpr int kGumbelVectors = 2;  // (32 registers)
  using Words = std::uint32_t __attribute__((vector_size(16)));
  using Pairs = std::uint64_t __attribute__((vector_size(16)));
  using Floats = float __attribute__((vector_size(16)));
  /// Widening multiplies of the low and the high two words, then the products' halves unzipped.
  static void mulhilo(const Words& a, std::uint32_t b, Words& hi, Words& lo) {
    const auto words = reinterpret_cast<uint32x4_t>(a);
    const uint32x4_t low = vreinterpretq_u32_u64(vmull_n_u32(vget_low_u32(words), b));
    const uint32x4_t high = vreinterpretq_u32_u64(vmull_high_n_u32(words, b));
    lo = reinterpret_cast<Words>(vuzp1q_u32(low, high));
    hi = reinterpret_cast<Words>(vuzp2q_u32(low, high));
  }
  // AArch64 always has FMA, and packet_madd always fuses there.
  static_assert(SPECDEC_PACKET_FMA);
  static Floats madd(Floats a, Floats b, Floats c) {
    return reinterpret_cast<Floats>(vfmaq_f32(reinterpret_cast<float32x4_t>(c),
                                              reinterpret_cast<float32x4_t>(a),
                                              reinterpret_cast<float32x4_t>(b)));
  }
};

#endif

}  // namespace specdec::detail

#undef SPECDEC_UNFUSED_MADD

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
