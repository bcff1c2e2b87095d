// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/tree/tree.hpp"
#include "tree_fixtures.hpp"

using namespace specdec;

namespace {

// Root r; level 1: a(0) b(1); level 2: c(2) of a, d(3) of a, e(4) of b.
DraftTree small_tree() { return test::tree_of({10, 11, 12, 13, 14}, {-1, -1, 0, 0, 1}); }

bool flashinfer_bit(const std::vector<std::uint8_t>& bytes, std::int64_t e) {
  return (bytes[static_cast<std::size_t>(e / 8)] >> (e % 8)) & 1u;
}

}  // namespace

TEST_CASE("the worked example of docs/trees.md has the documented mask and positions",
          "[tree][mask]") {
  const auto tree = small_tree();
  CHECK(test::dense_mask(tree) == std::vector<std::uint8_t>{1, 0, 0, 0, 0,  //
                                                            0, 1, 0, 0, 0,  //
                                                            1, 0, 1, 0, 0,  //
                                                            1, 0, 0, 1, 0,  //
                                                            0, 1, 0, 0, 1});
  CHECK(test::packed_mask(tree) == std::vector<std::uint32_t>{0x01, 0x02, 0x05, 0x09, 0x12});
  std::vector<std::int32_t> positions(5);
  tree_positions(tree, 3, positions);
  CHECK(positions == std::vector<std::int32_t>{3, 3, 4, 4, 4});
  CHECK(root_to_leaf_paths(tree) == std::vector<std::vector<std::int32_t>>{{0, 2}, {0, 3}, {1, 4}});
}

TEST_CASE("TensorRT-LLM export of a small tree is hand-checked", "[tree][export]") {
  const auto tree = small_tree();
  REQUIRE(trtllm::mask_words(tree) == 1);
  std::vector<std::int32_t> mask(trtllm::mask_size(tree)), offsets(6);
  const auto rows = trtllm::path_rows(tree), width = trtllm::path_width(tree);
  REQUIRE(rows == 3);
  REQUIRE(width == 3);
  std::vector<std::int32_t> paths(static_cast<std::size_t>(rows * width));
  trtllm::export_tree(tree, mask, offsets, rows, width, paths);
  // Slots: 0 root, 1 a, 2 b, 3 c, 4 d, 5 e. Bit s = slot s, least significant first.
  CHECK(mask ==
        std::vector<std::int32_t>{0b000001, 0b000011, 0b000101, 0b001011, 0b010011, 0b100101});
  CHECK(offsets == std::vector<std::int32_t>{0, 1, 1, 2, 2, 2});
  CHECK(paths == std::vector<std::int32_t>{0, 1, 3, 0, 1, 4, 0, 2, 5});
  // Padded paths (TensorRT-LLM's [max decoding tokens, max path length]).
  std::vector<std::int32_t> padded(6 * 4);
  trtllm::export_tree(tree, mask, offsets, 6, 4, padded);
  CHECK(std::vector<std::int32_t>(padded.begin(), padded.begin() + 8) ==
        std::vector<std::int32_t>{0, 1, 3, -1, 0, 1, 4, -1});
  CHECK(std::vector<std::int32_t>(padded.begin() + 12, padded.end()) ==
        std::vector<std::int32_t>(12, -1));
}

TEST_CASE("TensorRT-LLM export of an empty tree holds the root alone", "[tree][export]") {
  DraftTree tree;
  std::vector<std::int32_t> mask(1), offsets(1), paths(1);
  trtllm::export_tree(tree, mask, offsets, 1, 1, paths);
  CHECK(mask[0] == 1);
  CHECK(offsets[0] == 0);
  CHECK(paths[0] == 0);
}

TEST_CASE("TensorRT-LLM packed rows match the dense mask beyond 32 and 64 slots",
          "[tree][export]") {
  for (std::int32_t n : {31, 40, 63, 64, 70, 200}) {
    const auto tree = test::random_tree(n, 100 + static_cast<std::uint64_t>(n));
    const auto dense = test::dense_mask(tree);
    const auto words = trtllm::mask_words(tree);
    REQUIRE(words == (n + 1 + 31) / 32);
    std::vector<std::int32_t> mask(trtllm::mask_size(tree)),
        offsets(static_cast<std::size_t>(n + 1));
    const auto rows = trtllm::path_rows(tree), width = trtllm::path_width(tree);
    std::vector<std::int32_t> paths(static_cast<std::size_t>(rows * width));
    trtllm::export_tree(tree, mask, offsets, rows, width, paths);
    auto bit = [&](std::int32_t t, std::int32_t s) {
      const auto w = static_cast<std::uint32_t>(mask[static_cast<std::size_t>(t * words + s / 32)]);
      return ((w >> (s % 32)) & 1u) != 0;
    };
    for (std::int32_t t = 0; t <= n; ++t) {
      REQUIRE(bit(t, 0));  // the root is visible to every slot
      for (std::int32_t s = 1; s <= n; ++s) {
        const bool expected = t > 0 && dense[static_cast<std::size_t>((t - 1) * n + (s - 1))] == 1;
        REQUIRE(bit(t, s) == expected);
      }
      REQUIRE(offsets[static_cast<std::size_t>(t)] ==
              (t == 0 ? 0 : tree.depths[static_cast<std::size_t>(t - 1)]));
    }
    // Paths: each row starts at the root and follows parent links to a leaf.
    const auto leaf_ids = leaves(tree);
    for (std::size_t r = 0; r < leaf_ids.size(); ++r) {
      const auto* row = paths.data() + r * static_cast<std::size_t>(width);
      REQUIRE(row[0] == 0);
      const auto depth = tree.depths[static_cast<std::size_t>(leaf_ids[r])];
      REQUIRE(row[depth] == leaf_ids[r] + 1);
      for (std::int32_t k = 1; k <= depth; ++k) {
        REQUIRE(tree.parents[static_cast<std::size_t>(row[k] - 1)] + 1 == row[k - 1]);
      }
      for (std::int32_t k = depth + 1; k < width; ++k) REQUIRE(row[k] == -1);
    }
  }
}

TEST_CASE("FlashInfer mask of a small tree is hand-checked", "[tree][export]") {
  const auto tree = small_tree();
  // Root in the query, context of 3 committed tokens (root at column 2): 6 x 8 bits = 6 bytes.
  REQUIRE(flashinfer::mask_bytes(tree, 3, true) == 6);
  std::vector<std::uint8_t> with_root(6);
  flashinfer::export_mask(tree, 3, true, with_root);
  // Rows (kv columns 0..7: x x r a b c d e):
  //   r 11100000, a 11110000, b 11101000, c 11110100, d 11110010, e 11101001
  // flattened row-major, bit e of the stream = bit e % 8 of byte e / 8.
  CHECK(with_root == std::vector<std::uint8_t>{0x07, 0x0F, 0x17, 0x2F, 0x4F, 0x97});
  // Root already in the cache: 5 x 8 bits = 5 bytes, the same rows without the first.
  REQUIRE(flashinfer::mask_bytes(tree, 3, false) == 5);
  std::vector<std::uint8_t> without_root(5);
  flashinfer::export_mask(tree, 3, false, without_root);
  CHECK(without_root == std::vector<std::uint8_t>{0x0F, 0x17, 0x2F, 0x4F, 0x97});
}

TEST_CASE("FlashInfer rows are not byte-aligned and match the dense mask", "[tree][export]") {
  for (std::int32_t n : {33, 65, 100}) {
    const auto tree = test::random_tree(n, 200 + static_cast<std::uint64_t>(n));
    const auto dense = test::dense_mask(tree);
    for (std::int32_t context : {5, 21}) {
      const std::int64_t kv = context + n;
      for (bool include_root : {true, false}) {
        std::vector<std::uint8_t> bytes(flashinfer::mask_bytes(tree, context, include_root));
        flashinfer::export_mask(tree, context, include_root, bytes);
        const std::int32_t first = include_root ? 1 : 0;
        for (std::int64_t c = 0; c < kv; ++c) {
          if (include_root) REQUIRE(flashinfer_bit(bytes, c) == (c < context));
        }
        for (std::int32_t i = 0; i < n; ++i) {
          for (std::int64_t c = 0; c < kv; ++c) {
            const bool expected =
                c < context || dense[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) +
                                     static_cast<std::size_t>(c - context)] == 1;
            REQUIRE(flashinfer_bit(bytes, (first + i) * kv + c) == expected);
          }
        }
        // Unused high bits of the last byte are 0.
        const std::int64_t bits = flashinfer::mask_bits(tree, context, include_root);
        for (std::int64_t e = bits; e < static_cast<std::int64_t>(bytes.size()) * 8; ++e) {
          REQUIRE_FALSE(flashinfer_bit(bytes, e));
        }
      }
    }
  }
}

TEST_CASE("FlashInfer batch masks are packed per segment with an indptr", "[tree][export]") {
  const std::vector<DraftTree> trees = {small_tree(), DraftTree{}, test::rsds_tree()};
  const std::vector<std::int32_t> contexts = {3, 2, 4};
  const auto total = flashinfer::batch_mask_bytes(trees, contexts, true);
  // 6 bytes; 1 x 2 bits = 1 byte; 10 x 13 bits = 130 bits = 17 bytes.
  REQUIRE(total == 24);
  std::vector<std::uint8_t> out(total);
  std::vector<std::int32_t> indptr(4);
  flashinfer::export_masks(trees, contexts, true, out, indptr);
  CHECK(indptr == std::vector<std::int32_t>{0, 6, 7, 24});
  CHECK(std::vector<std::uint8_t>(out.begin(), out.begin() + 6) ==
        std::vector<std::uint8_t>{0x07, 0x0F, 0x17, 0x2F, 0x4F, 0x97});
  CHECK(out[6] == 0x03);
  std::vector<std::uint8_t> third(17);
  flashinfer::export_mask(trees[2], 4, true, third);
  CHECK(std::vector<std::uint8_t>(out.begin() + 7, out.end()) == third);
}

TEST_CASE("SGLang export of a small tree is hand-checked", "[tree][export]") {
  const auto tree = small_tree();
  std::vector<std::int64_t> index(6), next_token(6), next_sibling(6);
  sglang::export_tree(tree, 12, index, next_token, next_sibling);
  CHECK(index == std::vector<std::int64_t>{12, 13, 14, 15, 16, 17});
  CHECK(next_token == std::vector<std::int64_t>{1, 3, 5, -1, -1, -1});
  CHECK(next_sibling == std::vector<std::int64_t>{-1, 2, -1, 4, -1, -1});
  std::vector<std::int32_t> positions(6);
  engine_positions(tree, 7, positions);
  CHECK(positions == std::vector<std::int32_t>{6, 7, 7, 8, 8, 8});
}

TEST_CASE("SGLang lists walk every node of a tree past 32 and 64 nodes", "[tree][export]") {
  for (std::int32_t n : {40, 100}) {
    const auto tree = test::random_tree(n, 300 + static_cast<std::uint64_t>(n));
    std::vector<std::int64_t> index(static_cast<std::size_t>(n + 1)), next_token(index.size()),
        next_sibling(index.size());
    sglang::export_tree(tree, 0, index, next_token, next_sibling);
    std::vector<std::int32_t> first(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
    const auto root_first = build_child_links(tree, first, next);
    CHECK(next_token[0] == (root_first < 0 ? -1 : root_first + 1));
    for (std::int32_t i = 0; i < n; ++i) {
      const auto f = first[static_cast<std::size_t>(i)], s = next[static_cast<std::size_t>(i)];
      REQUIRE(next_token[static_cast<std::size_t>(i + 1)] == (f < 0 ? -1 : f + 1));
      REQUIRE(next_sibling[static_cast<std::size_t>(i + 1)] == (s < 0 ? -1 : s + 1));
    }
    // A depth-first walk from the root visits all n nodes once.
    std::vector<std::int64_t> stack = {0};
    std::int32_t visited = 0;
    while (!stack.empty()) {
      const auto t = stack.back();
      stack.pop_back();
      ++visited;
      for (auto c = next_token[static_cast<std::size_t>(t)]; c >= 0;
           c = next_sibling[static_cast<std::size_t>(c)]) {
        stack.push_back(c);
      }
    }
    CHECK(visited == n + 1);
  }
}

TEST_CASE("KV compaction moves an accepted path to consecutive slots", "[tree][kv]") {
  const auto tree = test::rsdc_tree();
  const std::vector<std::int32_t> accepted = {1, 6, 12};
  std::vector<std::int32_t> source(3), destination(3);
  CHECK(kv_compaction(tree, 20, accepted, source, destination) == 3);
  CHECK(source == std::vector<std::int32_t>{21, 26, 32});
  CHECK(destination == std::vector<std::int32_t>{20, 21, 22});
  // The first branch is already in place.
  const std::vector<std::int32_t> in_place = {0};
  std::vector<std::int32_t> s1(1), d1(1);
  CHECK(kv_compaction(tree, 20, in_place, s1, d1) == 0);
  CHECK(s1[0] == 20);
  // Nothing accepted: nothing to move.
  CHECK(kv_compaction(tree, 20, {}, {}, {}) == 0);
}

TEST_CASE("accepted paths of a batch pack into CSR", "[tree][kv]") {
  const std::vector<DraftTree> trees = {test::rsdc_tree(), test::rsds_tree(), small_tree()};
  const std::vector<std::int32_t> contexts = {10, 4, 7};
  const std::vector<std::int32_t> a0 = {2, 8, 14}, a1 = {}, a2 = {1, 4};
  const std::vector<std::span<const std::int32_t>> accepted = {a0, a1, a2};
  AcceptedPaths paths;
  pack_accepted_paths(trees, contexts, accepted, paths);
  CHECK(paths.offsets == std::vector<std::int32_t>{0, 3, 3, 5});
  CHECK(paths.slots == std::vector<std::int32_t>{12, 18, 24, 8, 11});
}

TEST_CASE("exporters and KV compaction reject bad input by name", "[tree][export][errors]") {
  const auto tree = small_tree();
  std::vector<std::int32_t> mask(6), offsets(6), paths(9), five(5);
  CHECK_THROWS_WITH(trtllm::export_tree(tree, five, offsets, 3, 3, paths),
                    Catch::Contains("packed_mask"));
  CHECK_THROWS_WITH(trtllm::export_tree(tree, mask, five, 3, 3, paths),
                    Catch::Contains("position_offsets"));
  CHECK_THROWS_WITH(trtllm::export_tree(tree, mask, offsets, 2, 3, paths),
                    Catch::Contains("path_rows"));
  CHECK_THROWS_WITH(trtllm::export_tree(tree, mask, offsets, 3, 2, paths),
                    Catch::Contains("path_width"));
  CHECK_THROWS_WITH(trtllm::export_tree(tree, mask, offsets, 3, 4, paths),
                    Catch::Contains("paths"));

  std::vector<std::uint8_t> bytes(5);
  CHECK_THROWS_WITH(flashinfer::export_mask(tree, 3, true, bytes), Catch::Contains("out"));
  CHECK_THROWS_WITH(flashinfer::export_mask(tree, 0, false, bytes),
                    Catch::Contains("context_length"));
  const std::vector<DraftTree> trees = {tree, tree};
  const std::vector<std::int32_t> one = {3}, two = {3, 0};
  std::vector<std::int32_t> indptr(3);
  CHECK_THROWS_WITH(flashinfer::export_masks(trees, one, true, bytes, indptr),
                    Catch::Contains("context_lengths"));
  CHECK_THROWS_WITH(flashinfer::export_masks(trees, two, true, bytes, indptr),
                    Catch::Contains("context_lengths[1]"));
  const std::vector<std::int32_t> good = {3, 3};
  CHECK_THROWS_WITH(flashinfer::export_masks(trees, good, true, bytes, indptr),
                    Catch::Contains("out"));
  CHECK_THROWS_WITH(
      flashinfer::export_masks(trees, good, true, bytes, std::span<std::int32_t>(indptr).first(2)),
      Catch::Contains("mask_indptr"));

  std::vector<std::int64_t> six(6), small64(5);
  CHECK_THROWS_WITH(sglang::export_tree(tree, 0, small64, six, six),
                    Catch::Contains("retrieve_index"));
  CHECK_THROWS_WITH(sglang::export_tree(tree, 0, six, small64, six),
                    Catch::Contains("retrieve_next_token"));
  CHECK_THROWS_WITH(sglang::export_tree(tree, 0, six, six, small64),
                    Catch::Contains("retrieve_next_sibling"));
  CHECK_THROWS_WITH(sglang::export_tree(tree, -1, six, six, six), Catch::Contains("index_base"));
  std::vector<std::int32_t> pos(5);
  CHECK_THROWS_WITH(engine_positions(tree, 3, pos), Catch::Contains("out"));

  DraftTree malformed = tree;
  malformed.depths[4] = 1;
  CHECK_THROWS_WITH(sglang::export_tree(malformed, 0, six, six, six), Catch::Contains("depths[4]"));
  CHECK_THROWS_WITH(trtllm::export_tree(malformed, mask, offsets, 3, 3, paths),
                    Catch::Contains("depths[4]"));
  const std::vector<DraftTree> bad_batch = {tree, malformed};
  CHECK_THROWS_WITH(flashinfer::export_masks(bad_batch, good, true, bytes, indptr),
                    Catch::StartsWith("depths[1][4]: "));
}

TEST_CASE("KV compaction rejects accepted ids that are not a root path", "[tree][kv][errors]") {
  const auto tree = test::rsdc_tree();
  std::vector<std::int32_t> s(3), d(3), s2(2);
  const std::vector<std::int32_t> not_from_root = {3, 9};
  const std::vector<std::int32_t> broken = {1, 3, 9};
  const std::vector<std::int32_t> out_of_range = {1, 6, 15};
  const std::vector<std::int32_t> good = {1, 6, 12};
  std::vector<std::int32_t> s2b(2), d2(2);
  CHECK_THROWS_WITH(kv_compaction(tree, 5, not_from_root, s2b, d2),
                    Catch::Contains("accepted[0]") && Catch::Contains("path from the root"));
  CHECK_THROWS_WITH(kv_compaction(tree, 5, broken, s, d), Catch::Contains("accepted[1]"));
  CHECK_THROWS_WITH(kv_compaction(tree, 5, out_of_range, s, d),
                    Catch::Contains("accepted[2]") && Catch::Contains("15"));
  CHECK_THROWS_WITH(kv_compaction(tree, 0, good, s, d), Catch::Contains("context_length"));
  CHECK_THROWS_WITH(kv_compaction(tree, 5, good, s2, d), Catch::Contains("source"));
  CHECK_THROWS_WITH(kv_compaction(tree, 5, good, s, s2), Catch::Contains("destination"));

  const std::vector<DraftTree> trees = {tree, tree};
  const std::vector<std::int32_t> contexts = {5, 5};
  const std::vector<std::span<const std::int32_t>> accepted = {good, broken};
  AcceptedPaths paths;
  CHECK_THROWS_WITH(pack_accepted_paths(trees, contexts, accepted, paths),
                    Catch::Contains("accepted[1][1]"));
  const std::vector<std::span<const std::int32_t>> one = {good};
  CHECK_THROWS_WITH(pack_accepted_paths(trees, contexts, one, paths), Catch::Contains("accepted"));
  const std::vector<std::int32_t> zero = {5, 0};
  const std::vector<std::span<const std::int32_t>> both = {good, good};
  CHECK_THROWS_WITH(pack_accepted_paths(trees, zero, both, paths),
                    Catch::Contains("context_lengths[1]"));
}
