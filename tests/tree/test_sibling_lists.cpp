// SPDX-License-Identifier: MIT
// First-child / next-sibling links (SGLang's layout) -> parents in level order, and back through
// sglang::export_tree.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <utility>
#include <vector>

#include "specdec/tree/exporters.hpp"
#include "specdec/tree/sibling_lists.hpp"

using namespace specdec;

namespace sibling_list_tests {

struct Parents {
  std::vector<std::int32_t> parents, slots;
};

Parents to_parents(const std::vector<std::int64_t>& first_child,
                   const std::vector<std::int64_t>& next_sibling) {
  const auto n = first_child.empty() ? 0 : first_child.size() - 1;
  Parents out{std::vector<std::int32_t>(n), std::vector<std::int32_t>(n)};
  parents_from_sibling_lists({first_child, next_sibling}, out.parents, out.slots);
  return out;
}

/// sglang::export_tree's links of a parents layout (tokens are not needed: zeros).
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> to_links(
    const std::vector<std::int32_t>& parents) {
  const std::vector<Token> tokens(parents.size(), 0);
  std::vector<std::int64_t> index(parents.size() + 1), first(parents.size() + 1),
      next(parents.size() + 1);
  sglang::export_tree(TreeView{tokens, parents}, 0, index, first, next);
  return {first, next};
}

/// Every node's root-to-node path of slot tokens, sorted: equal for two layouts of one tree.
std::vector<std::vector<std::int64_t>> paths(const std::vector<std::int32_t>& parents,
                                             const std::vector<std::int64_t>& tokens) {
  std::vector<std::vector<std::int64_t>> out;
  for (std::size_t i = 0; i < parents.size(); ++i) {
    std::vector<std::int64_t> path;
    for (auto node = static_cast<std::int32_t>(i); node >= 0;
         node = parents[static_cast<std::size_t>(node)]) {
      path.insert(path.begin(), tokens[static_cast<std::size_t>(node)]);
    }
    out.push_back(path);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace sibling_list_tests

namespace slt = sibling_list_tests;

TEST_CASE("sibling lists convert to parents in level order with children in sibling order",
          "[tree][sibling_lists]") {
  // SGLang's second test tree: slot 0 -> {4, 1}, 1 -> 2 -> 3, 4 -> 5. Level order: slots 4, 1
  // (depth 1, in sibling order), 5, 2 (depth 2), 3 (depth 3).
  const auto p = slt::to_parents({4, 2, 3, -1, 5, -1}, {-1, -1, -1, -1, 1, -1});
  CHECK(p.slots == std::vector<std::int32_t>{4, 1, 5, 2, 3});
  CHECK(p.parents == std::vector<std::int32_t>{-1, -1, 0, 1, 3});
}

TEST_CASE("sibling lists and parents round-trip through sglang::export_tree",
          "[tree][sibling_lists]") {
  // Parents -> links -> parents is the identity for a tree whose levels list children parent by
  // parent; links -> parents -> links keeps every root-to-node token path.
  const std::vector<std::int32_t> parents = {-1, -1, -1, 0, 0, 2, 3, 3, 5};
  const auto [first, next] = slt::to_links(parents);
  const auto back = slt::to_parents(first, next);
  CHECK(back.parents == parents);
  CHECK(back.slots == std::vector<std::int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 9});

  // Slots in no particular order (as an engine may fill them), tokens per slot.
  const std::vector<std::int64_t> first2 = {3, -1, 6, 2, -1, -1, -1},
                                  next2 = {-1, -1, 4, 5, 1, -1, -1};
  const std::vector<std::int64_t> slot_tokens = {9, 10, 11, 12, 13, 14, 15};
  const auto p = slt::to_parents(first2, next2);
  std::vector<std::int64_t> node_tokens;
  for (auto s : p.slots) node_tokens.push_back(slot_tokens[static_cast<std::size_t>(s)]);
  const auto [first3, next3] = slt::to_links(p.parents);
  const auto again = slt::to_parents(first3, next3);
  std::vector<std::int64_t> again_tokens;
  for (auto s : again.slots) again_tokens.push_back(node_tokens[static_cast<std::size_t>(s) - 1]);
  CHECK(slt::paths(again.parents, again_tokens) == slt::paths(p.parents, node_tokens));
  CHECK(p.slots == std::vector<std::int32_t>{3, 5, 2, 4, 1, 6});
  CHECK(p.parents == std::vector<std::int32_t>{-1, -1, 0, 0, 0, 2});
  CHECK(again.parents == p.parents);
}

TEST_CASE("a root without children converts to an empty tree", "[tree][sibling_lists]") {
  const auto p = slt::to_parents({-1}, {-1});
  CHECK(p.parents.empty());
  CHECK(slt::to_links({}).first == std::vector<std::int64_t>{-1});
}

TEST_CASE("malformed sibling lists name the link", "[tree][sibling_lists][bad_input]") {
  const auto convert = [](std::vector<std::int64_t> first, std::vector<std::int64_t> next) {
    slt::to_parents(first, next);
  };
  // A child link out of range, and -2 (only -1 means none).
  CHECK_THROWS_WITH(convert({1, 3, -1}, {-1, -1, -1}), Catch::StartsWith("first_child[1]"));
  CHECK_THROWS_WITH(convert({-2, -1}, {-1, -1}), Catch::StartsWith("first_child[0]"));
  CHECK_THROWS_WITH(convert({1, -1, -1}, {-1, 7, -1}), Catch::StartsWith("next_sibling[1]"));
  // The root as a child, a sibling cycle, a child cycle, a slot with two parents.
  CHECK_THROWS_WITH(convert({1, 0}, {-1, -1}), Catch::StartsWith("first_child[1]"));
  CHECK_THROWS_WITH(convert({1, -1, -1}, {-1, 2, 1}),
                    Catch::StartsWith("next_sibling[2]") && Catch::Contains("second time"));
  CHECK_THROWS_WITH(convert({1, 2, 1}, {-1, -1, -1}), Catch::StartsWith("first_child[2]"));
  CHECK_THROWS_WITH(convert({1, 2, -1}, {-1, 2, -1}), Catch::StartsWith("first_child[1]"));
  // An unreachable slot, a sibling of the root, sizes.
  CHECK_THROWS_WITH(convert({1, -1, -1}, {-1, -1, -1}),
                    Catch::StartsWith("first_child") && Catch::Contains("slot 2 unreachable"));
  CHECK_THROWS_WITH(convert({1, -1}, {1, -1}), Catch::StartsWith("next_sibling[0]"));
  CHECK_THROWS_WITH(convert({1, -1}, {-1}), Catch::StartsWith("next_sibling"));
  CHECK_THROWS_WITH(convert({}, {}), Catch::StartsWith("first_child"));
  std::vector<std::int32_t> parents(2), slots(1);
  const std::vector<std::int64_t> first = {1, -1}, next = {-1, -1};
  CHECK_THROWS_WITH(parents_from_sibling_lists({first, next}, parents, slots),
                    Catch::StartsWith("parents"));
}
