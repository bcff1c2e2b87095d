// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/tree/tree.hpp"
#include "tree_fixtures.hpp"

using namespace specdec;

namespace {

// An engine's own node arrays: a TreeView over copies, with no DraftTree behind it.
struct OwnArrays {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  explicit OwnArrays(const DraftTree& tree) : tokens(tree.tokens), parents(tree.parents) {}
  TreeView view() const { return {tokens, parents}; }
};

struct TrtllmLayout {
  std::vector<std::int32_t> mask, offsets, paths;
  bool operator==(const TrtllmLayout&) const = default;
};

TrtllmLayout trtllm_of(TreeView tree, const DraftTree* owner) {
  const auto rows = trtllm::path_rows(tree), width = trtllm::path_width(tree);
  TrtllmLayout out{std::vector<std::int32_t>(trtllm::mask_size(tree)),
                   std::vector<std::int32_t>(static_cast<std::size_t>(engine_tree_size(tree))),
                   std::vector<std::int32_t>(static_cast<std::size_t>(rows * width))};
  if (owner != nullptr) {
    trtllm::export_tree(*owner, out.mask, out.offsets, rows, width, out.paths);
  } else {
    trtllm::export_tree(tree, out.mask, out.offsets, rows, width, out.paths);
  }
  return out;
}

}  // namespace

TEST_CASE("exporters of a TreeView write what the DraftTree overloads write", "[tree][export]") {
  for (std::int32_t n : {0, 5, 40, 100}) {
    const auto tree = test::random_tree(n, 700 + static_cast<std::uint64_t>(n));
    const OwnArrays own(tree);
    const TreeView view = own.view();
    const auto slots = static_cast<std::size_t>(n + 1);

    CHECK(trtllm::path_width(view) == tree.max_depth() + 1);
    CHECK(trtllm_of(view, nullptr) == trtllm_of(tree, &tree));

    std::vector<std::int32_t> positions(slots), expected_positions(slots);
    engine_positions(view, 9, positions);
    engine_positions(tree, 9, expected_positions);
    CHECK(positions == expected_positions);

    std::vector<std::int64_t> index(slots), next(slots), sibling(slots);
    std::vector<std::int64_t> index_d(slots), next_d(slots), sibling_d(slots);
    sglang::export_tree(view, 3, index, next, sibling);
    sglang::export_tree(tree, 3, index_d, next_d, sibling_d);
    CHECK(index == index_d);
    CHECK(next == next_d);
    CHECK(sibling == sibling_d);

    if (n > 0) {
      const auto path = path_to_node(view, n - 1);
      std::vector<std::int32_t> source(path.size()), destination(path.size());
      std::vector<std::int32_t> source_d(path.size()), destination_d(path.size());
      CHECK(kv_compaction(view, 4, path, source, destination) ==
            kv_compaction(tree, 4, path, source_d, destination_d));
      CHECK(source == source_d);
      CHECK(destination == destination_d);
    }
  }
}

TEST_CASE("a TreeView carries no depths: exporters count them from the parents",
          "[tree][export]") {
  const auto tree = test::rsds_tree();
  DraftTree malformed = tree;
  malformed.depths[4] += 1;
  std::vector<std::int64_t> a(10), b(10), c(10);
  // The DraftTree overload checks the stored depths; its view has none to disagree.
  CHECK_THROWS_WITH(sglang::export_tree(malformed, 0, a, b, c), Catch::Contains("depths[4]"));
  CHECK_NOTHROW(sglang::export_tree(malformed.view(), 0, a, b, c));
  CHECK(trtllm_of(malformed.view(), nullptr) == trtllm_of(tree, &tree));
  std::vector<std::int32_t> positions(10), expected(10);
  CHECK_THROWS_WITH(engine_positions(malformed, 5, positions), Catch::Contains("depths[4]"));
  engine_positions(malformed.view(), 5, positions);
  engine_positions(tree, 5, expected);
  CHECK(positions == expected);
}

TEST_CASE("TreeView exporters reject a parent that is not an earlier node", "[tree][errors]") {
  const std::vector<Token> tokens = {1, 2, 3};
  const std::vector<std::int32_t> parents = {-1, 2, 0};
  const TreeView view{tokens, parents};
  std::vector<std::int32_t> four(4), sixteen(16), two(2);
  std::vector<std::int64_t> a(4), b(4), c(4);
  CHECK_THROWS_WITH(trtllm::path_width(view), Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(trtllm::export_tree(view, four, four, 2, 8, sixteen),
                    Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(engine_positions(view, 3, four), Catch::Contains("parents[1]"));
  CHECK_THROWS_WITH(sglang::export_tree(view, 0, a, b, c), Catch::Contains("parents[1]"));
  const std::vector<std::int32_t> accepted = {0, 2};
  CHECK_THROWS_WITH(kv_compaction(view, 3, accepted, two, two), Catch::Contains("parents[1]"));
}

TEST_CASE("CSR batch forms write what the list forms write", "[tree][export][kv]") {
  const std::vector<DraftTree> trees = {test::rsdc_tree(), DraftTree{}, test::rsds_tree()};
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents, node_offsets = {0};
  for (const auto& tree : trees) {
    tokens.insert(tokens.end(), tree.tokens.begin(), tree.tokens.end());
    parents.insert(parents.end(), tree.parents.begin(), tree.parents.end());
    node_offsets.push_back(static_cast<std::int32_t>(tokens.size()));
  }
  const TreeView batch{tokens, parents};
  const std::vector<std::int32_t> contexts = {10, 4, 7};

  for (const bool include_root : {false, true}) {
    const auto total = flashinfer::batch_mask_bytes(trees, contexts, include_root);
    REQUIRE(flashinfer::batch_mask_bytes(node_offsets, batch, contexts, include_root) == total);
    std::vector<std::uint8_t> out(total), out_csr(total);
    std::vector<std::int32_t> indptr(4), indptr_csr(4);
    flashinfer::export_masks(trees, contexts, include_root, out, indptr);
    flashinfer::export_masks(node_offsets, batch, contexts, include_root, out_csr, indptr_csr);
    CHECK(out_csr == out);
    CHECK(indptr_csr == indptr);
  }

  const std::vector<std::int32_t> a0 = {2, 8, 14}, a1 = {}, a2 = {2, 5, 8};
  const std::vector<std::span<const std::int32_t>> accepted = {a0, a1, a2};
  AcceptedPaths paths, paths_csr;
  pack_accepted_paths(trees, contexts, accepted, paths);
  pack_accepted_paths(node_offsets, batch, contexts, accepted, paths_csr);
  CHECK(paths_csr.offsets == paths.offsets);
  CHECK(paths_csr.slots == paths.slots);
}

TEST_CASE("CSR batch forms reject bad offsets and name the tree of an error first",
          "[tree][export][kv][errors]") {
  const std::vector<Token> tokens = {1, 2, 3, 4, 5};
  const std::vector<std::int32_t> parents = {-1, 0, -1, 1, 0};  // tree 1: node 1 of 3 is bad
  const TreeView batch{tokens, parents};
  const std::vector<std::int32_t> contexts = {3, 3};
  std::vector<std::uint8_t> out(64);
  std::vector<std::int32_t> indptr(3);
  const std::vector<std::int32_t> a = {0};
  const std::vector<std::span<const std::int32_t>> accepted = {a, a};
  AcceptedPaths paths;

  const std::vector<std::int32_t> bad_offsets = {0, 3, 2};
  CHECK_THROWS_WITH(flashinfer::batch_mask_bytes(bad_offsets, batch, contexts, true),
                    Catch::StartsWith("node_offsets[2]: "));
  const std::vector<std::int32_t> short_offsets = {0, 2, 4};
  CHECK_THROWS_WITH(flashinfer::export_masks(short_offsets, batch, contexts, true, out, indptr),
                    Catch::StartsWith("trees.tokens: "));
  const std::vector<std::int32_t> no_trees = {0};
  CHECK_THROWS_WITH(pack_accepted_paths(no_trees, batch, contexts, accepted, paths),
                    Catch::StartsWith("node_offsets: "));

  // parents[3] of the batch is node 1 of tree 1, whose parent 1 is not an earlier node.
  const std::vector<std::int32_t> offsets = {0, 2, 5};
  CHECK_THROWS_WITH(flashinfer::export_masks(offsets, batch, contexts, true, out, indptr),
                    Catch::StartsWith("parents[1][1]: "));
  CHECK_THROWS_WITH(pack_accepted_paths(offsets, batch, contexts, accepted, paths),
                    Catch::StartsWith("parents[1][1]: "));
  const std::vector<std::int32_t> one_context = {3};
  CHECK_THROWS_WITH(pack_accepted_paths(offsets, batch, one_context, accepted, paths),
                    Catch::StartsWith("context_lengths: "));
}
