// SPDX-License-Identifier: MIT
// The tree API on hostile sizes: many beams, lengths no node reaches, contexts that would make a
// mask size negative. Each finishes in time linear in its input or throws specdec::Error naming
// the argument, and the fast paths give what the plain definitions give.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <climits>
#include <cstdint>
#include <vector>

#include "specdec/toy/random.hpp"
#include "specdec/tree/tree.hpp"

using namespace specdec;

namespace {

// Generous against the few milliseconds expected (the quadratic prefix match of 100,000 beams
// takes seconds even in Release); holds under the sanitizers too.
constexpr double kTimeLimitSeconds = 2.0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The prefix match by its definition: the smallest beam j whose first k + 1 tokens equal beam
/// i's.
std::vector<std::int32_t> brute_force_prefix_match(const std::vector<Token>& beams,
                                                   std::int32_t width) {
  const auto w = static_cast<std::size_t>(width);
  const auto l = beams.size() / w;
  std::vector<std::int32_t> out(beams.size());
  for (std::size_t i = 0; i < w; ++i) {
    for (std::size_t k = 0; k < l; ++k) {
      for (std::size_t j = 0; j <= i; ++j) {
        if (std::equal(beams.begin() + static_cast<std::ptrdiff_t>(j * l),
                       beams.begin() + static_cast<std::ptrdiff_t>(j * l + k + 1),
                       beams.begin() + static_cast<std::ptrdiff_t>(i * l))) {
          out[i * l + k] = static_cast<std::int32_t>(j);
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("prefix_match and compress_beams take linear time on 200,000 distinct beams",
          "[tree][redrafter][hostile]") {
  // One-token beams that all differ: a quadratic match takes seconds at 100,000 already, twice
  // as many keep it well past the limit on a fast machine.
  const std::int32_t width = 200000;
  std::vector<Token> beams(static_cast<std::size_t>(width));
  for (std::int32_t j = 0; j < width; ++j) beams[static_cast<std::size_t>(j)] = j;
  std::vector<std::int32_t> match(beams.size());
  auto start = std::chrono::steady_clock::now();
  prefix_match(beams, width, width, match);
  CHECK(seconds_since(start) < kTimeLimitSeconds);
  bool own = true;
  for (std::int32_t j = 0; j < width; ++j) own &= match[static_cast<std::size_t>(j)] == j;
  CHECK(own);

  CompressedBeams compressed;
  start = std::chrono::steady_clock::now();
  compress_beams(beams, width, width, compressed);
  CHECK(seconds_since(start) < kTimeLimitSeconds);
  CHECK(compressed.size() == width);
  CHECK(compressed.tokens == beams);
  CHECK(compressed.prefix_match == match);
}

TEST_CASE("prefix_match takes linear time on 50,000 beam pairs sharing a first token",
          "[tree][redrafter][hostile]") {
  // Beams 2p and 2p + 1 share their first token and differ in the second: every position needs a
  // group of its own.
  const std::int32_t width = 100000;
  std::vector<Token> beams;
  for (std::int32_t j = 0; j < width; ++j) {
    beams.push_back(j / 2);
    beams.push_back(j);
  }
  std::vector<std::int32_t> match(beams.size());
  const auto start = std::chrono::steady_clock::now();
  prefix_match(beams, width, width, match);
  CHECK(seconds_since(start) < kTimeLimitSeconds);
  bool expected = true;
  for (std::int32_t j = 0; j < width; ++j) {
    expected &= match[2 * static_cast<std::size_t>(j)] == j - j % 2;
    expected &= match[2 * static_cast<std::size_t>(j) + 1] == j;
  }
  CHECK(expected);
}

TEST_CASE("prefix_match and compress_beams equal the definition on random beams",
          "[tree][redrafter][hostile]") {
  // Small vocabularies, so that beams share prefixes of every length and part again.
  toy::ToyRandom rng(77);
  for (int trial = 0; trial < 400; ++trial) {
    const auto width = 1 + static_cast<std::int32_t>(rng.uniform() * 12.0f);
    const auto length = 1 + static_cast<std::int32_t>(rng.uniform() * 5.0f);
    const std::int64_t vocab = trial % 2 == 0 ? 2 : 3;
    std::vector<Token> beams(static_cast<std::size_t>(width * length));
    for (auto& t : beams) {
      t = static_cast<Token>(static_cast<std::int64_t>(rng.uniform() * static_cast<float>(vocab)) %
                             vocab);
    }
    const auto expected = brute_force_prefix_match(beams, width);
    std::vector<std::int32_t> match(beams.size());
    prefix_match(beams, width, vocab, match);
    REQUIRE(match == expected);
    // The row function the batched backends run gives the same.
    std::vector<std::int32_t> row(beams.size());
    detail::beam_prefix_match(beams.data(), width, length, row.data());
    REQUIRE(row == expected);

    CompressedBeams compressed;
    compress_beams(beams, width, vocab, compressed);
    REQUIRE(compressed.prefix_match == expected);
    // A node per beam position that starts a new prefix, in (beam, position) order.
    std::size_t nodes = 0;
    for (std::size_t x = 0; x < beams.size(); ++x) {
      const auto k = x % static_cast<std::size_t>(length);
      const auto j = x / static_cast<std::size_t>(length);
      REQUIRE(compressed.tokens[static_cast<std::size_t>(compressed.unpacker[x])] == beams[x]);
      if (expected[x] == static_cast<std::int32_t>(j)) {
        REQUIRE(compressed.unpacker[x] == static_cast<std::int32_t>(nodes));
        REQUIRE(compressed.source[nodes] == static_cast<std::int32_t>(x));
        REQUIRE(compressed.offsets[nodes] == static_cast<std::int32_t>(k));
        REQUIRE(compressed.parents[nodes] == (k == 0 ? -1 : compressed.unpacker[x - 1]));
        ++nodes;
      } else {
        REQUIRE(compressed.unpacker[x] ==
                compressed.unpacker[static_cast<std::size_t>(expected[x]) *
                                        static_cast<std::size_t>(length) +
                                    k]);
      }
    }
    REQUIRE(compressed.tokens.size() == nodes);
  }
}

TEST_CASE("compressed_to_draft_tree does not size by a length no node reaches",
          "[tree][redrafter][hostile]") {
  // No beams and L = INT32_MAX pass the consistency checks (W x L = 0 unpacker entries); sizing
  // the levels by L would ask for 8 GiB.
  CompressedBeams empty;
  empty.width = 0;
  empty.length = INT32_MAX;
  DraftTree tree;
  tree.add(1, -1);  // the call replaces whatever the tree held
  const auto start = std::chrono::steady_clock::now();
  compressed_to_draft_tree(empty, tree, {});
  CHECK(seconds_since(start) < kTimeLimitSeconds);
  CHECK(tree.empty());

  // Nodes without beams to unpack to: the levels are sized by the nodes.
  CompressedBeams chain;
  chain.width = 0;
  chain.length = INT32_MAX;
  chain.tokens = {5, 6, 7};
  chain.source = {0, 1, 2};
  chain.offsets = {0, 1, 1};
  chain.parents = {-1, 0, 0};
  std::vector<std::int32_t> node_of(3);
  compressed_to_draft_tree(chain, tree, node_of);
  CHECK(tree.tokens == std::vector<Token>{5, 6, 7});
  CHECK(tree.parents == std::vector<std::int32_t>{-1, 0, 0});
  CHECK(node_of == std::vector<std::int32_t>{0, 1, 2});
}

TEST_CASE("compressed beams with a negative width or length are rejected by name",
          "[tree][redrafter][hostile]") {
  // W = L = -1 multiply to one unpacker entry as sizes: the shape is checked before it is used.
  CompressedBeams beams;
  beams.width = -1;
  beams.length = -1;
  beams.unpacker = {0};
  DraftTree tree;
  CHECK_THROWS_WITH(compressed_to_draft_tree(beams, tree, {}), Catch::Contains("beams.width"));
  beams.width = 1;
  CHECK_THROWS_WITH(compressed_to_draft_tree(beams, tree, {}), Catch::Contains("beams.length"));
}

TEST_CASE("FlashInfer mask sizes reject a context below 1 instead of wrapping",
          "[tree][exporters][hostile]") {
  DraftTree tree;
  tree.add(1, -1);
  tree.add(2, 0);
  for (const std::int32_t context : {-100, 0, INT32_MIN}) {
    for (const bool include_root : {false, true}) {
      CHECK_THROWS_WITH(flashinfer::mask_bytes(tree, context, include_root),
                        Catch::Contains("context_length"));
      CHECK_THROWS_WITH(flashinfer::mask_bits(tree, context, include_root),
                        Catch::Contains("context_length"));
    }
  }
  CHECK(flashinfer::mask_bytes(tree, 1, true) == 2);  // 3 x 3 bits

  const std::vector<DraftTree> trees = {tree, tree, tree};
  const std::vector<std::int32_t> contexts = {4, -100, 0};
  CHECK_THROWS_WITH(flashinfer::batch_mask_bytes(trees, contexts, false),
                    Catch::Contains("context_lengths[1]"));
  const std::vector<std::int32_t> good = {4, 1, 2};
  CHECK(flashinfer::batch_mask_bytes(trees, good, false) == 2 + 1 + 1);  // 12, 6 and 8 bits
}
