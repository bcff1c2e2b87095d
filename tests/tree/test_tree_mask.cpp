// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "specdec/tree/tree.hpp"
#include "tree_fixtures.hpp"

using namespace specdec;
using specdec::test::dense_mask;
using specdec::test::packed_mask;

TEST_CASE("child links keep sampling order", "[tree]") {
  const auto tree = test::rsdc_tree();
  std::vector<std::int32_t> first(15), next(15);
  CHECK(build_child_links(tree, first, next) == 0);
  CHECK(first == std::vector<std::int32_t>{3, 5, 7, 9, 10, 11, 12, 13, 14, -1, -1, -1, -1, -1, -1});
  CHECK(next == std::vector<std::int32_t>{1, 2, -1, 4, -1, 6, -1, 8, -1, -1, -1, -1, -1, -1, -1});
  CHECK(children_of(tree, -1) == std::vector<std::int32_t>{0, 1, 2});
  CHECK(children_of(tree, 1) == std::vector<std::int32_t>{5, 6});
  CHECK(children_of(tree, 9).empty());
  DraftTree empty;
  CHECK(build_child_links(empty, {}, {}) == -1);
}

TEST_CASE("root-to-node paths and leaves of the RSD-C tree", "[tree]") {
  const auto tree = test::rsdc_tree();
  CHECK(path_to_node(tree, 0) == std::vector<std::int32_t>{0});
  CHECK(path_to_node(tree, 6) == std::vector<std::int32_t>{1, 6});
  CHECK(path_to_node(tree, 12) == std::vector<std::int32_t>{1, 6, 12});
  CHECK(count_leaves(tree) == 6);
  CHECK(leaves(tree) == std::vector<std::int32_t>{9, 10, 11, 12, 13, 14});
  const auto paths = root_to_leaf_paths(tree);
  REQUIRE(paths.size() == 6);
  CHECK(paths[0] == std::vector<std::int32_t>{0, 3, 9});
  CHECK(paths[5] == std::vector<std::int32_t>{2, 8, 14});
  std::vector<std::int32_t> padded(7 * 4);
  root_to_leaf_paths(tree, 7, 4, padded);
  CHECK(std::vector<std::int32_t>(padded.begin(), padded.begin() + 4) ==
        std::vector<std::int32_t>{0, 3, 9, -1});
  CHECK(std::vector<std::int32_t>(padded.end() - 4, padded.end()) ==
        std::vector<std::int32_t>{-1, -1, -1, -1});
}

TEST_CASE("seed 000 Figure 3a: RSD-C tree with b = (3 2 1) has the hand-checked mask",
          "[tree][mask]") {
  const auto tree = test::rsdc_tree();
  REQUIRE(tree.size() == 15);
  const auto mask = dense_mask(tree);
  // Row of node 12 (path 1 -> 6 -> 12) and of node 4 (path 0 -> 4).
  std::vector<std::uint8_t> row12(15, 0), row4(15, 0);
  row12[1] = row12[6] = row12[12] = 1;
  row4[0] = row4[4] = 1;
  CHECK(std::vector<std::uint8_t>(mask.begin() + 12 * 15, mask.begin() + 13 * 15) == row12);
  CHECK(std::vector<std::uint8_t>(mask.begin() + 4 * 15, mask.begin() + 5 * 15) == row4);
  // Each row has depth ones.
  for (std::int32_t i = 0; i < 15; ++i) {
    int ones = 0;
    for (int j = 0; j < 15; ++j) ones += mask[static_cast<std::size_t>(i * 15 + j)];
    CHECK(ones == tree.depths[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("seed 000 Figure 3b: RSD-S tree with W = 3 has the hand-checked mask", "[tree][mask]") {
  const auto tree = test::rsds_tree();
  REQUIRE(tree.size() == 9);
  const std::vector<std::uint8_t> expected = {
      // 0  1  2  3  4  5  6  7  8
      1, 0, 0, 0, 0, 0, 0, 0, 0,  // 0
      0, 1, 0, 0, 0, 0, 0, 0, 0,  // 1
      0, 0, 1, 0, 0, 0, 0, 0, 0,  // 2
      1, 0, 0, 1, 0, 0, 0, 0, 0,  // 3: parent 0
      1, 0, 0, 0, 1, 0, 0, 0, 0,  // 4: parent 0
      0, 0, 1, 0, 0, 1, 0, 0, 0,  // 5: parent 2
      1, 0, 0, 1, 0, 0, 1, 0, 0,  // 6: parent 3
      1, 0, 0, 1, 0, 0, 0, 1, 0,  // 7: parent 3
      0, 0, 1, 0, 0, 1, 0, 0, 1,  // 8: parent 5
  };
  CHECK(dense_mask(tree) == expected);
  std::vector<std::int32_t> positions(9);
  tree_positions(tree, 100, positions);
  CHECK(positions == std::vector<std::int32_t>{100, 100, 100, 101, 101, 101, 102, 102, 102});
}

TEST_CASE("dense mask follows Alg. 5: a child's row is its parent's row plus itself",
          "[tree][mask]") {
  const auto tree = test::random_tree(200, 7);
  const auto mask = dense_mask(tree);
  const std::size_t n = 200;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::uint8_t> expected(n, 0);
    if (tree.parents[i] >= 0) {
      const auto p = static_cast<std::size_t>(tree.parents[i]);
      expected.assign(mask.begin() + static_cast<std::ptrdiff_t>(p * n),
                      mask.begin() + static_cast<std::ptrdiff_t>((p + 1) * n));
    }
    expected[i] = 1;
    REQUIRE(std::vector<std::uint8_t>(mask.begin() + static_cast<std::ptrdiff_t>(i * n),
                                      mask.begin() + static_cast<std::ptrdiff_t>((i + 1) * n)) ==
            expected);
  }
}

TEST_CASE("dense and packed masks and the row functions agree", "[tree][mask]") {
  for (std::int32_t n : {1, 5, 31, 32, 33, 64, 65, 130}) {
    const auto tree = test::random_tree(n, static_cast<std::uint64_t>(n));
    const auto dense = dense_mask(tree);
    const auto packed = packed_mask(tree);
    const auto words = packed_mask_words(n);
    REQUIRE(packed.size() == static_cast<std::size_t>(n * words));
    std::vector<std::uint8_t> row(static_cast<std::size_t>(n));
    std::vector<std::uint32_t> prow(static_cast<std::size_t>(words));
    for (std::int32_t i = 0; i < n; ++i) {
      detail::dense_mask_row(tree.parents.data(), n, i, row.data());
      detail::packed_mask_row(tree.parents.data(), words, i, prow.data());
      for (std::int32_t j = 0; j < n; ++j) {
        const bool bit = (packed[static_cast<std::size_t>(i * words + j / 32)] >> (j % 32)) & 1u;
        REQUIRE(bit == (dense[static_cast<std::size_t>(i * n + j)] == 1));
        REQUIRE(row[static_cast<std::size_t>(j)] == dense[static_cast<std::size_t>(i * n + j)]);
        REQUIRE(detail::is_ancestor_or_self(tree.parents.data(), j, i) == bit);
      }
      for (std::int32_t w = 0; w < words; ++w) {
        REQUIRE(prow[static_cast<std::size_t>(w)] ==
                packed[static_cast<std::size_t>(i * words + w)]);
      }
      // Padding bits past column n - 1 stay 0.
      if (n % 32 != 0) {
        REQUIRE((packed[static_cast<std::size_t>(i * words + words - 1)] >> (n % 32)) == 0u);
      }
    }
  }
}

TEST_CASE("packed mask words of a 3-node chain are hand-checked", "[tree][mask]") {
  DraftTree tree;
  tree.add(5, -1);
  tree.add(6, 0);
  tree.add(7, 1);
  CHECK(packed_mask(tree) == std::vector<std::uint32_t>{0b001u, 0b011u, 0b111u});
}

TEST_CASE("positions and paths agree with the mask", "[tree][mask]") {
  const auto tree = test::random_tree(100, 3);
  const auto mask = dense_mask(tree);
  std::vector<std::int32_t> positions(100);
  tree_positions(tree, 17, positions);
  for (std::int32_t i = 0; i < 100; ++i) {
    const auto path = path_to_node(tree, i);
    // The path is exactly the set bits of row i, in increasing order, and the position of node i
    // is the context length plus the number of visible tree nodes, minus one.
    std::vector<std::int32_t> visible;
    for (std::int32_t j = 0; j < 100; ++j) {
      if (mask[static_cast<std::size_t>(i * 100 + j)]) visible.push_back(j);
    }
    REQUIRE(path == visible);
    REQUIRE(positions[static_cast<std::size_t>(i)] ==
            17 + static_cast<std::int32_t>(path.size()) - 1);
  }
}

TEST_CASE("an empty tree gives empty masks", "[tree][mask]") {
  DraftTree tree;
  CHECK(dense_mask_size(tree) == 0);
  CHECK(packed_mask_size(tree) == 0);
  CHECK_NOTHROW(build_dense_mask(tree, {}));
  CHECK_NOTHROW(build_packed_mask(tree, {}));
  CHECK(count_leaves(tree) == 0);
}

TEST_CASE("malformed trees are rejected by every tree entry", "[tree][errors]") {
  DraftTree bad;
  bad.tokens = {1, 2, 3};
  bad.parents = {-1, 2, 0};  // parent after child
  bad.depths = {1, 2, 2};
  std::vector<std::uint8_t> dense(9);
  std::vector<std::uint32_t> packed(3);
  std::vector<std::int32_t> out(3);
  CHECK_THROWS_WITH(build_dense_mask(bad, dense), Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(build_packed_mask(bad, packed), Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(tree_positions(bad, 4, out), Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(build_child_links(bad, out, out), Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(count_leaves(bad), Catch::Contains("parents[1]"));

  DraftTree wrong_depth;
  wrong_depth.tokens = {1, 2};
  wrong_depth.parents = {-1, 0};
  wrong_depth.depths = {1, 3};
  CHECK_THROWS_WITH(build_dense_mask(wrong_depth, std::span<std::uint8_t>(dense).first(4)),
                    Catch::Contains("depths[1]"));

  DraftTree ragged;
  ragged.tokens = {1, 2};
  ragged.parents = {-1};
  ragged.depths = {1, 2};
  CHECK_THROWS_WITH(build_packed_mask(ragged, std::span<std::uint32_t>(packed).first(2)),
                    Catch::Contains("parents"));

  DraftTree negative_token;
  negative_token.add(-3, -1);
  CHECK_THROWS_WITH(build_dense_mask(negative_token, std::span<std::uint8_t>(dense).first(1)),
                    Catch::Contains("tokens[0]"));
}

TEST_CASE("wrong buffer sizes and bad arguments name the argument", "[tree][errors]") {
  const auto tree = test::rsds_tree();
  std::vector<std::uint8_t> dense(80);
  std::vector<std::uint32_t> packed(8);
  std::vector<std::int32_t> small(8), nine(9);
  CHECK_THROWS_WITH(build_dense_mask(tree, dense), Catch::Contains("out") && Catch::Contains("81"));
  CHECK_THROWS_WITH(build_packed_mask(tree, packed), Catch::Contains("out"));
  CHECK_THROWS_WITH(tree_positions(tree, 10, small), Catch::Contains("out"));
  CHECK_THROWS_WITH(tree_positions(tree, 0, nine), Catch::Contains("context_length"));
  CHECK_THROWS_WITH(tree_positions(tree, INT32_MAX, nine),
                    Catch::Contains("context_length") && Catch::Contains("overflows"));
  CHECK_THROWS_WITH(build_child_links(tree, small, nine), Catch::Contains("first_child"));
  CHECK_THROWS_WITH(build_child_links(tree, nine, small), Catch::Contains("next_sibling"));
  CHECK_THROWS_WITH(path_to_node(tree, 9), Catch::Contains("node") && Catch::Contains("9"));
  CHECK_THROWS_WITH(path_to_node(tree, 6, small), Catch::Contains("out"));
  CHECK_THROWS_WITH(children_of(tree, -2), Catch::Contains("node"));
  CHECK_THROWS_WITH(leaves(tree, small), Catch::Contains("out"));
  std::vector<std::int32_t> paths(5 * 3);
  CHECK_THROWS_WITH(root_to_leaf_paths(tree, 2, 3, paths), Catch::Contains("rows"));
  CHECK_THROWS_WITH(root_to_leaf_paths(tree, 5, 2, paths), Catch::Contains("width"));
  CHECK_THROWS_WITH(root_to_leaf_paths(tree, 5, 4, paths), Catch::Contains("out"));
}

TEST_CASE("a TreeView of spans gives the DraftTree's masks and positions", "[tree][view]") {
  const auto tree = test::rsdc_tree();
  static_assert(std::is_convertible_v<const DraftTree&, TreeView>);
  static_assert(!std::is_convertible_v<DraftTree&&, TreeView>);  // its view would dangle
  // Copies in plain vectors: the view does not point into the DraftTree.
  const std::vector<Token> tokens = tree.tokens;
  const std::vector<std::int32_t> parents = tree.parents;
  const TreeView view{tokens, parents};
  CHECK(view.size() == tree.size());

  std::vector<std::uint8_t> dense_tree(dense_mask_size(tree)), dense_view(dense_mask_size(view));
  build_dense_mask(tree, dense_tree);
  build_dense_mask(view, dense_view);
  CHECK(dense_view == dense_tree);
  std::vector<std::uint32_t> packed_tree(packed_mask_size(tree)), packed_view(packed_mask_size(view));
  build_packed_mask(tree, packed_tree);
  build_packed_mask(view, packed_view);
  CHECK(packed_view == packed_tree);
  std::vector<std::int32_t> positions_view(tokens.size());
  tree_positions(view, 9, positions_view);
  for (std::size_t i = 0; i < tokens.size(); ++i) CHECK(positions_view[i] == 9 + tree.depths[i] - 1);
  std::vector<std::uint8_t> flash_tree(flashinfer::mask_bytes(tree, 5, true)),
      flash_view(flashinfer::mask_bytes(view, 5, true));
  flashinfer::export_mask(tree, 5, true, flash_tree);
  flashinfer::export_mask(view, 5, true, flash_view);
  CHECK(flash_view == flash_tree);

  // A subtree of a CSR batch: nodes [3, 3 + n) of a concatenation.
  std::vector<Token> batch_tokens = {7, 7, 7};
  std::vector<std::int32_t> batch_parents = {-1, 0, 1};
  batch_tokens.insert(batch_tokens.end(), tokens.begin(), tokens.end());
  batch_parents.insert(batch_parents.end(), parents.begin(), parents.end());
  const TreeView batch{batch_tokens, batch_parents};
  std::vector<std::uint32_t> packed_sub(packed_mask_size(tree));
  build_packed_mask(batch.subtree(3, tokens.size()), packed_sub);
  CHECK(packed_sub == packed_tree);
}

TEST_CASE("a malformed TreeView names the argument", "[tree][view][errors]") {
  const std::vector<Token> tokens = {1, 2, 3};
  const std::vector<std::int32_t> short_parents = {-1, 0};
  const std::vector<std::int32_t> forward = {-1, 2, 0};
  std::vector<std::uint32_t> packed(3);
  std::vector<std::int32_t> positions(3);
  CHECK_THROWS_WITH(build_packed_mask(TreeView{tokens, short_parents}, packed),
                    Catch::StartsWith("parents: "));
  CHECK_THROWS_WITH(tree_positions(TreeView{tokens, forward}, 4, positions),
                    Catch::StartsWith("parents[1]: "));
  // Depths come from the parents, so the overflow check needs no depths array.
  const std::vector<std::int32_t> chain = {-1, 0, 1};
  CHECK_THROWS_WITH(tree_positions(TreeView{tokens, chain}, INT32_MAX - 1, positions),
                    Catch::StartsWith("context_length: "));
  tree_positions(TreeView{tokens, chain}, INT32_MAX - 2, positions);
  CHECK(positions.back() == INT32_MAX);
}
