// SPDX-License-Identifier: MIT
// Trees shared by the tree tests: seed 000 Figure 3's two trees and random level-ordered trees.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "specdec/toy/random.hpp"
#include "specdec/tree/tree.hpp"

namespace specdec::test {

/// Seed 000 Figure 3(a): RSD-C with branching factors b = (3, 2, 1), 3 + 6 + 6 = 15 nodes.
/// Level 1: 0 1 2; level 2: 3 4 (of 0), 5 6 (of 1), 7 8 (of 2); level 3: 9..14, one per level-2
/// node in order.
inline DraftTree rsdc_tree() {
  DraftTree tree;
  for (int i = 0; i < 3; ++i) tree.add(10 + i, -1);
  for (int p = 0; p < 3; ++p) {
    for (int c = 0; c < 2; ++c) tree.add(20 + 2 * p + c, p);
  }
  for (int p = 3; p < 9; ++p) tree.add(30 + p, p);
  return tree;
}

/// The tree that adds node i, token tokens[i], under parents[i] (-1: the root), in order.
inline DraftTree tree_of(const std::vector<Token>& tokens,
                         const std::vector<std::int32_t>& parents) {
  DraftTree tree;
  for (std::size_t i = 0; i < tokens.size(); ++i) tree.add(tokens[i], parents[i]);
  return tree;
}

/// A W = 3 stochastic-beam tree of depth 3 in the shape of seed 000 Figure 3(b): three nodes per
/// level, each level's beam extending some of the previous level's nodes.
/// Level 1: 0 1 2; level 2: 3 4 (of 0), 5 (of 2); level 3: 6 7 (of 3), 8 (of 5).
inline DraftTree rsds_tree() {
  return tree_of({1, 2, 3, 4, 5, 6, 7, 8, 9}, {-1, -1, -1, 0, 0, 2, 3, 3, 5});
}

/// A random level-ordered tree of n nodes (fixed seed).
inline DraftTree random_tree(std::int32_t n, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  DraftTree tree;
  std::vector<std::int32_t> level_start = {0};              // first node of level d + 1
  std::int32_t level_begin_prev = -1, level_end_prev = -1;  // nodes of the level above
  for (std::int32_t i = 0; i < n; ++i) {
    const bool new_level = i > 0 && rng.uniform() < 0.3f;
    if (new_level) {
      level_begin_prev = level_start.back();
      level_end_prev = i;
      level_start.push_back(i);
    }
    const std::int32_t parent =
        level_begin_prev < 0 ? -1 : level_begin_prev + rng.below(level_end_prev - level_begin_prev);
    tree.add(static_cast<Token>(rng.below(1000)), parent);
  }
  return tree;
}

inline std::vector<std::uint8_t> dense_mask(const DraftTree& tree) {
  std::vector<std::uint8_t> out(dense_mask_size(tree));
  build_dense_mask(tree, out);
  return out;
}

inline std::vector<std::uint32_t> packed_mask(const DraftTree& tree) {
  std::vector<std::uint32_t> out(packed_mask_size(tree));
  build_packed_mask(tree, out);
  return out;
}

}  // namespace specdec::test
