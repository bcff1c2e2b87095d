// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/tree/tree.hpp"
#include "tree_fixtures.hpp"

using namespace specdec;

namespace {

// Reference vectors of ReDrafter's tree attention tests (B = 2, W = 3, L = 4).
const std::vector<Token> kBeams0 = {91, 92, 93, 95, 91, 92, 94, 96, 91, 92, 93, 97};
const std::vector<Token> kBeams1 = {93, 94, 95, 92, 93, 95, 96, 93, 93, 94, 97, 96};
constexpr std::int64_t kVocab = 128;

CompressedBeams compress(const std::vector<Token>& beams) {
  CompressedBeams out;
  compress_beams(beams, 3, kVocab, out);
  return out;
}

}  // namespace

TEST_CASE("prefix match reproduces seed 001 Listing 1 and the reference vectors",
          "[tree][redrafter]") {
  std::vector<std::int32_t> match(12);
  prefix_match(kBeams0, 3, kVocab, match);
  CHECK(match == std::vector<std::int32_t>{0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 2});
  prefix_match(kBeams1, 3, kVocab, match);
  CHECK(match == std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 2, 2});
}

TEST_CASE("compressed beams reproduce the reference packed tokens and indices",
          "[tree][redrafter]") {
  const auto row0 = compress(kBeams0);
  CHECK(row0.tokens == std::vector<Token>{91, 92, 93, 95, 94, 96, 97});
  CHECK(row0.source == std::vector<std::int32_t>{0, 1, 2, 3, 6, 7, 11});
  CHECK(row0.offsets == std::vector<std::int32_t>{0, 1, 2, 3, 2, 3, 3});
  CHECK(row0.unpacker == std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 4, 5, 0, 1, 2, 6});
  // 12 -> 9: the second batch row (seed 001 Figure 2 compresses 12 tokens to 9 as well).
  const auto row1 = compress(kBeams1);
  REQUIRE(row1.size() == 9);
  CHECK(row1.tokens == std::vector<Token>{93, 94, 95, 92, 95, 96, 93, 97, 96});
  CHECK(row1.source == std::vector<std::int32_t>{0, 1, 2, 3, 5, 6, 7, 10, 11});
  CHECK(row1.offsets == std::vector<std::int32_t>{0, 1, 2, 3, 1, 2, 3, 2, 3});
  CHECK(row1.unpacker == std::vector<std::int32_t>{0, 1, 2, 3, 0, 4, 5, 6, 0, 1, 7, 8});
  CHECK(row1.parents == std::vector<std::int32_t>{-1, 0, 1, 2, 0, 4, 5, 1, 7});
  // TensorRT-LLM's flat token list and total lengths of the batch.
  std::vector<Token> flat = row0.tokens;
  flat.insert(flat.end(), row1.tokens.begin(), row1.tokens.end());
  CHECK(flat == std::vector<Token>{91, 92, 93, 95, 94, 96, 97, 93, 94, 95, 92, 95, 96, 93, 97, 96});
  // Packed position ids with bases 3 and 10.
  std::vector<std::int32_t> pos0(7), pos1(9);
  compressed_positions(row0, 3, pos0);
  compressed_positions(row1, 10, pos1);
  CHECK(pos0 == std::vector<std::int32_t>{3, 4, 5, 6, 5, 6, 6});
  CHECK(pos1 == std::vector<std::int32_t>{10, 11, 12, 13, 11, 12, 13, 12, 13});
}

TEST_CASE("a packed beam batch reproduces the reference padded layout exactly",
          "[tree][redrafter]") {
  std::vector<Token> beams = kBeams0;
  beams.insert(beams.end(), kBeams1.begin(), kBeams1.end());
  PackedBeamBatch batch;
  CompressedBeams scratch;
  pack_beam_batch(beams, 2, 3, kVocab, batch, scratch);
  CHECK(batch.length == 4);
  CHECK(batch.max_selected == 9);
  CHECK(batch.total_lengths == std::vector<std::int32_t>{7, 9});
  CHECK(batch.flat_tokens ==
        std::vector<Token>{91, 92, 93, 95, 94, 96, 97, 93, 94, 95, 92, 95, 96, 93, 97, 96});
  // PACKED_BEAMS, PACKED_TOKEN_INDICES, UNPACKER and position_offsets of the reference test.
  CHECK(batch.packed_tokens == std::vector<Token>{91, 92, 93, 95, 94, 96, 97, 93, 94,  //
                                                  93, 94, 95, 92, 95, 96, 93, 97, 96});
  CHECK(batch.packed_token_indices == std::vector<std::int32_t>{0, 1, 2, 3, 6, 7, 11, 0, 1,  //
                                                                0, 1, 2, 3, 5, 6, 7, 10, 11});
  CHECK(batch.unpacker == std::vector<std::int32_t>{0, 1, 2, 3, 0, 1, 4, 5, 0, 1, 2, 6,  //
                                                    0, 1, 2, 3, 0, 4, 5, 6, 0, 1, 7, 8});
  CHECK(batch.position_offsets == std::vector<std::int32_t>{0, 1, 2, 3, 2, 3, 3, 0, 1,  //
                                                            0, 1, 2, 3, 1, 2, 3, 2, 3});
  CHECK_THROWS_WITH(pack_beam_batch(beams, 0, 3, kVocab, batch, scratch), Catch::Contains("batch"));
  CHECK_THROWS_WITH(pack_beam_batch(beams, 2, 0, kVocab, batch, scratch), Catch::Contains("width"));
  CHECK_THROWS_WITH(pack_beam_batch(beams, 5, 3, kVocab, batch, scratch), Catch::Contains("beams"));
  CHECK_THROWS_WITH(pack_beam_batch(beams, 2, 3, 96, batch, scratch),
                    Catch::StartsWith("beams[0][1][3]: "));
}

TEST_CASE("unpacking compressed values restores the beams", "[tree][redrafter]") {
  for (const auto* beams : {&kBeams0, &kBeams1}) {
    const auto packed = compress(*beams);
    std::vector<Token> out(12);
    unpack_beams<Token>(packed, packed.tokens, out);
    CHECK(out == *beams);
  }
}

TEST_CASE("compressed mask of the 12 -> 9 example is hand-checked", "[tree][redrafter]") {
  const auto packed = compress(kBeams1);
  std::vector<std::uint8_t> mask(81);
  compressed_dense_mask(packed, mask);
  // Rows of the 9 packed tokens over the 9 packed columns (the committed context, 3 tokens in the
  // reference test, is visible to all and is left out).
  const std::vector<std::uint8_t> expected = {
      1, 0, 0, 0, 0, 0, 0, 0, 0,  // 93 (all beams, k = 0)
      1, 1, 0, 0, 0, 0, 0, 0, 0,  // 94 (beams 0 and 2)
      1, 1, 1, 0, 0, 0, 0, 0, 0,  // 95 (beam 0)
      1, 1, 1, 1, 0, 0, 0, 0, 0,  // 92 (beam 0)
      1, 0, 0, 0, 1, 0, 0, 0, 0,  // 95 (beam 1)
      1, 0, 0, 0, 1, 1, 0, 0, 0,  // 96 (beam 1)
      1, 0, 0, 0, 1, 1, 1, 0, 0,  // 93 (beam 1)
      1, 1, 0, 0, 0, 0, 0, 1, 0,  // 97 (beam 2)
      1, 1, 0, 0, 0, 0, 0, 1, 1,  // 96 (beam 2)
  };
  CHECK(mask == expected);
  std::vector<std::uint32_t> words(9);
  compressed_packed_mask(packed, words);
  CHECK(words == std::vector<std::uint32_t>{0x1, 0x3, 0x7, 0xF, 0x11, 0x31, 0x71, 0x83, 0x183});
}

TEST_CASE("every compressed row sees exactly its beam prefix", "[tree][redrafter]") {
  // Random beams over a tiny vocabulary share many prefixes.
  toy::ToyRandom rng(11);
  const std::int32_t width = 16, length = 8;
  std::vector<Token> beams(static_cast<std::size_t>(width * length));
  for (auto& t : beams) t = rng.below(2);
  CompressedBeams packed;
  compress_beams(beams, width, 2, packed);
  const auto n = static_cast<std::size_t>(packed.size());
  REQUIRE(n < beams.size());
  std::vector<std::uint8_t> mask(n * n);
  compressed_dense_mask(packed, mask);
  for (std::int32_t j = 0; j < width; ++j) {
    for (std::int32_t k = 0; k < length; ++k) {
      const auto r =
          static_cast<std::size_t>(packed.unpacker[static_cast<std::size_t>(j * length + k)]);
      std::vector<std::uint8_t> expected(n, 0);
      for (std::int32_t k2 = 0; k2 <= k; ++k2) {
        expected[static_cast<std::size_t>(
            packed.unpacker[static_cast<std::size_t>(j * length + k2)])] = 1;
      }
      REQUIRE(std::vector<std::uint8_t>(mask.begin() + static_cast<std::ptrdiff_t>(r * n),
                                        mask.begin() + static_cast<std::ptrdiff_t>((r + 1) * n)) ==
              expected);
      REQUIRE(packed.offsets[r] == k);
    }
  }
  // Distinct prefixes: no two compressed nodes share parent and token.
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      REQUIRE(!(packed.parents[a] == packed.parents[b] && packed.tokens[a] == packed.tokens[b]));
    }
  }
}

TEST_CASE("compressed beams convert to a level-ordered DraftTree with the same mask",
          "[tree][redrafter]") {
  const auto packed = compress(kBeams1);
  DraftTree tree;
  std::vector<std::int32_t> node_of(9);
  compressed_to_draft_tree(packed, tree, node_of);
  REQUIRE_NOTHROW(tree.validate(kVocab));
  CHECK(tree.tokens == std::vector<Token>{93, 94, 95, 95, 96, 97, 92, 93, 96});
  CHECK(tree.depths == std::vector<std::int32_t>{1, 2, 2, 3, 3, 3, 4, 4, 4});
  std::vector<std::uint8_t> compressed(81);
  compressed_dense_mask(packed, compressed);
  const auto mask = test::dense_mask(tree);
  for (std::size_t r = 0; r < 9; ++r) {
    for (std::size_t c = 0; c < 9; ++c) {
      REQUIRE(
          compressed[r * 9 + c] ==
          mask[static_cast<std::size_t>(node_of[r]) * 9 + static_cast<std::size_t>(node_of[c])]);
    }
  }
  std::vector<std::int32_t> tree_pos(9), packed_pos(9);
  tree_positions(tree, 10, tree_pos);
  compressed_positions(packed, 10, packed_pos);
  for (std::size_t r = 0; r < 9; ++r) {
    CHECK(tree_pos[static_cast<std::size_t>(node_of[r])] == packed_pos[r]);
  }
}

TEST_CASE("identical beams compress to one beam", "[tree][redrafter]") {
  const std::vector<Token> beams = {4, 5, 6, 4, 5, 6};
  CompressedBeams packed;
  compress_beams(beams, 2, 8, packed);
  CHECK(packed.tokens == std::vector<Token>{4, 5, 6});
  CHECK(packed.unpacker == std::vector<std::int32_t>{0, 1, 2, 0, 1, 2});
}

TEST_CASE("bad beams are rejected with the argument named", "[tree][redrafter][errors]") {
  std::vector<std::int32_t> out(12);
  CompressedBeams packed;
  CHECK_THROWS_WITH(prefix_match(kBeams0, 0, kVocab, out), Catch::Contains("width"));
  CHECK_THROWS_WITH(compress_beams(kBeams0, 0, kVocab, packed), Catch::Contains("width"));
  CHECK_THROWS_WITH(prefix_match(kBeams0, 5, kVocab, out),
                    Catch::Contains("beams") && Catch::Contains("equal length"));
  CHECK_THROWS_WITH(prefix_match(std::vector<Token>{}, 3, kVocab, out), Catch::Contains("beams"));
  CHECK_THROWS_WITH(prefix_match(kBeams0, 3, 95, out),
                    Catch::Contains("beams[0][3]") && Catch::Contains("95"));
  CHECK_THROWS_WITH(prefix_match(kBeams0, 3, 0, out), Catch::Contains("vocab"));
  CHECK_THROWS_WITH(prefix_match(kBeams0, 3, kVocab, std::span<std::int32_t>(out).first(11)),
                    Catch::Contains("out"));
  const std::vector<std::vector<Token>> ragged = {{1, 2, 3}, {1, 2}};
  std::vector<Token> flat;
  CHECK_THROWS_WITH(detail::flatten_beams(ragged, flat),
                    Catch::Contains("beams[1]") && Catch::Contains("equal length"));
  CHECK_THROWS_WITH(detail::flatten_beams(std::vector<std::vector<Token>>{}, flat),
                    Catch::Contains("beams"));
  const std::vector<std::vector<Token>> even = {{1, 2}, {1, 3}};
  CHECK_NOTHROW(detail::flatten_beams(even, flat));
  CHECK(flat == std::vector<Token>{1, 2, 1, 3});

  const auto good = compress(kBeams0);
  std::vector<std::uint8_t> mask(48);
  CHECK_THROWS_WITH(compressed_dense_mask(good, mask), Catch::Contains("out"));
  std::vector<std::uint32_t> words(6);
  CHECK_THROWS_WITH(compressed_packed_mask(good, words), Catch::Contains("out"));
  std::vector<std::int32_t> pos(6);
  CHECK_THROWS_WITH(compressed_positions(good, 3, pos), Catch::Contains("out"));
  CHECK_THROWS_WITH(compressed_positions(good, -1, std::span<std::int32_t>(out).first(7)),
                    Catch::Contains("context_length"));
  std::vector<Token> unpacked(12);
  CHECK_THROWS_WITH(
      unpack_beams<Token>(good, std::span<const Token>(good.tokens).first(6), unpacked),
      Catch::Contains("packed"));
  auto corrupt = good;
  corrupt.parents[2] = 5;
  std::vector<std::uint8_t> mask49(49);
  CHECK_THROWS_WITH(compressed_dense_mask(corrupt, mask49), Catch::Contains("beams.parents[2]"));
  auto bad_offset = good;
  bad_offset.offsets[4] = 3;
  CHECK_THROWS_WITH(compressed_dense_mask(bad_offset, mask49), Catch::Contains("beams.offsets[4]"));
  auto bad_unpacker = good;
  bad_unpacker.unpacker[5] = 7;
  CHECK_THROWS_WITH(unpack_beams<Token>(bad_unpacker, good.tokens, unpacked),
                    Catch::Contains("beams.unpacker[5]"));
  DraftTree tree;
  std::vector<std::int32_t> node_of(3);
  CHECK_THROWS_WITH(compressed_to_draft_tree(good, tree, node_of), Catch::Contains("node_of"));
}
