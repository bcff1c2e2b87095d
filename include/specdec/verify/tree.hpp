// SPDX-License-Identifier: MIT
// Tree verification (RSD, seed 000 §3.2.2; docs/algorithms.md §2.2): walk a level-ordered draft
// tree from the root with a node rule, returning the accepted node ids and the final token.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_view.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/walk_inputs.hpp"

namespace specdec {

struct TreeVerdict {
  std::int32_t accepted = 0;  // accepted nodes, written to `accepted_nodes[0 .. accepted)`
  Token token = kNoToken;     // the correction token, or the bonus token after a leaf
  bool bonus = false;         // true when the walk ended at an accepted node without children
};

namespace detail {

/// The first node (by id) whose token repeats an earlier sibling's, and that sibling; {-1, -1}
/// when siblings are distinct. `lists` and `ends` are scratch of N + 1 entries each.
/// Complexity: O(N log N): the children are grouped by parent in place (CSR), and each sibling
/// list is sorted by token once, so a chain costs O(N) rather than a scan of every earlier node.
inline std::pair<std::int32_t, std::int32_t> first_repeated_sibling(TreeView tree,
                                                                    std::int32_t* lists,
                                                                    std::int32_t* ends) {
  const auto n = tree.tokens.size();
  const auto& tokens = tree.tokens;
  const auto& parents = tree.parents;
  // Children of parent p form group p + 1: count them, turn counts into starts, then place each
  // node, which leaves ends[g] at the group's end and the groups in increasing node id.
  std::fill(ends, ends + n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) ++ends[static_cast<std::size_t>(parents[i] + 1)];
  std::int32_t start = 0;
  for (std::size_t g = 0; g <= n; ++g) {
    const auto count = ends[g];
    ends[g] = start;
    start += count;
  }
  for (std::size_t i = 0; i < n; ++i) {
    lists[ends[static_cast<std::size_t>(parents[i] + 1)]++] = static_cast<std::int32_t>(i);
  }
  std::pair<std::int32_t, std::int32_t> first{-1, -1};
  for (std::size_t g = 0; g <= n; ++g) {
    std::int32_t* begin = lists + (g == 0 ? 0 : ends[g - 1]);
    std::int32_t* end = lists + ends[g];
    // By token, then id: a run of equal tokens starts with its earliest node, and its second
    // node is the first to repeat it.
    std::sort(begin, end, [&](std::int32_t a, std::int32_t b) {
      const auto ta = tokens[static_cast<std::size_t>(a)];
      const auto tb = tokens[static_cast<std::size_t>(b)];
      return ta != tb ? ta < tb : a < b;
    });
    for (std::int32_t* x = begin; x + 1 < end; ++x) {
      if (tokens[static_cast<std::size_t>(x[0])] == tokens[static_cast<std::size_t>(x[1])] &&
          (x == begin ||
           tokens[static_cast<std::size_t>(x[-1])] != tokens[static_cast<std::size_t>(x[0])]) &&
          (first.first < 0 || x[1] < first.first)) {
        first = {x[1], x[0]};
      }
    }
  }
  return first;
}

/// The checks of a tree every tree verifier makes: vocab >= 1, as many parents as tokens, tokens
/// in the vocabulary, parents -1 or earlier nodes in level order, and room in `accepted_nodes`
/// (`accepted_size` entries) for the tree's depth. Leaves children[r] = the children of row r
/// (node r - 1; row 0 the root) and depth[i + 1] = the depth of node i; both hold N + 1 entries.
/// Returns (N + 1) * vocab, the entries of each row array.
inline std::size_t check_tree_structure(TreeView tree, std::int64_t vocab,
                                        std::size_t accepted_size, std::int32_t* depth,
                                        std::int32_t* children) {
  if (vocab < 1) detail::fail("vocab", "{} must be >= 1", vocab);
  const auto& tokens = tree.tokens;
  const auto& parents = tree.parents;
  const auto n = tokens.size();
  detail::check_size("parents", parents.size(), n);
  const auto rows_size =
      detail::checked_mul<std::size_t>("vocab", n + 1, static_cast<std::size_t>(vocab));
  depth[0] = 0;  // depth[i + 1] of node i; depth[0] = 0 (root)
  std::fill(children, children + n + 1, 0);
  std::int32_t max_depth = 0;
  for (std::size_t i = 0; i < n; ++i) {
    detail::check_token(ArgName("tokens", i), tokens[i], vocab);
    const auto parent = parents[i];
    detail::check_parent(ArgName("parents", i), parent, static_cast<std::int64_t>(i));
    depth[i + 1] = depth[static_cast<std::size_t>(parent + 1)] + 1;
    if (i > 0 && depth[i + 1] < depth[i]) {
      detail::fail(fmt::format("parents[{}]", i), "node {} is not in level order", i);
    }
    max_depth = std::max(max_depth, depth[i + 1]);
    ++children[static_cast<std::size_t>(parent + 1)];
  }
  if (accepted_size < static_cast<std::size_t>(max_depth)) {
    detail::fail("accepted_nodes", "has {} entries, the tree is {} deep", accepted_size, max_depth);
  }
  return rows_size;
}

/// The checks verify_tree makes on `rows` (N + 1 rows each). `depth` and `children` are scratch
/// of N + 1 entries each.
template <class T>
void check_tree_inputs(const Rule& rule, TreeView tree, const RowSpans<T>& rows,
                       std::int64_t vocab, std::size_t accepted_size, std::int32_t* depth,
                       std::int32_t* children) {
  const auto& tokens = tree.tokens;
  const auto& parents = tree.parents;
  const auto n = tokens.size();
  const auto v = static_cast<std::size_t>(vocab);
  const std::span<const T> target_rows = rows.target, draft_rows = rows.draft;
  const std::span<const T> raw_target_rows = rows.raw_target, raw_draft_rows = rows.raw_draft;
  const auto rows_size = check_tree_structure(tree, vocab, accepted_size, depth, children);
  detail::check_size("target_rows", target_rows.size(), rows_size);
  detail::check_size("draft_rows", draft_rows.size(), rows_size);
  if (!raw_target_rows.empty())
    detail::check_size("raw_target_rows", raw_target_rows.size(), rows_size);
  if (!raw_draft_rows.empty())
    detail::check_size("raw_draft_rows", raw_draft_rows.size(), rows_size);
  const bool needs_support = !std::holds_alternative<Typical>(rule) &&
                             !std::holds_alternative<Greedy>(rule) &&
                             !(std::holds_alternative<Lossy>(rule) && std::get<Lossy>(rule).greedy);
  for (std::size_t r = 0; r <= n; ++r) {
    check_probability_row<T>(ArgName("target_rows", r), target_rows.subspan(r * v, v));
    check_probability_row<T>(ArgName("draft_rows", r), draft_rows.subspan(r * v, v));
    if (!raw_target_rows.empty()) {
      check_probability_row<T>(ArgName("raw_target_rows", r), raw_target_rows.subspan(r * v, v));
    }
    if (!raw_draft_rows.empty()) {
      check_probability_row<T>(ArgName("raw_draft_rows", r), raw_draft_rows.subspan(r * v, v));
    }
    if (children[r] > max_candidates(rule, vocab)) {
      detail::fail(r == 0 ? std::string("parents") : fmt::format("tokens[{}]", r - 1),
                   "node has {} children, the rule takes at most {}", children[r],
                   max_candidates(rule, vocab));
    }
    if (children[r] > 0) {
      detail::check_rule<T>(rule, target_rows.subspan(r * v, v), draft_rows.subspan(r * v, v),
                            children[r]);
    }
  }
  // depth and children are free again: they hold the sibling lists.
  const auto repeat = std::holds_alternative<Recursive>(rule)
                          ? first_repeated_sibling(tree, depth, children)
                          : std::pair<std::int32_t, std::int32_t>{-1, -1};
  for (std::size_t i = 0; i < n; ++i) {
    const auto row = static_cast<std::size_t>(parents[i] + 1);
    const ArgName name("tokens", static_cast<std::int64_t>(i));
    if (needs_support &&
        !(static_cast<float>(draft_rows[row * v + static_cast<std::size_t>(tokens[i])]) > 0.0f)) {
      detail::fail(name, "token {} has draft probability 0 in its parent's draft row", tokens[i]);
    }
    if (static_cast<std::int64_t>(i) == repeat.first) {
      detail::fail(name, "token {} repeats its sibling node {} (RRS children are distinct)",
                   tokens[i], repeat.second);
    }
  }
}

/// The walk every tree verifier shares, over a tree in level order: at the current node (the root
/// first) verify(row, candidates, count, s) tries its children (row = node id + 1, s =
/// `stream.at_node(row)`); the accepted child becomes the current node and is appended to
/// `accepted_nodes`; all rejected ends the walk with the correction token; a node without children
/// ends it with bonus(row, s). `candidates` and `ids` hold N + 1 entries.
/// Complexity: O(N) to find the children along the walk (each level is scanned once), plus the
/// verifier's work at each visited node.
template <class Verify, class Bonus>
TreeVerdict walk_tree(TreeView tree, const RandomStream& stream, std::int32_t* accepted_nodes,
                      Token* candidates, std::int32_t* ids, const Verify& verify,
                      const Bonus& bonus) {
  const Token* tokens = tree.tokens.data();
  const std::int32_t* parents = tree.parents.data();
  const auto n = tree.tokens.size();
  TreeVerdict verdict;
  std::int32_t current = -1;
  // Level order puts the children of the current node's level in [level, next_level): the nodes
  // from `level` on whose parent lies before `level`. The walk goes one level down per step, so
  // it scans every node at most once.
  std::size_t level = 0;
  for (;;) {
    std::int32_t count = 0;
    std::size_t next_level = level;
    for (; next_level < n && static_cast<std::size_t>(parents[next_level] + 1) <= level;
         ++next_level) {
      if (parents[next_level] == current) {
        ids[static_cast<std::size_t>(count)] = static_cast<std::int32_t>(next_level);
        candidates[static_cast<std::size_t>(count)] = tokens[next_level];
        ++count;
      }
    }
    level = next_level;
    const auto row = static_cast<std::size_t>(current + 1);
    const auto s = stream.at_node(static_cast<std::uint32_t>(current + 1));
    if (count == 0) {
      verdict.token = bonus(row, s);
      verdict.bonus = true;
      return verdict;
    }
    const NodeVerdict node = verify(row, candidates, count, s);
    if (node.accepted < 0) {
      verdict.token = node.token;
      return verdict;
    }
    current = ids[static_cast<std::size_t>(node.accepted)];
    accepted_nodes[static_cast<std::size_t>(verdict.accepted++)] = current;
  }
}

/// verify_tree's walk without validation (same draws) of a tree in level order: `rows` of N + 1
/// rows each (raw rows may be nullptr), `buffers` as TreeBuffers documents.
template <class T>
TreeVerdict verify_tree_unchecked(const Rule& rule, TreeView tree, const TreeRows<T>& rows,
                                  const RandomStream& stream, const TreeBuffers& buffers) {
  const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                          const RandomStream& s) {
    return detail::verify_node_unchecked(rule, node_rows(rows, row), children, count, s,
                                         buffers.scratch);
  };
  const auto bonus = [&](std::size_t row, const RandomStream& s) {
    return bonus_token(rule, node_rows(rows, row).target, rows.vocab, s);
  };
  return walk_tree(tree, stream, buffers.accepted_nodes, buffers.candidates, buffers.ids, verify,
                   bonus);
}

}  // namespace detail

/// Walks the tree `tree` (tokens and parents in level order; parents[i] = -1 for children of the
/// root, else an earlier node; children keep their sampling order) with `rule` at every node. Row
/// layout (warped rows, `vocab` wide, N = number of nodes):
///   target_rows: N + 1 rows; row 0 = the target at the root, row i + 1 = the target after node i;
///   draft_rows:  N + 1 rows; row 0 = the draft row the root's children were drawn from,
///                row i + 1 = the draft row node i's children were drawn from (rows of leaves
///                are never read, but must be present; fill them with any distribution).
///   raw_target_rows / raw_draft_rows: same shapes, or empty (= the warped rows).
/// `rows` holds the four (RowSpans; errors name them as above); the form below takes the warped
/// rows alone.
/// At the current node (the root first) its children, in stored order, are the candidates of the
/// rule (Recursive for RSD trees drawn without replacement; MultiRound or SpecTr for i.i.d.
/// trees; Rejection, Lossy and Cascade need one child per node). The accepted child becomes the
/// current node (fix (a) of docs/algorithms.md §1.3: children are iterated by node id and their
/// tokens read from `tokens`); its flat id is appended to `accepted_nodes` (fix (b)); all rejected
/// ends the walk with the correction token; a node without children ends it with a bonus token
/// drawn from the target row at that node (fix (c); its argmax for Greedy). Randomness: the node
/// whose children are verified uses `stream.at_node(id + 1)` (the root is node 0) with the rule's
/// draws (test of child k = draw k, correction = draw K); the bonus token is draw 0 of
/// `stream.at_node(leaf id + 1)`.
/// `accepted_nodes` needs room for the tree's depth. Throws specdec::Error naming the bad argument.
template <class T = float>
TreeVerdict verify_tree(const Rule& rule, TreeView tree, const RowSpans<T>& rows,
                        std::int64_t vocab, const RandomStream& stream,
                        std::span<std::int32_t> accepted_nodes, Workspace& ws) {
  auto scope = ws.scope();
  const TreeBuffers buffers = detail::checked_tree_buffers(
      ws, tree, accepted_nodes, static_cast<std::size_t>(vocab),
      [&](std::int32_t* depth, std::int32_t* children) {
        detail::check_tree_inputs<T>(rule, tree, rows, vocab, accepted_nodes.size(), depth,
                                     children);
      });
  return detail::verify_tree_unchecked<T>(
      rule, tree,
      TreeRows<T>{rows.target.data(), rows.draft.data(), vocab,
                  rows.raw_target.empty() ? nullptr : rows.raw_target.data(),
                  rows.raw_draft.empty() ? nullptr : rows.raw_draft.data()},
      stream, buffers);
}

/// verify_tree without raw rows (the warped rows serve the rules that read them).
template <class T = float>
TreeVerdict verify_tree(const Rule& rule, TreeView tree,
                        std::type_identity_t<std::span<const T>> target_rows,
                        std::type_identity_t<std::span<const T>> draft_rows, std::int64_t vocab,
                        const RandomStream& stream, std::span<std::int32_t> accepted_nodes,
                        Workspace& ws) {
  return verify_tree<T>(rule, tree, RowSpans<T>{.target = target_rows, .draft = draft_rows}, vocab,
                        stream, accepted_nodes, ws);
}

}  // namespace specdec
