// SPDX-License-Identifier: MIT
// The CUDA tree verification kernel's source, run on the host through emulation/emulated_cuda.hpp
// (one block per tree, one std::thread per CUDA thread), against verify_tree per tree.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the kernel header then sees its built-ins.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/backend/cuda/detail/tree_kernels.cuh"
#include "tree_cases.hpp"

using namespace specdec;
using namespace specdec::test;
namespace kernels = specdec::backend::cuda_impl::detail;

namespace {

/// Runs verify_tree_kernel over every tree of `c`, one emulated block each.
TreeResult run_kernel(bool recursive, const TreeCase& c) {
  const auto batch = c.offsets.size() - 1;
  std::vector<std::int32_t> ints(2 * c.tokens.size());  // tree b's candidates at 2 offsets[b]
  TreeResult r{std::vector<std::int32_t>(c.tokens.size(), -7), std::vector<std::int32_t>(batch, -7),
               std::vector<Token>(batch, -7), std::vector<std::uint8_t>(batch, 7)};
  for (std::size_t b = 0; b < batch; ++b) {
    run_emulated_block(kernels::kDrawThreads, static_cast<unsigned int>(b), [&] {
      const auto kernel =
          recursive ? kernels::verify_tree_kernel<true> : kernels::verify_tree_kernel<false>;
      kernel({.offsets = c.offsets.data(),
              .tokens = c.tokens.data(),
              .parents = c.parents.data(),
              .target = c.target.data(),
              .target_stride = c.vocab,
              .draft = c.draft.data(),
              .draft_stride = c.vocab,
              .vocab = c.vocab,
              .streams = c.streams.data(),
              .ints = ints.data(),
              .accepted_nodes = r.accepted_nodes.data(),
              .accepted = r.accepted.data(),
              .final_tokens = r.final_tokens.data(),
              .bonus = r.bonus.data()});
    });
  }
  return r;
}

}  // namespace

TEST_CASE("the emulated CUDA tree kernel matches verify_tree with RRS", "[backend][cuda_kernel]") {
  const auto c = make_trees(10, 300, 11);
  const auto want = tree_oracle(Recursive{}, c);
  CHECK(run_kernel(true, c) == want);
  CHECK(std::count(want.bonus.begin(), want.bonus.end(), 1) > 0);
  CHECK(std::count(want.bonus.begin(), want.bonus.end(), 0) > 0);
  CHECK(std::count_if(want.accepted.begin(), want.accepted.end(), [](int a) { return a >= 2; }) >
        0);
}

TEST_CASE("the emulated CUDA tree kernel matches verify_tree with multi-round",
          "[backend][cuda_kernel]") {
  const auto c = make_trees(10, 300, 12);
  const auto want = tree_oracle(MultiRound{}, c);
  CHECK(run_kernel(false, c) == want);
}

TEST_CASE("the emulated CUDA tree kernel handles residuals that empty out",
          "[backend][cuda_kernel]") {
  // The target puts all its mass on the first child, which the draft also rates highest: after
  // it is rejected the residual has no mass left off the removed tokens (the fallbacks).
  TreeCase c;
  c.vocab = 6;
  const std::vector<float> target = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> draft = {0.05f, 0.7f, 0.1f, 0.05f, 0.05f, 0.05f};
  for (std::uint32_t b = 0; b < 40; ++b) {
    c.tokens.insert(c.tokens.end(), {1, 2, 3});
    c.parents.insert(c.parents.end(), {-1, -1, -1});
    for (int r = 0; r < 4; ++r) {
      c.target.insert(c.target.end(), target.begin(), target.end());
      c.draft.insert(c.draft.end(), draft.begin(), draft.end());
    }
    c.offsets.push_back(c.offsets.back() + 3);
    c.streams.push_back(verify_stream(5, b, 0));
  }
  for (const bool recursive : {true, false}) {
    const Rule rule = recursive ? Rule(Recursive{}) : Rule(MultiRound{});
    CHECK(run_kernel(recursive, c) == tree_oracle(rule, c));
  }
}

TEST_CASE("the emulated CUDA tree kernel fails a tree with a token outside the vocabulary",
          "[backend][cuda_kernel]") {
  auto c = make_trees(3, 50, 4);
  for (auto& token : c.tokens)
    token = 50 + token;  // every token out of range: unscanned device data
  const auto r = run_kernel(true, c);
  for (std::size_t b = 0; b < 3; ++b) {
    const bool has_nodes = c.offsets[b + 1] > c.offsets[b];  // an empty tree draws its bonus
    CHECK(r.accepted[b] == (has_nodes ? -1 : 0));
    CHECK((has_nodes ? r.final_tokens[b] == -1 : r.final_tokens[b] >= 0));
  }
}

TEST_CASE("the emulated CUDA tree kernel disagrees with the CPU on almost no tree",
          "[backend][cuda_kernel]") {
  // The kernel sums residual masses in another order than the CPU, so a token may differ when a
  // test or threshold falls within rounding; over 600 trees of up to 40 nodes none is expected.
  const auto c = make_trees(600, 1000, 99);
  const auto want = tree_oracle(Recursive{}, c);
  const auto got = run_kernel(true, c);
  int differ = 0;
  for (std::size_t b = 0; b < want.accepted.size(); ++b) {
    differ += got.accepted[b] != want.accepted[b] || got.final_tokens[b] != want.final_tokens[b];
  }
  CHECK(differ <= 1);
}

TEST_CASE("the emulated block threshold scan walks as the CPU's inverse-CDF scan",
          "[backend][cuda_kernel]") {
  // Thresholds on the walk's own prefix sums (and a float step either side) fall within the
  // parallel prefixes' margin, so thread 0 walks; thresholds between them take the parallel
  // answer. Both must give inverse_cdf_scan's index, and a block without a crossing its running
  // sum.
  toy::ToyRandom rng(5);
  std::vector<float> row(1000);
  for (std::size_t i = 0; i < row.size(); ++i) {
    const double u = rng.uniform();
    row[i] = i % 7 == 3 ? 0.0f : i % 11 == 5 ? 1e-30f : static_cast<float>(u * u * 1e-3);
  }
  const double start = 0.25;
  std::vector<double> prefixes;
  double sum = start;
  for (const float v : row) {
    if (v > 0.0f) sum += v;
    prefixes.push_back(sum);
  }
  std::vector<double> thresholds = {0.0, start, sum, sum * 2.0};
  for (std::size_t j = 1; j < prefixes.size(); j += 97) {
    thresholds.push_back(prefixes[j]);
    thresholds.push_back(std::nextafter(prefixes[j], 0.0));
    thresholds.push_back(std::nextafter(prefixes[j], 1.0));
    thresholds.push_back(0.5 * (prefixes[j] + prefixes[j - 1]));
  }
  static kernels::DrawShared sh;
  for (const double threshold : thresholds) {
    double want_running = start;
    const std::int64_t want = detail::inverse_cdf_scan(
        [&](std::int64_t i) { return row[static_cast<std::size_t>(i)]; }, std::int64_t{0},
        static_cast<std::int64_t>(row.size()), want_running, threshold);
    int got = -3;
    run_emulated_block(kernels::kDrawThreads, 0, [&] {
      if (threadIdx.x == 0) sh.running = start;
      __syncthreads();
      const int found =
          kernels::block_threshold_scan(row.data(), static_cast<int>(row.size()), threshold, sh);
      if (threadIdx.x == 0) got = found;
    });
    CAPTURE(threshold);
    CHECK(got == want);
    if (want < 0) CHECK(sh.running == want_running);
  }
}
