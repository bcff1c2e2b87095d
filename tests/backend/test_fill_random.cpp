// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "specdec/backend/fill_random.hpp"
#include "specdec/core/philox.hpp"
#include "support/backends.hpp"

using namespace specdec;
using Catch::Detail::Approx;

namespace {

std::vector<RandomStream> some_streams() {
  std::vector<RandomStream> streams;
  for (std::uint32_t s = 0; s < 5; ++s) {
    streams.push_back({.seed = 0x1234'5678'9abc'def0ull + s,
                       .sequence = s,
                       .position = 40 + s,
                       .node = s * 3,
                       .domain = s % 2 == 0 ? Domain::kDraft : Domain::kVerify});
  }
  return streams;
}

template <class Backend>
std::vector<float> fill(const Backend& backend, const std::vector<RandomStream>& streams,
                        std::uint32_t first, std::int64_t count, RandomKind kind) {
  const auto rows = static_cast<std::int64_t>(streams.size());
  test::Buffer<Backend, float> out(static_cast<std::size_t>(rows * count));
  test::Scratch<Backend> scratch(workspace_size(backend, FillRandomShape{rows, count}));
  fill_random(backend, streams, first, MatrixView<float>(out.data(), rows, count), kind,
              scratch.get());
  return out.to_host();
}

/// fill_random of some_streams() from draw `first` into `rows` rows of 10 uniforms refuses,
/// saying `message`.
template <class Backend>
void check_rejects(std::uint32_t first, std::int64_t rows, const char* message) {
  const Backend backend{};
  const auto streams = some_streams();
  test::Buffer<Backend, float> out(static_cast<std::size_t>(rows * 10));
  test::Scratch<Backend> scratch(workspace_size(backend, FillRandomShape{5, 10}));
  CHECK_THROWS_WITH(fill_random(backend, streams, first, MatrixView<float>(out.data(), rows, 10),
                                RandomKind::kUniform, scratch.get()),
                    Catch::Contains(message));
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("fill_random uniforms are bit-identical to RandomStream",
                        "[backend][fill_random]", test::Backends) {
  const auto streams = some_streams();
  const std::uint32_t first = 6;  // not a multiple of 4: starts inside a Philox block
  const std::int64_t count = 1001;
  const auto got = fill(TestType{}, streams, first, count, RandomKind::kUniform);
  std::int64_t mismatches = 0;
  for (std::size_t s = 0; s < streams.size(); ++s) {
    for (std::int64_t i = 0; i < count; ++i) {
      const float expected = streams[s].uniform(first + static_cast<std::uint32_t>(i));
      const float value = got[s * count + i];
      mismatches += std::memcmp(&value, &expected, sizeof(float)) != 0 ? 1 : 0;
    }
  }
  CHECK(mismatches == 0);
}

TEMPLATE_LIST_TEST_CASE("fill_random Gumbels are bit-identical to RandomStream",
                        "[backend][fill_random]", test::Backends) {
  // One Gumbel transform (packet_log's logs) on every backend. A host compiled without FMA
  // instructions rounds its multiply-adds apart, unlike the device: there only a few ulps agree.
  const auto streams = some_streams();
  const std::uint32_t first = 3;
  const std::int64_t count = 777;
  const auto got = fill(TestType{}, streams, first, count, RandomKind::kGumbel);
  const bool exact = std::is_same_v<TestType, backend::Cpu> || SPECDEC_PACKET_FMA;
  std::int64_t mismatches = 0;
  for (std::size_t s = 0; s < streams.size(); ++s) {
    for (std::int64_t i = 0; i < count; ++i) {
      const float expected = streams[s].gumbel(first + static_cast<std::uint32_t>(i));
      const float value = got[s * count + i];
      if (exact) {
        mismatches += std::memcmp(&value, &expected, sizeof(float)) != 0 ? 1 : 0;
      } else {
        CHECK(value == Approx(expected).epsilon(1e-5).margin(1e-6));
      }
    }
  }
  CHECK(mismatches == 0);
}

TEMPLATE_LIST_TEST_CASE("fill_random rejects an output with a row count other than the streams",
                        "[backend][fill_random][errors]", test::Backends) {
  check_rejects<TestType>(0, 4, "out: has 4 rows, expected one per stream (5)");
}

TEMPLATE_LIST_TEST_CASE("fill_random rejects draws past the end of a stream",
                        "[backend][fill_random][errors]", test::Backends) {
  check_rejects<TestType>(0xFFFFFFFAu, 5, "first: draws");
}
