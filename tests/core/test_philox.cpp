// SPDX-License-Identifier: MIT
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <set>
#include <span>
#include <vector>

#include "specdec/core/noise.hpp"
#include "specdec/core/philox.hpp"
#include "support/stats.hpp"

using namespace specdec;

TEST_CASE("philox4x32-10 reproduces the Random123 known-answer vectors", "[core][philox]") {
  CHECK(detail::philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
        detail::Uint4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(detail::philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                      {0xffffffffu, 0xffffffffu}) ==
        detail::Uint4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(detail::philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                      {0xa4093822u, 0x299f31d0u}) ==
        detail::Uint4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("open uniforms never reach 0 or 1", "[core][philox]") {
  CHECK(detail::bits_to_open_uniform(0u) > 0.0f);
  CHECK(detail::bits_to_open_uniform(0xffffffffu) < 1.0f);
  CHECK(detail::bits_to_open_uniform(0u) == std::ldexp(1.0f, -24));
  CHECK(detail::bits_to_open_uniform(0xffffffffu) == 1.0f - std::ldexp(1.0f, -24));
  CHECK(std::isfinite(detail::uniform_to_gumbel(detail::bits_to_open_uniform(0u))));
  CHECK(std::isfinite(detail::uniform_to_gumbel(detail::bits_to_open_uniform(0xffffffffu))));
}

TEST_CASE("a draw depends only on its coordinates", "[core][philox]") {
  const RandomStream a{42, 7, 100, 3, Domain::kVerify};
  RandomStream b = a;
  CHECK(a.uniform(5) == b.uniform(5));
  // Every coordinate changes the draw.
  CHECK(a.uniform(5) != a.uniform(6));
  CHECK(a.uniform(5) != a.at_node(4).uniform(5));
  CHECK(a.uniform(5) != a.at_position(101).uniform(5));
  CHECK(a.uniform(5) != a.in_domain(Domain::kDraft).uniform(5));
  b.sequence = 8;
  CHECK(a.uniform(5) != b.uniform(5));
  b = a;
  b.seed = 43;
  CHECK(a.uniform(5) != b.uniform(5));
}

TEST_CASE("draft and verify domains use disjoint counters", "[core][philox]") {
  // The domain sits in bits 24..27 of the second counter word, above every valid node id.
  const RandomStream draft{1, 0, 0, kMaxNode, Domain::kDraft};
  const RandomStream verify{1, 0, 0, 0, Domain::kVerify};
  std::set<std::uint32_t> seen;
  for (std::uint32_t i = 0; i < 64; ++i) seen.insert(draft.bits(i));
  for (std::uint32_t i = 0; i < 64; ++i) CHECK(seen.count(verify.bits(i)) == 0);
}

TEST_CASE("uniforms pass a chi-square test on 16 bins", "[core][philox]") {
  // False-failure probability: kFalseFailureProbability (1e-6).
  const RandomStream s{123, 0, 0, 0, Domain::kUser};
  std::vector<std::int64_t> counts(16, 0);
  const int n = 200000;
  for (int i = 0; i < n; ++i)
    ++counts[static_cast<std::size_t>(s.uniform(static_cast<std::uint32_t>(i)) * 16)];
  const std::vector<double> expected(16, 1.0 / 16);
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("gumbel draws have the standard Gumbel mean", "[core][philox]") {
  // Mean = Euler-Mascheroni 0.5772, sd = pi/sqrt(6) = 1.2825; 6 standard errors at n = 2e5 is
  // 0.0172, so the false-failure probability is about 2e-9.
  const RandomStream s{5, 1, 2, 3, Domain::kDraft};
  double sum = 0.0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += s.gumbel(static_cast<std::uint32_t>(i));
  CHECK(std::abs(sum / n - 0.5772156649) < 0.0172);
}

TEST_CASE("supplied uniforms are checked and replayed", "[core][philox]") {
  const std::vector<float> good = {0.25f, 0.5f};
  const SuppliedUniforms u(good);
  CHECK(u.uniform(1) == 0.5f);
  CHECK_THROWS_WITH(u.uniform(2), Catch::Contains("uniforms") && Catch::Contains("only 2"));
  const std::vector<float> zero = {0.5f, 0.0f};
  CHECK_THROWS_WITH(SuppliedUniforms(zero), Catch::Contains("uniforms[1]"));
  const std::vector<float> one = {1.0f};
  CHECK_THROWS_AS(SuppliedUniforms(one), Error);
  STATIC_REQUIRE(UniformSource<RandomStream>);
  STATIC_REQUIRE(UniformSource<SuppliedUniforms>);
}

TEST_CASE("host batch fills equal draw-by-draw draws", "[core][philox]") {
  const RandomStream s{2024, 5, 77, 12, Domain::kDraft};
  for (const std::uint32_t first : {0u, 3u, 64u, 1001u}) {
    std::vector<float> u(203), g(203);
    fill_uniforms(s, first, u);
    fill_gumbels(s, first, g);
    for (std::uint32_t i = 0; i < u.size(); ++i) {
      CHECK(u[i] == s.uniform(first + i));  // bit-identical
      CHECK(g[i] == s.gumbel(first + i));
    }
  }
}

TEST_CASE("the vectorised Gumbel fill equals stream.gumbel bit for bit on 10^5 draws",
          "[core][philox]") {
  // One Gumbel transform: the fill's vectorised logs and the scalar draw give the same bits.
  const RandomStream s{99, 1, 2, 3, Domain::kDraft};
  constexpr std::uint32_t kDraws = 100000;
  std::vector<float> g(kDraws);
  fill_gumbels(s, 5, g);
  std::int64_t mismatches = 0;
  for (std::uint32_t i = 0; i < kDraws; ++i) {
    mismatches += detail::float_bits(g[i]) == detail::float_bits(s.gumbel(5 + i)) ? 0 : 1;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("philox4x32_10_rounds on one word is Random123's bijection", "[core][philox]") {
  const detail::Uint2 key{0xa4093822u, 0x299f31d0u};
  std::uint32_t x = 0x243f6a88u, y = 0x85a308d3u, z = 0x13198a2eu, w = 0x03707344u;
  detail::philox4x32_10_rounds(x, y, z, w, key, detail::ScalarMulHiLo{});
  // Random123's known-answer vector for philox4x32-10 with this counter and key.
  CHECK(detail::Uint4{x, y, z, w} == detail::Uint4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}


TEST_CASE("every SIMD target this CPU runs gives stream.uniform's bits", "[core][philox]") {
  // Starts on and off a target's group, lengths around a group, and counters that wrap at 2^32.
  const RandomStream s{0x0123456789abcdefull, 9, 4, 321, Domain::kDraft};
  const auto targets = detail::available_lane_targets();
  REQUIRE(targets.front() == detail::LaneTarget::kScalar);
#if defined(__x86_64__) || defined(__aarch64__)
  REQUIRE(targets.size() >= 2);  // a vector target is compiled in and runs
#endif
  for (const detail::LaneTarget target : targets) {
    INFO("target " << detail::lane_target_name(target));
    for (const std::uint32_t first_block : {0u, 5u, 0xffffffffu - 40u}) {
      for (const std::int64_t blocks : {0, 1, 15, 64, 65, 200}) {
        std::vector<float> u(static_cast<std::size_t>(4 * blocks));
        detail::philox_uniform_blocks(target, s, first_block, blocks, u.data());
        std::int64_t mismatches = 0;
        for (std::uint32_t i = 0; i < u.size(); ++i) {
          const float expected =
              detail::bits_to_open_uniform(s.block(first_block + i / 4)[static_cast<int>(i % 4)]);
          mismatches += detail::float_bits(u[i]) == detail::float_bits(expected) ? 0 : 1;
        }
        CHECK(mismatches == 0);
      }
    }
  }
}

TEST_CASE("every SIMD target's Gumbel transform gives uniform_to_gumbel's bits", "[core][philox]") {
  // Every 13th of the 2^23 uniforms (k + 1/2) 2^-23 (fewer in the sanitizer build) and the
  // largest, in chunks that leave a remainder for the padded last vectors.
  const std::uint32_t count = 1u << 23, stride = 13 * (count / test::monte_carlo_runs(count));
  std::vector<std::uint32_t> ks;
  for (std::uint32_t k = 0; k < count; k += stride) ks.push_back(k);
  ks.push_back(count - 1);
  std::vector<float> expected(ks.size());
  for (std::size_t i = 0; i < ks.size(); ++i) {
    expected[i] = detail::uniform_to_gumbel(detail::bits_to_open_uniform(ks[i] << 9));
  }
  for (const detail::LaneTarget target : detail::available_lane_targets()) {
    INFO("target " << detail::lane_target_name(target));
    std::vector<float> g(ks.size());
    for (std::size_t i = 0; i < ks.size(); ++i) g[i] = detail::bits_to_open_uniform(ks[i] << 9);
    for (std::size_t b = 0; b < g.size(); b += 4099) {
      detail::uniforms_to_gumbels(
          target, std::span<float>(g).subspan(b, std::min<std::size_t>(4099, g.size() - b)));
    }
    std::int64_t mismatches = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      mismatches += detail::float_bits(g[i]) == detail::float_bits(expected[i]) ? 0 : 1;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("the host fills run on the widest SIMD target this CPU runs", "[core][philox]") {
  const auto targets = detail::available_lane_targets();
  if (std::getenv("SPECDEC_LANES") == nullptr) CHECK(detail::host_lane_target() == targets.back());
  CHECK(std::find(targets.begin(), targets.end(), detail::host_lane_target()) != targets.end());
}
