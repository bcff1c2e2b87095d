// SPDX-License-Identifier: MIT
// Checked size arithmetic, and every public boundary where sizes are multiplied or narrowed:
// each case below wrapped, overflowed or read out of bounds before the sizes were checked.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "specdec/core/checked.hpp"
#include "specdec/toy/markov.hpp"
#include "specdec/tree/tree.hpp"
#include "specdec/verify/verify.hpp"

using namespace specdec;

namespace {

constexpr auto kInt32Max = std::numeric_limits<std::int32_t>::max();
constexpr auto kInt64Max = std::numeric_limits<std::int64_t>::max();

DraftTree chain_of(std::int32_t length) {
  DraftTree tree;
  for (std::int32_t i = 0; i < length; ++i) tree.add(0, i - 1);
  return tree;
}

}  // namespace

TEST_CASE("checked arithmetic throws naming the argument instead of wrapping", "[checked]") {
  CHECK(detail::checked_mul<std::int64_t>("n", 3, 5) == 15);
  CHECK(detail::checked_add<std::int32_t>("n", kInt32Max - 1, 1) == kInt32Max);
  CHECK_THROWS_WITH(detail::checked_add<std::int32_t>("context", kInt32Max, 1),
                    "context: 2147483647 + 1 overflows int32");
  CHECK_THROWS_WITH(detail::checked_mul<std::size_t>("vocab", 4, std::size_t{1} << 62),
                    "vocab: 4 x 4611686018427387904 overflows uint64");
  CHECK_THROWS_WITH(detail::checked_mul<std::int64_t>("shape", 3, 6148914691236517206),
                    Catch::StartsWith("shape: "));
  CHECK(detail::checked_narrow<std::int32_t>("top_k", std::int64_t{kInt32Max}) == kInt32Max);
  CHECK_THROWS_WITH(detail::checked_narrow<std::int32_t>("top_k", std::int64_t{4294967297}),
                    "top_k: 4294967297 is outside [-2147483648, 2147483647]");
  CHECK_THROWS_WITH(detail::checked_narrow<std::int64_t>("samples", ~std::uint64_t{0}),
                    Catch::StartsWith("samples: 18446744073709551615 is outside"));
  CHECK(detail::checked_integer<std::int64_t>("shape[0]", 3.0) == 3);
  CHECK(detail::checked_integer<std::uint32_t>("x", 4294967295.0) == 4294967295u);
  for (const double bad : {1.5, 1e300, -1e300, 9223372036854775808.0, std::nan(""),
                           std::numeric_limits<double>::infinity()}) {
    CHECK_THROWS_WITH(detail::checked_integer<std::int64_t>("shape[0]", bad),
                      Catch::StartsWith("shape[0]: "));
  }
  CHECK_THROWS(detail::checked_integer<std::uint32_t>("x", -1.0));
  CHECK_THROWS(detail::checked_integer<std::uint32_t>("x", 4294967296.0));
}

TEST_CASE("verify_tree rejects a vocabulary whose rows would wrap (N + 1) x V", "[checked]") {
  // (3 + 1) x 2^62 is 0 modulo 2^64: empty rows used to pass the size check and be read.
  const std::vector<Token> tokens = {0, 1, 2};
  const std::vector<std::int32_t> parents = {-1, 0, 1};
  std::vector<std::int32_t> accepted(3);
  Workspace ws;
  CHECK_THROWS_WITH(
      verify_tree(Rejection{}, {tokens, parents}, std::span<const float>{}, std::span<const float>{},
                  std::int64_t{1} << 62, RandomStream{}, accepted, ws),
      Catch::StartsWith("vocab: 4 x 4611686018427387904 overflows"));
  // The same for chains and blocks: (L + 1) x V.
  std::vector<Token> out(4);
  CHECK_THROWS_WITH(verify_chain(Rejection{}, std::span<const float>{}, std::span<const float>{},
                                 tokens, std::int64_t{1} << 62, RandomStream{}, out, ws),
                    Catch::StartsWith("vocab: "));
}

TEST_CASE("a Markov table whose V x V overflows is rejected", "[checked]") {
  CHECK_THROWS_WITH(toy::MarkovModel(std::int64_t{1} << 32, {}), Catch::StartsWith("vocab: "));
}

TEST_CASE("KV slots past INT32_MAX are rejected, the exact limit is kept", "[checked]") {
  const auto tree = chain_of(3);
  const std::vector<std::int32_t> accepted = {0, 1, 2};
  std::vector<std::int32_t> source(3), destination(3);
  // Slots run to context + N - 1: INT32_MAX - 2 + 2 is the last one that fits.
  CHECK(kv_compaction(tree, kInt32Max - 2, accepted, source, destination) == 0);
  CHECK(source[2] == kInt32Max);
  CHECK_THROWS_WITH(kv_compaction(tree, kInt32Max - 1, accepted, source, destination),
                    Catch::StartsWith("context_length: "));
  CHECK_THROWS_WITH(kv_compaction(tree, kInt32Max, accepted, source, destination),
                    Catch::StartsWith("context_length: "));

  const std::vector<DraftTree> trees = {tree, tree};
  const std::vector<std::span<const std::int32_t>> paths = {accepted, accepted};
  AcceptedPaths packed;
  pack_accepted_paths(trees, std::vector<std::int32_t>{1, kInt32Max - 2}, paths, packed);
  CHECK(packed.slots.back() == kInt32Max);
  CHECK_THROWS_WITH(
      pack_accepted_paths(trees, std::vector<std::int32_t>{1, kInt32Max}, paths, packed),
      Catch::StartsWith("context_lengths[1]: "));
}

TEST_CASE("position ids reach INT32_MAX exactly and no further", "[checked]") {
  const auto tree = chain_of(3);
  // The deepest node (depth 3) sits at context + 2.
  const std::int32_t context = kInt32Max - 2;
  std::vector<std::int32_t> positions(3), engine(4);
  tree_positions(tree, context, positions);
  CHECK(positions == std::vector<std::int32_t>{kInt32Max - 2, kInt32Max - 1, kInt32Max});
  engine_positions(tree, context, engine);
  CHECK(engine ==
        std::vector<std::int32_t>{kInt32Max - 3, kInt32Max - 2, kInt32Max - 1, kInt32Max});
  CHECK_THROWS_WITH(tree_positions(tree, context + 1, positions),
                    Catch::StartsWith("context_length: "));
  CHECK_THROWS_WITH(engine_positions(tree, context + 1, engine),
                    Catch::StartsWith("context_length: "));
}

TEST_CASE("export_sglang indices reach INT64_MAX exactly and no further", "[checked]") {
  const auto tree = chain_of(2);
  std::vector<std::int64_t> index(3), next(3), sibling(3);
  sglang::export_tree(tree, kInt64Max - 2, index, next, sibling);
  CHECK(index == std::vector<std::int64_t>{kInt64Max - 2, kInt64Max - 1, kInt64Max});
  CHECK_THROWS_WITH(sglang::export_tree(tree, kInt64Max, index, next, sibling),
                    Catch::StartsWith("index_base: "));
}
