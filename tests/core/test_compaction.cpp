// SPDX-License-Identifier: MIT
// The compactions and selections of core/compaction.hpp: every target the CPU runs (scalar, AVX2,
// AVX-512) keeps the entries a plain loop keeps, in the same order, and the run-time choice
// follows the lanes' (core/philox_lanes.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "specdec/core/compaction.hpp"
#include "specdec/toy/random.hpp"

using namespace specdec;

namespace {

/// The compaction targets this CPU runs, scalar first.
std::vector<detail::CompactTarget> compact_targets() {
  const auto targets = detail::available_compact_targets();
  return {targets.begin(), targets.end()};
}

/// normal(0, 3) values with ties, infinities and a NaN mixed in.
std::vector<float> test_values(std::int64_t n, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(3.0 * rng.normal());
  for (std::size_t i = 0; i < v.size(); i += 37) v[i] = 1.5f;
  if (n > 10) {
    v[3] = INFINITY;
    v[5] = -INFINITY;
    v[7] = NAN;
  }
  return v;
}

}  // namespace

TEST_CASE("compaction: a default x86 build dispatches to the widest target the CPU has",
          "[compaction]") {
  const auto targets = compact_targets();
  REQUIRE(targets.front() == detail::CompactTarget::kScalar);
#if defined(__x86_64__) && (defined(__AVX2__) || !defined(SPECDEC_NO_CPU_CLONES))
  if (__builtin_cpu_supports("avx2")) REQUIRE(targets.size() >= 2);
  if (__builtin_cpu_supports("avx512f")) CHECK(targets.back() == detail::CompactTarget::kAvx512);
#endif
  const char* lanes = std::getenv("SPECDEC_LANES");
  if (lanes == nullptr || *lanes == '\0') {
    CHECK(detail::host_compact_target() == targets.back());
  } else {
    // SPECDEC_LANES narrows the compactions as it narrows the noise: scalar below AVX2.
    CHECK(detail::host_compact_target() ==
          std::min(targets.back(), detail::compact_target_of(detail::host_lane_target())));
  }
  CHECK(detail::compact_target_of(detail::LaneTarget::kSse2) == detail::CompactTarget::kScalar);
  CHECK(detail::compact_target_of(detail::LaneTarget::kScalar) == detail::CompactTarget::kScalar);
}

TEST_CASE("compaction: select_at_least keeps the same positions on every target",
          "[compaction]") {
  for (const std::int64_t n : {0, 1, 63, 64, 65, 200, 1024, 1031}) {
    const auto values = test_values(n, static_cast<std::uint64_t>(n) + 1);
    // A gate that keeps few, one that keeps half, one that keeps all but -inf and NaN.
    for (const float gate : {6.0f, 1.5f, 0.0f, -INFINITY}) {
      std::vector<std::int32_t> expected;
      for (std::int64_t i = 0; i < n; ++i) {
        if (values[static_cast<std::size_t>(i)] >= gate) {
          expected.push_back(static_cast<std::int32_t>(100 + i));
        }
      }
      for (const auto target : compact_targets()) {
        INFO("n " << n << " gate " << gate << " target " << static_cast<int>(target));
        std::vector<std::int32_t> ids(static_cast<std::size_t>(n) + 8, -1);
        const auto m = detail::select_at_least(values.data(), n, gate, ids.data(), 100, target);
        ids.resize(static_cast<std::size_t>(m));
        CHECK(ids == expected);
      }
    }
  }
}

TEST_CASE("compaction: compact_between keeps the same entries on every target, in place too",
          "[compaction]") {
  const std::int64_t n = 1031;
  const auto values = test_values(n, 9);
  std::vector<std::int32_t> in_ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) in_ids[static_cast<std::size_t>(i)] = 7 * static_cast<std::int32_t>(i);
  std::vector<std::int32_t> expected_ids;
  std::vector<float> expected_values;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = values[static_cast<std::size_t>(i)];
    if (v >= -1.0f && v <= 2.0f) {
      expected_ids.push_back(in_ids[static_cast<std::size_t>(i)]);
      expected_values.push_back(v);
    }
  }
  for (const auto target : compact_targets()) {
    INFO("target " << static_cast<int>(target));
    std::vector<std::int32_t> ids = in_ids;
    std::vector<float> vals = values;
    ids.resize(ids.size() + 8);
    vals.resize(vals.size() + 8);
    // In place: the outputs are the inputs.
    const auto m = detail::compact_between<false>(vals.data(), ids.data(), n, -1.0f, 2.0f,
                                                  ids.data(), vals.data(), target);
    ids.resize(static_cast<std::size_t>(m));
    vals.resize(static_cast<std::size_t>(m));
    CHECK(ids == expected_ids);
    CHECK(vals == expected_values);
  }
}
