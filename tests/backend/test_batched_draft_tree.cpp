// SPDX-License-Identifier: MIT
// Batched Gumbel-top-k, stochastic-beam-search levels, tree masks, positions and prefix match
// against the single-sequence functions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/tree/tree_mask.hpp"

using namespace specdec;

// ---- Tree masks, positions and prefix match ----

namespace {

struct Forest {
  std::vector<std::int32_t> offsets{0}, parents;
  std::vector<DraftTree> trees;
};

Forest random_forest(std::int64_t batch, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  Forest f;
  for (std::int64_t b = 0; b < batch; ++b) {
    DraftTree t;
    const auto n = b == 1 ? 0 : 1 + static_cast<std::int32_t>(rng.uniform() * 70.0f);
    for (std::int32_t i = 0; i < n; ++i) {
      // Level order: a parent no shallower than the previous node's parent.
      const std::int32_t last = i == 0 ? -1 : t.parents.back();
      const auto span = static_cast<float>(i - last);
      std::int32_t parent = last + static_cast<std::int32_t>(rng.uniform() * span);
      if (parent >= i) parent = i - 1;
      t.add(static_cast<Token>(i % 7), parent);
    }
    f.parents.insert(f.parents.end(), t.parents.begin(), t.parents.end());
    f.offsets.push_back(f.offsets.back() + t.size());
    f.trees.push_back(t);
  }
  return f;
}

}  // namespace

TEST_CASE("packed_tree_masks_batch equals build_packed_mask per tree", "[backend][batched]") {
  const auto f = random_forest(9, 4);
  const auto total = static_cast<std::int64_t>(f.parents.size());
  const std::int64_t words = 3;
  for (const int threads : {1, 2}) {
    std::vector<std::uint32_t> masks(static_cast<std::size_t>(total * words), 0xdeadbeefu);
    packed_tree_masks_batch(backend::cpu.with_threads(threads), f.offsets, f.parents,
                            MatrixView<std::uint32_t>(masks.data(), total, words));
    for (std::size_t b = 0; b < f.trees.size(); ++b) {
      const auto& t = f.trees[b];
      std::vector<std::uint32_t> want(packed_mask_size(t));
      build_packed_mask(t, want);
      const auto w = static_cast<std::size_t>(packed_mask_words(t.size()));
      for (std::size_t i = 0; i < static_cast<std::size_t>(t.size()); ++i) {
        for (std::size_t j = 0; j < static_cast<std::size_t>(words); ++j) {
          const auto got =
              masks[(static_cast<std::size_t>(f.offsets[b]) + i) * static_cast<std::size_t>(words) +
                    j];
          CHECK(got == (j < w ? want[i * w + j] : 0u));
        }
      }
    }
  }
}

TEST_CASE("tree_positions_batch equals tree_positions per tree", "[backend][batched]") {
  const auto f = random_forest(7, 8);
  std::vector<std::int32_t> contexts;
  for (std::size_t b = 0; b < f.trees.size(); ++b)
    contexts.push_back(1 + static_cast<std::int32_t>(b) * 13);
  std::vector<std::int32_t> positions(f.parents.size(), -1);
  tree_positions_batch(backend::cpu.with_threads(2), f.offsets, f.parents, contexts, positions);
  for (std::size_t b = 0; b < f.trees.size(); ++b) {
    std::vector<std::int32_t> want(static_cast<std::size_t>(f.trees[b].size()));
    tree_positions(f.trees[b], contexts[b], want);
    CHECK(std::vector<std::int32_t>(positions.begin() + f.offsets[b],
                                    positions.begin() + f.offsets[b + 1]) == want);
  }
}

TEST_CASE("prefix_match_batch equals prefix_match per row", "[backend][batched]") {
  const std::int64_t batch = 6;
  const std::int32_t width = 5, length = 4;
  toy::ToyRandom rng(2);
  std::vector<Token> beams;
  for (std::int64_t i = 0; i < batch * width * length; ++i) {
    beams.push_back(static_cast<Token>(rng.uniform() * 3.0f));  // small vocabulary: many matches
  }
  std::vector<std::int32_t> out(beams.size(), -1);
  prefix_match_batch(backend::cpu.with_threads(2),
                     MatrixView<const Token>(beams.data(), batch, width * length), width, 3,
                     MatrixView<std::int32_t>(out.data(), batch, width * length));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto at = static_cast<std::size_t>(b * width * length);
    std::vector<std::int32_t> want(static_cast<std::size_t>(width * length));
    prefix_match(std::span<const Token>(beams).subspan(at, want.size()), width, 3, want);
    CHECK(std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(at),
                                    out.begin() + static_cast<std::ptrdiff_t>(at + want.size())) ==
          want);
  }
}

TEST_CASE("tree batch entries reject bad input naming the argument", "[backend][batched]") {
  auto f = random_forest(3, 1);
  std::vector<std::uint32_t> masks(f.parents.size() * 3);
  f.parents[static_cast<std::size_t>(f.offsets[2])] = 0;  // the first node of tree 2
  CHECK_THROWS_WITH(
      packed_tree_masks_batch(
          backend::cpu, f.offsets, f.parents,
          MatrixView<std::uint32_t>(masks.data(), static_cast<std::int64_t>(f.parents.size()), 3)),
      Catch::Contains("parents[2][0]"));
  f = random_forest(3, 1);
  std::vector<std::int32_t> contexts = {4, 0, 2}, positions(f.parents.size());
  CHECK_THROWS_WITH(tree_positions_batch(backend::cpu, f.offsets, f.parents, contexts, positions),
                    Catch::Contains("context_lengths[1]"));
  std::vector<Token> beams = {0, 1, 2, 3, 0, 1, 9, 3};
  std::vector<std::int32_t> out(beams.size());
  CHECK_THROWS_WITH(prefix_match_batch(backend::cpu, MatrixView<const Token>(beams.data(), 2, 4), 2,
                                       5, MatrixView<std::int32_t>(out.data(), 2, 4)),
                    Catch::Contains("beams[1][1][0]: token 9"));
}
