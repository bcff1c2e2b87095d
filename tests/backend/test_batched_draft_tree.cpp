// SPDX-License-Identifier: MIT
// Batched tree masks, positions and prefix match against the single-sequence functions, on every
// backend (no draws, no float math: every backend must agree bit for bit).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/tree/tree_mask.hpp"
#include "support/backends.hpp"
#include "tree_cases.hpp"

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
#include "specdec/backend/cuda/tree_mask_batch.hpp"
#endif

using namespace specdec;
using test::Forest;
using test::random_forest;

namespace {

/// packed_tree_masks_batch on `backend` with `words` words per row (rows pre-filled with garbage).
template <class Backend>
std::vector<std::uint32_t> run_masks(const Backend& backend, const Forest& f, std::int64_t words) {
  const auto total = static_cast<std::int64_t>(f.parents.size());
  test::Buffer<Backend, Token> tokens(f.tokens);
  test::Buffer<Backend, std::int32_t> parents(f.parents);
  test::Buffer<Backend, std::uint32_t> masks(
      std::vector<std::uint32_t>(static_cast<std::size_t>(total * words), 0xdeadbeefu));
  test::Scratch<Backend> scratch(
      workspace_size(backend, TreeMaskBatchShape{static_cast<std::int64_t>(f.trees.size())}));
  packed_tree_masks_batch(backend, f.offsets,
                          TreeView{{tokens.data(), f.tokens.size()}, {parents.data(), f.parents.size()}},
                          MatrixView<std::uint32_t>(masks.data(), total, words), scratch.get());
  return masks.to_host();
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("packed_tree_masks_batch equals build_packed_mask per tree",
                        "[backend][batched]", test::Backends) {
  const auto f = random_forest(9, 4);
  const std::int64_t words = 3;
  const auto masks = run_masks(TestType{}, f, words);
  for (std::size_t b = 0; b < f.trees.size(); ++b) {
    const auto& t = f.trees[b];
    std::vector<std::uint32_t> want(packed_mask_size(t));
    build_packed_mask(t, want);
    const auto w = static_cast<std::size_t>(packed_mask_words(t.size()));
    for (std::size_t i = 0; i < static_cast<std::size_t>(t.size()); ++i) {
      for (std::size_t j = 0; j < static_cast<std::size_t>(words); ++j) {
        const auto row = static_cast<std::size_t>(f.offsets[b]) + i;
        CHECK(masks[row * static_cast<std::size_t>(words) + j] == (j < w ? want[i * w + j] : 0u));
      }
    }
  }
}

TEST_CASE("packed_tree_masks_batch does not depend on the thread count", "[backend][batched]") {
  const auto f = random_forest(11, 5);
  CHECK(run_masks(backend::cpu.with_threads(1), f, 3) ==
        run_masks(backend::cpu.with_threads(2), f, 3));
}

TEMPLATE_LIST_TEST_CASE("tree_positions_batch equals tree_positions per tree", "[backend][batched]",
                        test::Backends) {
  const auto f = random_forest(7, 8);
  std::vector<std::int32_t> contexts;
  for (std::size_t b = 0; b < f.trees.size(); ++b)
    contexts.push_back(1 + static_cast<std::int32_t>(b) * 13);
  const TestType backend{};
  test::Buffer<TestType, Token> tokens(f.tokens);
  test::Buffer<TestType, std::int32_t> parents(f.parents);
  test::Buffer<TestType, std::int32_t> positions(std::vector<std::int32_t>(f.parents.size(), -1));
  test::Scratch<TestType> scratch(
      workspace_size(backend, TreeMaskBatchShape{static_cast<std::int64_t>(f.trees.size())}));
  tree_positions_batch(backend, f.offsets,
                       TreeView{{tokens.data(), f.tokens.size()}, {parents.data(), f.parents.size()}},
                       contexts,
                       std::span<std::int32_t>(positions.data(), f.parents.size()), scratch.get());
  const auto got = positions.to_host();
  for (std::size_t b = 0; b < f.trees.size(); ++b) {
    std::vector<std::int32_t> want(static_cast<std::size_t>(f.trees[b].size()));
    tree_positions(f.trees[b], contexts[b], want);
    CHECK(std::vector<std::int32_t>(got.begin() + f.offsets[b], got.begin() + f.offsets[b + 1]) ==
          want);
  }
}

TEMPLATE_LIST_TEST_CASE("prefix_match_batch equals prefix_match per row", "[backend][batched]",
                        test::Backends) {
  const std::int64_t batch = 6, stride = 23;  // rows padded past W * L = 20 tokens
  const std::int32_t width = 5, length = 4;
  toy::ToyRandom rng(2);
  std::vector<Token> beams(static_cast<std::size_t>(batch * stride), 99);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t x = 0; x < width * length; ++x) {
      // A small vocabulary: many shared prefixes.
      beams[static_cast<std::size_t>(b * stride + x)] = static_cast<Token>(rng.uniform() * 3.0f);
    }
  }
  const TestType backend{};
  test::Buffer<TestType, Token> d_beams(beams);
  test::Buffer<TestType, std::int32_t> d_out(
      std::vector<std::int32_t>(static_cast<std::size_t>(batch * stride), -7));
  prefix_match_batch(backend,
                     MatrixView<const Token>(d_beams.data(), batch, width * length, stride), width,
                     3, MatrixView<std::int32_t>(d_out.data(), batch, width * length, stride));
  const auto out = d_out.to_host();
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto at = static_cast<std::size_t>(b * stride);
    std::vector<std::int32_t> want(static_cast<std::size_t>(width * length));
    prefix_match(std::span<const Token>(beams).subspan(at, want.size()), width, 3, want);
    CHECK(std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(at),
                                    out.begin() + static_cast<std::ptrdiff_t>(at + want.size())) ==
          want);
    for (std::int64_t x = width * length; x < stride; ++x)  // the padding is left alone
      CHECK(out[static_cast<std::size_t>(b * stride + x)] == -7);
  }
}

TEMPLATE_LIST_TEST_CASE("tree batch entries reject bad shapes naming the argument",
                        "[backend][batched]", test::Backends) {
  const TestType backend{};
  const auto f = random_forest(3, 1);
  const auto total = static_cast<std::int64_t>(f.parents.size());
  test::Buffer<TestType, Token> tokens(f.tokens);
  test::Buffer<TestType, std::int32_t> parents(f.parents);
  const TreeView device_trees{{tokens.data(), f.tokens.size()}, {parents.data(), f.parents.size()}};
  test::Buffer<TestType, std::uint32_t> masks(static_cast<std::size_t>(total * 3));
  test::Scratch<TestType> scratch(workspace_size(backend, TreeMaskBatchShape{3}));
  std::vector<std::int32_t> offsets = f.offsets;
  offsets[2] = offsets[1] - 1;
  CHECK_THROWS_WITH(
      packed_tree_masks_batch(backend, offsets, device_trees,
                              MatrixView<std::uint32_t>(masks.data(), total, 3), scratch.get()),
      Catch::Contains("node_offsets[2]"));
  CHECK_THROWS_WITH(
      packed_tree_masks_batch(backend, f.offsets, device_trees,
                              MatrixView<std::uint32_t>(masks.data(), total, 1), scratch.get()),
      Catch::Contains("masks: has 1 words per row"));

  const std::vector<std::int32_t> contexts = {4, 0, 2};
  test::Buffer<TestType, std::int32_t> positions(f.parents.size());
  CHECK_THROWS_WITH(tree_positions_batch(
                        backend, f.offsets, device_trees, contexts,
                        std::span<std::int32_t>(positions.data(), f.parents.size()), scratch.get()),
                    Catch::Contains("context_lengths[1]"));

  test::Buffer<TestType, Token> beams(std::vector<Token>(8, 0));
  test::Buffer<TestType, std::int32_t> out(8);
  CHECK_THROWS_WITH(prefix_match_batch(backend, MatrixView<const Token>(beams.data(), 2, 4), 3, 5,
                                       MatrixView<std::int32_t>(out.data(), 2, 4)),
                    Catch::Contains("beams") && Catch::Contains("3 beams"));
  CHECK_THROWS_WITH(prefix_match_batch(backend, MatrixView<const Token>(beams.data(), 2, 4), 2, 5,
                                       MatrixView<std::int32_t>(out.data(), 2, 3)),
                    Catch::Contains("out"));
}

TEST_CASE("tree batch entries check host trees and tokens on the CPU", "[backend][batched]") {
  auto f = random_forest(3, 1);
  std::vector<std::uint32_t> masks(f.parents.size() * 3);
  Workspace ws;
  f.parents[static_cast<std::size_t>(f.offsets[2])] = 0;  // the first node of tree 2
  CHECK_THROWS_WITH(
      packed_tree_masks_batch(
          backend::cpu, f.offsets, f.view(),
          MatrixView<std::uint32_t>(masks.data(), static_cast<std::int64_t>(f.parents.size()), 3),
          ws),
      Catch::Contains("parents[2][0]"));
  std::vector<Token> beams = {0, 1, 2, 3, 0, 1, 9, 3};
  std::vector<std::int32_t> out(beams.size());
  CHECK_THROWS_WITH(prefix_match_batch(backend::cpu, MatrixView<const Token>(beams.data(), 2, 4), 2,
                                       5, MatrixView<std::int32_t>(out.data(), 2, 4)),
                    Catch::Contains("beams[1][1][0]: token 9"));
}
