// SPDX-License-Identifier: MIT
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "specdec/backend/warp_batch.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"
#include "support/backends.hpp"
#include "support/warp_edge_cases.hpp"

using namespace specdec;

namespace {

template <class T>
std::vector<T> random_logits(std::int64_t rows, std::int64_t stride, std::uint64_t seed,
                             double scale = 3.0) {
  toy::ToyRandom rng(seed);
  std::vector<T> logits(static_cast<std::size_t>(rows * stride));
  for (auto& x : logits) x = static_cast<T>(static_cast<float>(scale * rng.normal()));
  return logits;
}

/// The row oracle: specdec::warp_logits on each row.
template <class T>
std::vector<float> oracle(const std::vector<T>& logits, std::int64_t rows, std::int64_t cols,
                          std::int64_t stride, const std::vector<Warp>& warps) {
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  Workspace ws;
  for (std::int64_t r = 0; r < rows; ++r) {
    const Warp& w = warps[warps.size() == 1 ? 0 : static_cast<std::size_t>(r)];
    warp_logits<T>(w,
                   std::span<const T>(logits.data() + r * stride, static_cast<std::size_t>(cols)),
                   std::span<float>(out.data() + r * cols, static_cast<std::size_t>(cols)), ws);
  }
  return out;
}

template <class Backend, class T>
std::vector<float> run_batch(const Backend& backend, const std::vector<T>& logits,
                             std::int64_t rows, std::int64_t cols, std::int64_t stride,
                             const std::vector<Warp>& warps) {
  test::Buffer<Backend, T> input(logits);
  test::Buffer<Backend, float> output(static_cast<std::size_t>(rows * cols));
  test::Scratch<Backend> scratch(workspace_size(backend, WarpBatchShape{rows, cols}));
  warp_logits_batch(backend, MatrixView<const T>(input.data(), rows, cols, stride), warps,
                    MatrixView<float>(output.data(), rows, cols), scratch.get());
  return output.to_host();
}

/// A call of warp_logits_batch on `rows` rows of 8 random logits that its checks refuse.
struct BadCall {
  std::int64_t rows;
  std::uint64_t seed;
  std::int64_t logits_stride = 8, warped_cols = 8;
  std::vector<Warp> warps;
};

template <class Backend>
void check_rejects(const BadCall& c, const std::string& message) {
  const Backend backend{};
  const std::vector<float> logits = random_logits<float>(c.rows, 8, c.seed);
  test::Buffer<Backend, float> input(logits), output(static_cast<std::size_t>(c.rows * 8));
  test::Scratch<Backend> scratch(workspace_size(backend, WarpBatchShape{c.rows, 8}));
  CHECK_THROWS_WITH(
      warp_logits_batch(backend, MatrixView<const float>(input.data(), c.rows, 8, c.logits_stride),
                        c.warps, MatrixView<float>(output.data(), c.rows, c.warped_cols, 8),
                        scratch.get()),
      Catch::Contains(message));
}

/// Same support (zero pattern) exactly, and the same probabilities to float rounding.
void require_matches(const std::vector<float>& got, const std::vector<float>& expected,
                     std::int64_t cols) {
  REQUIRE(got.size() == expected.size());
  std::int64_t support_mismatches = 0, value_mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if ((got[i] == 0.0f) != (expected[i] == 0.0f)) {
      ++support_mismatches;
      UNSCOPED_INFO("row " << i / cols << " id " << i % cols << ": got " << got[i] << ", expected "
                           << expected[i]);
    }
    if (!(std::abs(got[i] - expected[i]) <= 1e-7f + 2e-5f * expected[i])) ++value_mismatches;
  }
  CHECK(support_mismatches == 0);
  CHECK(value_mismatches == 0);
}

const std::vector<Warp> kWarps = {
    {},                                                 // identity
    {.temperature = 0.0f},                              // greedy
    {.temperature = 0.7f},                              //
    {.top_k = 1},                                       //
    {.top_k = 17},                                      //
    {.top_p = 0.9f},                                    //
    {.top_p = 0.3f},                                    //
    {.min_p = 0.05f},                                   //
    {.temperature = 1.3f, .top_k = 50, .top_p = 0.8f},  //
    {.temperature = 0.5f, .top_k = 40, .top_p = 0.95f, .min_p = 0.1f},
    {.temperature = 2.0f, .top_p = 0.999f},  //
};

/// One row per warp of kWarps, 2000 random 16-bit logits each (`seed`), against the row oracle.
template <class T, class Backend>
void require_half_matches(const Backend& backend, std::uint64_t seed) {
  const std::int64_t rows = static_cast<std::int64_t>(kWarps.size()), cols = 2000;
  const auto logits = random_logits<T>(rows, cols, seed);
  require_matches(run_batch(backend, logits, rows, cols, cols, kWarps),
                  oracle(logits, rows, cols, cols, kWarps), cols);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("batched warps match the row oracle with one warp per row",
                        "[backend][warp_batch]", test::Backends) {
  const std::int64_t rows = static_cast<std::int64_t>(kWarps.size()), cols = 1000;
  const auto logits = random_logits<float>(rows, cols, 11);
  const auto got = run_batch(TestType{}, logits, rows, cols, cols, kWarps);
  require_matches(got, oracle(logits, rows, cols, cols, kWarps), cols);
}

TEMPLATE_LIST_TEST_CASE("batched warps match the row oracle with a shared warp",
                        "[backend][warp_batch]", test::Backends) {
  const std::int64_t rows = 9, cols = 4099;
  const std::vector<Warp> warps = {{.temperature = 0.9f, .top_k = 300, .top_p = 0.9f}};
  const auto logits = random_logits<float>(rows, cols, 12);
  require_matches(run_batch(TestType{}, logits, rows, cols, cols, warps),
                  oracle(logits, rows, cols, cols, warps), cols);
}

TEMPLATE_LIST_TEST_CASE("batched warps read strided rows", "[backend][warp_batch]",
                        test::Backends) {
  const std::int64_t rows = 5, cols = 300, stride = 317;
  const std::vector<Warp> warps = {{.top_k = 20, .top_p = 0.7f}};
  auto logits = random_logits<float>(rows, stride, 13);
  // Padding past the row end is never read: NaN there would show.
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = cols; c < stride; ++c) logits[r * stride + c] = std::nanf("");
  }
  require_matches(run_batch(TestType{}, logits, rows, cols, stride, warps),
                  oracle(logits, rows, cols, stride, warps), cols);
}

TEMPLATE_LIST_TEST_CASE("top-k and top-p cut through ties at the lowest ids",
                        "[backend][warp_batch]", test::Backends) {
  // Logits on a coarse grid: many exact ties, so k and P fall inside a tied group.
  const std::int64_t rows = 6, cols = 512;
  toy::ToyRandom rng(14);
  std::vector<float> logits(rows * cols);
  for (auto& x : logits) x = static_cast<float>(rng.below(5));
  for (std::int64_t c = 0; c < cols; c += 7) logits[2 * cols + c] = kNegInf;  // banned tokens
  const std::vector<Warp> warps = test::tie_cutting_warps(250);
  const auto got = run_batch(TestType{}, logits, rows, cols, cols, warps);
  const auto expected = oracle(logits, rows, cols, cols, warps);
  require_matches(got, expected, cols);
  std::int64_t kept = 0;
  for (std::int64_t c = 0; c < cols; ++c) kept += got[cols + c] > 0.0f ? 1 : 0;
  CHECK(kept == 3);
}

TEMPLATE_LIST_TEST_CASE(
    "batched top-k and top-p keep the documented tokens on signed zeros, "
    "-inf, denormals and ties",
    "[backend][warp_batch]", test::Backends) {
  for (const auto& c : test::warp_edge_cases()) {
    CAPTURE(c.name);
    const auto cols = static_cast<std::int64_t>(c.logits.size());
    const auto got = run_batch(TestType{}, c.logits, 1, cols, cols, {c.warp});
    CHECK(test::kept_ids(got.data(), cols) == c.kept);
  }
}

TEMPLATE_LIST_TEST_CASE("banned tokens get probability exactly zero", "[backend][warp_batch]",
                        test::Backends) {
  const std::int64_t rows = 3, cols = 64;
  auto logits = random_logits<float>(rows, cols, 15);
  for (std::int64_t i = 0; i < rows * cols; i += 3) logits[i] = kNegInf;
  const std::vector<Warp> warps = {{}, {.temperature = 3.0f, .top_k = 60}, {.top_p = 0.9999f}};
  const auto got = run_batch(TestType{}, logits, rows, cols, cols, warps);
  for (std::int64_t i = 0; i < rows * cols; i += 3) CHECK(got[i] == 0.0f);
  require_matches(got, oracle(logits, rows, cols, cols, warps), cols);
}

TEMPLATE_LIST_TEST_CASE("fp16 logits match the row oracle", "[backend][warp_batch]",
                        test::Backends) {
  require_half_matches<Eigen::half>(TestType{}, 16);
}

TEMPLATE_LIST_TEST_CASE("bf16 logits match the row oracle", "[backend][warp_batch]",
                        test::Backends) {
  require_half_matches<Eigen::bfloat16>(TestType{}, 17);
}

TEMPLATE_LIST_TEST_CASE("a large vocabulary batch matches the row oracle", "[backend][warp_batch]",
                        test::Backends) {
  const std::int64_t rows = 4, cols = 128256;
  const std::vector<Warp> warps = {{.top_k = 50},
                                   {.top_p = 0.95f},
                                   {.min_p = 0.02f},
                                   {.temperature = 0.8f, .top_k = 1000, .top_p = 0.9f}};
  const auto logits = random_logits<Eigen::bfloat16>(rows, cols, 18);
  require_matches(run_batch(TestType{}, logits, rows, cols, cols, warps),
                  oracle(logits, rows, cols, cols, warps), cols);
}

TEST_CASE("CPU batched warps are bit-identical for every thread count", "[backend][warp_batch]") {
  const std::int64_t rows = 37, cols = 3000;
  const auto logits = random_logits<float>(rows, cols, 19);
  std::vector<Warp> warps;
  for (std::int64_t r = 0; r < rows; ++r) warps.push_back(kWarps[r % kWarps.size()]);
  const auto one = run_batch(backend::cpu.with_threads(1), logits, rows, cols, cols, warps);
  CHECK(one == oracle(logits, rows, cols, cols, warps));
  for (int threads : {2, 3, 8, 0}) {
    CAPTURE(threads);
    CHECK(run_batch(backend::cpu.with_threads(threads), logits, rows, cols, cols, warps) == one);
  }
}

TEST_CASE("CPU batched warps allocate nothing with a workspace of workspace_size bytes",
          "[backend][warp_batch]") {
  const std::int64_t rows = 8, cols = 500;
  const auto logits = random_logits<float>(rows, cols, 20);
  const auto cpu = backend::cpu.with_threads(2);
  Workspace ws(workspace_size(cpu, WarpBatchShape{rows, cols}));
  const auto before = ws.allocations();
  std::vector<float> out(rows * cols);
  const std::vector<Warp> warps = {{.top_k = 10}};
  for (int step = 0; step < 3; ++step) {
    warp_logits_batch(cpu, MatrixView<const float>(logits.data(), rows, cols), warps,
                      MatrixView<float>(out.data(), rows, cols), ws);
  }
  CHECK(ws.allocations() == before);
}

TEMPLATE_LIST_TEST_CASE("warp_logits_batch rejects a warped matrix of another shape",
                        "[backend][warp_batch][errors]", test::Backends) {
  check_rejects<TestType>({.rows = 2, .seed = 21, .warped_cols = 7, .warps = {{}}},
                          "warped: has 7 columns, expected 8 like logits");
}

TEMPLATE_LIST_TEST_CASE("warp_logits_batch rejects a warp count other than 1 or rows",
                        "[backend][warp_batch][errors]", test::Backends) {
  check_rejects<TestType>({.rows = 3, .seed = 22, .warps = {{}, {}}},
                          "warps: has 2 entries, expected 1 (shared) or 3");
}

TEMPLATE_LIST_TEST_CASE("warp_logits_batch names the row and field of a bad warp",
                        "[backend][warp_batch][errors]", test::Backends) {
  check_rejects<TestType>({.rows = 2, .seed = 23, .warps = {{}, {.top_k = 9}}},
                          "warps[1].top_k: 9 is outside [0, vocab = 8]");
}

TEMPLATE_LIST_TEST_CASE("warp_logits_batch rejects a stride shorter than a row",
                        "[backend][warp_batch][errors]", test::Backends) {
  check_rejects<TestType>({.rows = 2, .seed = 24, .logits_stride = 6, .warps = {{}}},
                          "logits: stride 6 is smaller than its 8 columns");
}

TEST_CASE("CPU warp_logits_batch names the row and id of a NaN logit",
          "[backend][warp_batch][errors]") {
  std::vector<float> logits = random_logits<float>(3, 8, 25);
  logits[1 * 8 + 5] = std::nanf("");
  std::vector<float> out(24);
  Workspace ws;
  const std::vector<Warp> warps = {{}};
  CHECK_THROWS_WITH(warp_logits_batch(backend::cpu, MatrixView<const float>(logits.data(), 3, 8),
                                      warps, MatrixView<float>(out.data(), 3, 8), ws),
                    Catch::Contains("logits[1][5]: nan is not a valid logit"));
}

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
TEST_CASE("CUDA warp_logits_batch rejects a workspace smaller than workspace_size",
          "[backend][warp_batch][errors]") {
  const std::vector<float> logits = random_logits<float>(4, 8, 26);
  test::Buffer<backend::Cuda, float> input(logits), output(32);
  test::Buffer<backend::Cuda, std::byte> scratch(8);
  const std::vector<Warp> warps = {{}};
  CHECK_THROWS_WITH(warp_logits_batch(backend::cuda, MatrixView<const float>(input.data(), 4, 8),
                                      warps, MatrixView<float>(output.data(), 4, 8),
                                      backend::DeviceWorkspace{scratch.data(), 8}),
                    Catch::Contains("workspace: holds 8 bytes"));
}
#endif
