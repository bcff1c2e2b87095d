// SPDX-License-Identifier: MIT
// Tree verification straight from logits, for every rule and for trees without draft rows: the
// same walk, draws and tokens as warping every row and calling verify_tree (verify_tree_target_only),
// with each visited node's rows reduced to their statistics (core/warp/logit_stats.hpp). A rule whose
// first test reads only p and q at the first child (Rejection, MultiRound, Recursive; the
// target-only rule reads p alone) accepts it without writing a row, most often on a rough pass of
// the rows (accepted_on_rough_bounds); otherwise the node's rows are
// written into scratch and the rule's row kernel decides on them. The bonus token is drawn from
// the leaf's logits without writing its row where the warp allows (chain_logits.hpp). Rows of
// nodes the walk does not visit are never read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/target_only.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec::detail {

/// Scratch of a tree walk from logits: the chain's and two rows more for the unwarped rows the
/// cascade deferral and the greedy lossy test read.
inline std::size_t tree_logits_scratch_size(std::int64_t vocab) {
  return chain_logits_scratch_size(vocab) +
         2 * Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
}

struct TreeLogitsScratch {
  ChainLogitsScratch rows;
  float* raw_target;  // vocab floats each
  float* raw_draft;
};

/// The tree scratch laid out in `base` (tree_logits_scratch_size(vocab) bytes).
inline TreeLogitsScratch tree_logits_scratch(std::byte* base, std::int64_t vocab) {
  const auto row = Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
  std::byte* raw = base + chain_logits_scratch_size(vocab);
  return {chain_logits_scratch(base, vocab), reinterpret_cast<float*>(raw),
          reinterpret_cast<float*>(raw + row)};
}

/// The logits of a tree walk: N + 1 target and draft rows; `draft_probs`, when given, holds row
/// r's warped draft row at draft_probs[r] (nullptr for a row never read: a leaf's) and `draft` is
/// not read.
template <class T>
struct TreeLogitRows {
  LogitRows<T> target;
  LogitRows<T> draft;
  const float* const* draft_probs = nullptr;
  std::int64_t vocab = 0;
};

/// Whether the rule tests its first candidate by u_0 * q(x) < p(x) alone (either residual walk,
/// with mass 1): that candidate is then accepted without writing a row.
inline bool first_test_reads_entries(const Rule& rule) {
  return std::holds_alternative<Rejection>(rule) || std::holds_alternative<MultiRound>(rule) ||
         std::holds_alternative<Recursive>(rule);
}

/// Whether the rule reads the unwarped rows (the cascade deferral, the greedy lossy test).
inline bool reads_raw_rows(const Rule& rule) {
  return std::holds_alternative<Cascade>(rule) ||
         (std::holds_alternative<Lossy>(rule) && std::get<Lossy>(rule).greedy);
}

/// Whether the rule needs each candidate to have positive draft probability.
inline bool needs_draft_support(const Rule& rule) {
  return !std::holds_alternative<Typical>(rule) && !std::holds_alternative<Greedy>(rule) &&
         !(std::holds_alternative<Lossy>(rule) && std::get<Lossy>(rule).greedy);
}

/// verify_tree's walk from logits (same draws and tokens) of a tree already checked
/// (check_tree_logits). Rows as verify_tree lays them out (row 0 = the root, row i + 1 = after
/// node i), of logits, as TreeLogitRows documents (`draft_probs` needs a rule that reads no
/// unwarped rows); `buffers` as TreeBuffers documents (its float scratch unused). A child of draft
/// probability 0 is reported as tokens[id] when its node's statistics are computed exactly (a
/// first child accepted on the rough pass has a positive draft probability), a bad row by its
/// name and index.
template <class T>
TreeVerdict verify_tree_logits_unchecked(const Rule& rule, const Warp& w, TreeView tree,
                                         const TreeLogitRows<T>& logits,
                                         const RandomStream& stream, const TreeBuffers& buffers,
                                         const TreeLogitsScratch& scratch) {
  const LogitRows<T>& target = logits.target;
  const LogitRows<T>& draft = logits.draft;
  const float* const* draft_probs = logits.draft_probs;
  const std::int64_t vocab = logits.vocab;
  const ChainLogitsScratch& rows = scratch.rows;
  const bool raw = reads_raw_rows(rule);
  const bool rough = first_test_reads_entries(rule) && roughly_bounded(w, vocab);
  const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                          const RandomStream& s) -> NodeVerdict {
    const auto r = static_cast<std::int64_t>(row);
    const float* q_row = draft_probs == nullptr ? nullptr : draft_probs[row];
    // The first child, on a rough pass of the rows where that settles it (as a chain's tokens).
    if (rough &&
        accepted_on_rough_bounds(w, target, draft, {q_row, r, children[0], s.uniform(0)}, vocab,
                                 rows)) {
      return {0, children[0]};
    }
    const WarpStats t = checked_warp_stats(w, target, r, vocab, rows.warp);
    WarpStats d{};
    if (q_row == nullptr) d = checked_warp_stats(w, draft, r, vocab, rows.warp);
    const auto q_at = [&](Token x) {
      return q_row != nullptr ? q_row[x] : warped_probability(d, to_float(draft.row(r)[x]), x);
    };
    if (needs_draft_support(rule)) {
      for (std::int32_t k = 0; k < count; ++k) {
        if (!(q_at(children[k]) > 0.0f)) {
          fail(ArgName("tokens", buffers.ids[k]),
               "token {} has draft probability 0 in its parent's draft row", children[k]);
        }
      }
    }
    const Token x = children[0];
    if (first_test_reads_entries(rule) &&
        accepts(s.uniform(0), q_at(x), 1.0f,
                warped_probability(t, to_float(target.row(r)[x]), x))) {
      return {0, x};
    }
    write_warped_row(t, target.row(r), vocab, rows.target_row);
    if (q_row == nullptr) {
      write_warped_row(d, draft.row(r), vocab, rows.draft_row);
      q_row = rows.draft_row;
    }
    if (raw) {
      write_warp_of_row(Warp{}, target, r, vocab, rows.warp, scratch.raw_target);
      write_warp_of_row(Warp{}, draft, r, vocab, rows.warp, scratch.raw_draft);
    }
    const auto v = static_cast<std::size_t>(vocab);
    check_rule<float>(rule, std::span<const float>(rows.target_row, v),
                      std::span<const float>(q_row, v), count);
    const NodeRows<float> node{rows.target_row, q_row, vocab, raw ? scratch.raw_target : nullptr,
                               raw ? scratch.raw_draft : nullptr};
    return verify_node_unchecked(rule, node, children, count, s, rows.residual);
  };
  const auto bonus = [&](std::size_t row, const RandomStream& s) {
    const auto r = static_cast<std::int64_t>(row);
    if (corrects_by_argmax(rule)) {  // Greedy, Lossy{greedy}: the bonus is the argmax too
      write_warp_of_row(w, target, r, vocab, rows.warp, rows.target_row);
      return bonus_token(rule, rows.target_row, vocab, s);
    }
    return sample_warped_logits(w, target, r, vocab, s.uniform(0), rows);
  };
  return walk_tree(tree, stream, buffers.accepted_nodes, buffers.candidates, buffers.ids, verify,
                   bonus);
}

/// verify_tree_target_only's walk from logits (same draws and tokens): the first child is tried
/// on p(x) alone; any other test writes the node's target row.
template <class T>
TreeVerdict verify_tree_target_only_logits_unchecked(const Warp& w, TreeView tree,
                                                     const LogitRows<T>& target,
                                                     std::int64_t vocab, const RandomStream& stream,
                                                     const TreeBuffers& buffers,
                                                     const ChainLogitsScratch& scratch) {
  const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                          const RandomStream& s) -> NodeVerdict {
    const auto r = static_cast<std::int64_t>(row);
    const Token x = children[0];
    if (roughly_bounded(w, vocab)) {
      // The first child on a rough pass of the row, where that settles target_only_row's test.
      float logit = 0.0f;
      const RoughRow rough =
          target.rough(w, r, x, vocab, warp_scratch(scratch.warp, vocab).tiles, logit);
      if (!rough.invalid) {
        const ProbabilityBounds p = warped_probability_bounds(rough, w.top_p, logit);
        if (p.lo > 0.0f && accepts(s.uniform(0), 1.0f, 1.0f, p.lo)) return {0, x};
      }
    }
    const WarpStats t = checked_warp_stats(w, target, r, vocab, scratch.warp);
    // target_only_row's first test (mass 1).
    if (accepts(s.uniform(0), 1.0f, 1.0f, warped_probability(t, to_float(target.row(r)[x]), x))) {
      return {0, x};
    }
    write_warped_row(t, target.row(r), vocab, scratch.target_row);
    return target_only_row(scratch.target_row, vocab, children, count, s, scratch.residual);
  };
  const auto bonus = [&](std::size_t row, const RandomStream& s) {
    return sample_warped_logits(w, target, static_cast<std::int64_t>(row), vocab, s.uniform(0),
                                scratch);
  };
  return walk_tree(tree, stream, buffers.accepted_nodes, buffers.candidates, buffers.ids, verify,
                   bonus);
}

/// The checks of a tree verified from logits: the warp, the tree (check_tree_structure), the
/// sizes of the logit arrays (`draft_logits` only when `rule` is given), at most the rule's
/// candidates per node and, for Recursive, distinct siblings. `depth` and `children` are scratch
/// of N + 1 entries each.
template <class T>
void check_tree_logits(const Rule* rule, const Warp& warp, TreeView tree,
                       const RowSpans<T>& logits, std::int64_t vocab,
                       std::size_t accepted_size, std::int32_t* depth, std::int32_t* children) {
  if (vocab < 1) fail("vocab", "{} must be >= 1", vocab);
  warp.validate(vocab);
  const auto rows_size = check_tree_structure(tree, vocab, accepted_size, depth, children);
  check_size("target_logits", logits.target.size(), rows_size);
  if (rule == nullptr) return;
  check_size("draft_logits", logits.draft.size(), rows_size);
  const auto n = tree.tokens.size();
  for (std::size_t r = 0; r <= n; ++r) {
    if (children[r] > max_candidates(*rule, vocab)) {
      fail(r == 0 ? std::string("parents") : fmt::format("tokens[{}]", r - 1),
           "node has {} children, the rule takes at most {}", children[r],
           max_candidates(*rule, vocab));
    }
  }
  if (!std::holds_alternative<Recursive>(*rule)) return;
  // depth and children are free again: they hold the sibling lists.
  const auto repeat = first_repeated_sibling(tree, depth, children);
  if (repeat.first >= 0) {
    fail(ArgName("tokens", repeat.first),
         "token {} repeats its sibling node {} (RRS children are distinct)",
         tree.tokens[static_cast<std::size_t>(repeat.first)], repeat.second);
  }
}

/// The checked preamble of the tree entries from logits (checked_tree_buffers with
/// check_tree_logits); the caller takes the logits scratch after it.
template <class T>
TreeBuffers checked_tree_logits(Workspace& ws, const Rule* rule, const Warp& warp, TreeView tree,
                                const RowSpans<T>& logits, std::int64_t vocab,
                                std::span<std::int32_t> accepted_nodes) {
  return checked_tree_buffers(ws, tree, accepted_nodes, 0,
                              [&](std::int32_t* depth, std::int32_t* children) {
                                check_tree_logits<T>(rule, warp, tree, logits, vocab,
                                                     accepted_nodes.size(), depth, children);
                              });
}

}  // namespace specdec::detail

namespace specdec {

/// Bytes of Workspace verify_tree_logits and verify_tree_target_only_logits take for a tree of
/// `nodes` nodes over rows of `vocab`.
inline std::size_t verify_tree_logits_workspace_size(std::size_t nodes, std::int64_t vocab) {
  return detail::tree_logits_scratch_size(std::max<std::int64_t>(vocab, 1)) +
         4 * Workspace::round_up((nodes + 1) * sizeof(std::int32_t));
}

/// verify_tree on the rows `warp` makes of logits, without writing them: the same walk, draws,
/// verdict and tokens as warping every row (warp_logits) and calling verify_tree, for every rule.
/// `tree` and `accepted_nodes` as verify_tree takes them; `logits.target` and `logits.draft`
/// (target_logits and draft_logits in errors; no raw rows) hold N + 1 rows of `vocab` logits laid
/// out as verify_tree's rows (row 0 = the root, row i + 1 = after node i; the draft rows of leaves
/// are never read but must be present). At each node the
/// walk visits, p and q are computed at its children; Rejection, MultiRound and Recursive accept
/// a first child on those alone, and any other outcome writes the node's two rows (and, for the
/// cascade deferral and the greedy lossy test, their unwarped softmax) for the rule's kernel. The
/// bonus token is drawn from the leaf's logits. T = float, or Eigen::half / Eigen::bfloat16 with
/// <Eigen/Core> included. Throws specdec::Error naming the bad argument (vocab, a field of the
/// warp, tokens[i], parents[i], target_logits, draft_logits, accepted_nodes, a rule parameter);
/// rows are checked as the walk reaches them, rule parameters at the nodes whose rows are
/// written.
template <class T = float>
TreeVerdict verify_tree_logits(const Rule& rule, const Warp& warp, TreeView tree,
                               const RowSpans<T>& logits, std::int64_t vocab,
                               const RandomStream& stream, std::span<std::int32_t> accepted_nodes,
                               Workspace& ws) {
  auto scope = ws.scope();
  const TreeBuffers buffers =
      detail::checked_tree_logits<T>(ws, &rule, warp, tree, logits, vocab, accepted_nodes);
  auto bytes = ws.take<std::byte>(detail::tree_logits_scratch_size(vocab));
  const detail::TreeLogitRows<T> rows{.target = {logits.target.data(), vocab, "target_logits", 0},
                                      .draft = {logits.draft.data(), vocab, "draft_logits", 0},
                                      .vocab = vocab};
  return detail::verify_tree_logits_unchecked<T>(rule, warp, tree, rows, stream, buffers,
                                                 detail::tree_logits_scratch(bytes.data(), vocab));
}

/// verify_tree_target_only on the rows `warp` makes of logits: the same walk, draws and tokens
/// as warping every row and calling verify_tree_target_only. `target_logits` holds N + 1 rows of
/// `vocab` (row 0 = the root, row i + 1 = after node i). A first child is accepted on its p(x)
/// alone; a rejection writes the node's target row; the bonus token is drawn from the leaf's
/// logits. Throws specdec::Error naming the bad argument (vocab, a field of the warp, tokens[i],
/// parents[i], target_logits, accepted_nodes); rows are checked as the walk reaches them.
template <class T = float>
TreeVerdict verify_tree_target_only_logits(const Warp& warp, TreeView tree,
                                           std::type_identity_t<std::span<const T>> target_logits,
                                           std::int64_t vocab, const RandomStream& stream,
                                           std::span<std::int32_t> accepted_nodes, Workspace& ws) {
  auto scope = ws.scope();
  const TreeBuffers buffers = detail::checked_tree_logits<T>(
      ws, nullptr, warp, tree, {.target = target_logits}, vocab, accepted_nodes);
  auto bytes = ws.take<std::byte>(detail::chain_logits_scratch_size(vocab));
  return detail::verify_tree_target_only_logits_unchecked<T>(
      warp, tree, detail::LogitRows<T>{target_logits.data(), vocab, "target_logits", 0}, vocab,
      stream, buffers, detail::chain_logits_scratch(bytes.data(), vocab));
}

}  // namespace specdec
