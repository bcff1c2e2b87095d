// SPDX-License-Identifier: MIT
// Conversion between the first-child / next-sibling layout some engines pass their draft trees in
// (SGLang's retrive_next_token / retrive_next_sibling: N + 1 slots, slot 0 the root, -1 for none)
// and the parents layout every tree function here takes (TreeView: level order, root not stored).
// The other direction is sglang::export_tree (tree/exporters.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// A tree as first-child / next-sibling links over N + 1 slots: slot 0 is the root (the last
/// committed token), `first_child[s]` the first child of slot s and `next_sibling[s]` the next
/// child of s's parent, -1 where there is none. Siblings are listed in the order they are tried.
struct SiblingLists {
  std::span<const std::int64_t> first_child{};
  std::span<const std::int64_t> next_sibling{};
};

namespace detail {

/// parents_from_sibling_lists with the names its errors use (`first_name[s]`, `next_name[s]`;
/// a batch passes names that already carry the sequence index). `seen` holds N + 1 bytes.
inline std::int32_t parents_from_sibling_lists(SiblingLists lists, std::span<std::int32_t> parents,
                                               std::span<std::int32_t> slots,
                                               const ArgName& first_name, const ArgName& next_name,
                                               std::span<std::uint8_t> seen) {
  const auto slot_count = lists.first_child.size();
  if (slot_count == 0) fail(first_name, "has no entries; slot 0 (the root) is required");
  check_size(next_name, lists.next_sibling.size(), slot_count);
  check_node_count(first_name, slot_count - 1);
  const auto n = slot_count - 1;
  check_size("parents", parents.size(), n);
  check_size("slots", slots.size(), n);
  if (lists.next_sibling[0] != -1) {
    fail(next_name[0], "is {}; the root (slot 0) has no siblings, expected -1",
         lists.next_sibling[0]);
  }
  std::fill(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(slot_count), 0);
  seen[0] = 1;
  // Breadth first from the root, each child list in its order: level order, siblings in the
  // order they are tried. Every slot is entered at most once, so a cycle cannot loop.
  std::size_t count = 0;
  for (std::size_t head = 0; head == 0 || head <= count; ++head) {
    const std::size_t slot = head == 0 ? 0 : static_cast<std::size_t>(slots[head - 1]);
    const auto parent = static_cast<std::int32_t>(head) - 1;
    ArgName link = first_name[static_cast<std::int64_t>(slot)];
    for (std::int64_t child = lists.first_child[slot]; child != -1;
         child = lists.next_sibling[static_cast<std::size_t>(child)]) {
      if (child < 1 || child > static_cast<std::int64_t>(n)) {
        fail(link, "is {}; expected -1 (none) or a slot in [1, {}]", child, n);
      }
      if (seen[static_cast<std::size_t>(child)] != 0) {
        fail(link, "leads to slot {} a second time (a cycle, or a slot with two parents)", child);
      }
      seen[static_cast<std::size_t>(child)] = 1;
      parents[count] = parent;
      slots[count] = static_cast<std::int32_t>(child);
      ++count;
      link = next_name[child];
    }
  }
  if (count < n) {
    for (std::size_t s = 1; s < slot_count; ++s) {
      if (seen[s] == 0) {
        fail(first_name,
             "leaves slot {} unreachable from the root (slot 0): no child or "
             "sibling link leads to it",
             s);
      }
    }
  }
  return static_cast<std::int32_t>(n);
}

}  // namespace detail

/// Converts first-child / next-sibling links (N + 1 slots, slot 0 the root) to the parents layout:
/// node k of the result sits at slot `slots[k]`, its parent is `parents[k]` (-1 for a child of the
/// root), and the nodes are in level order with each node's children in their sibling order (so
/// verifiers try them in the same order). Tokens follow the slots: tokens[k] = slot tokens
/// [slots[k]]. `parents` and `slots` hold N entries; returns N. Throws specdec::Error naming
/// `first_child[s]` or `next_sibling[s]` for a link outside [1, N] or -1, a cycle or a slot with
/// two parents, `first_child` for a slot the root does not reach, `next_sibling[0]` unless -1.
/// sglang::export_tree goes back (slot i + 1 = node i). Complexity: O(N).
inline std::int32_t parents_from_sibling_lists(SiblingLists lists, std::span<std::int32_t> parents,
                                               std::span<std::int32_t> slots) {
  std::vector<std::uint8_t> seen(lists.first_child.size());
  return detail::parents_from_sibling_lists(lists, parents, slots, "first_child", "next_sibling",
                                            seen);
}

}  // namespace specdec
