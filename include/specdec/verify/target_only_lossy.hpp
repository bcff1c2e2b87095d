// SPDX-License-Identifier: MIT
// Lossy relaxations of target-only tree verification that engines ship (docs/engines.md):
// SGLang's threshold_single / threshold_acc running-coin walk, and typical acceptance (Medusa,
// TensorRT-LLM posterior_threshold / posterior_alpha) over trees without draft rows.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/verify/target_only.hpp"

namespace specdec {

/// SGLang's relaxation of the target-only tree walk (`threshold_single`, `threshold_acc`, each in
/// [0, 1]): a child is also accepted when its target probability reaches `single`, and the
/// running coin is compared with the tried children's mass divided by `acc`. Lossy unless both
/// are 1; at (1, 1) the walk is lossless.
struct AcceptanceThresholds {
  float single = 1.0f;
  float acc = 1.0f;
};

/// The engine's own uniforms for the thresholded walk: `node_coins[row]` is the running coin at
/// the node whose children are tried (row = node id + 1, 0 the root; N + 1 entries) and
/// `final_uniform` draws the correction or bonus token.
struct SuppliedCoins {
  std::span<const float> node_coins{};
  float final_uniform = 0.5f;
};

namespace detail {

/// SGLang floors threshold_acc at 1e-9 before dividing by it.
inline constexpr float kMinThresholdAcc = 1e-9f;

inline void check_thresholds(AcceptanceThresholds t) {
  check_in_closed("threshold_single", t.single, 0.0f, 1.0f);
  check_in_closed("threshold_acc", t.acc, 0.0f, 1.0f);
}

/// Coins from a RandomStream: the running coin of row r is draw 0 of `stream.at_node(r)`, the
/// final uniform draw 1 of `stream.at_node(0)` (never a coin).
struct StreamCoins {
  RandomStream stream;
  float coin(std::size_t row) const {
    return stream.at_node(static_cast<std::uint32_t>(row)).uniform(0);
  }
  float final_uniform() const { return stream.at_node(0).uniform(1); }
};

/// Coins the caller supplies (SuppliedCoins).
struct GivenCoins {
  const float* node_coins;
  float last;
  float coin(std::size_t row) const { return node_coins[row]; }
  float final_uniform() const { return last; }
};

/// `scratch` = [target - draft]+ (draft may be nullptr: target) with the `tried` tokens removed;
/// returns a token drawn from it with `u`, or from `target` when nothing is left (only rounding
/// can empty it: a row's candidates rejected hold less than all its mass).
template <class T>
Token draw_residual(const T* target, const float* draft, std::int64_t vocab, const Token* tried,
                    std::int32_t count, float u, float* scratch) {
  if (draft == nullptr && count == 0) return sample_row(target, vocab, u);  // the row itself
  for (std::int64_t i = 0; i < vocab; ++i) {
    const float p = to_float(target[i]);
    scratch[i] = draft == nullptr ? p : positive_part(p - draft[i]);
  }
  for (std::int32_t k = 0; k < count; ++k) scratch[tried[k]] = 0.0f;
  const double mass = blocked_sum([=](std::int64_t i) { return scratch[i]; }, 0, vocab);
  return mass > 0.0 ? sample_row(scratch, vocab, u) : sample_row(target, vocab, u);
}

/// The uniforms of one node's thresholded test: its running coin and the final uniform.
struct NodeCoins {
  float coin;
  float final_uniform;
};

/// SGLang's running-coin test of one node's children, tried in order: child k is accepted when
/// p(x_k) >= t.single or coin <= (p(x_0) + ... + p(x_k)) / max(t.acc, 1e-9) (float sums, as
/// SGLang computes them), a token repeating an earlier sibling adding nothing and never accepted.
/// All rejected: the correction is drawn with `coins.final_uniform` from [p - draft]+ with the
/// children's tokens removed (draft may be nullptr). At t = (1, 1) child k is accepted with
/// probability p(x_k) and the correction is drawn from p without the children: exactly the
/// target.
template <class T>
NodeVerdict thresholded_row(const T* target, const float* draft, std::int64_t vocab,
                            const Token* candidates, std::int32_t count, AcceptanceThresholds t,
                            NodeCoins coins, float* scratch) {
  const auto [coin, final_u] = coins;
  const float acc = t.acc > kMinThresholdAcc ? t.acc : kMinThresholdAcc;
  float mass = 0.0f;
  for (std::int32_t k = 0; k < count; ++k) {
    const Token x = candidates[k];
    bool repeat = false;
    for (std::int32_t j = 0; j < k && !repeat; ++j) repeat = candidates[j] == x;
    if (repeat) continue;
    const float p = to_float(target[x]);
    mass += p;
    if (coin <= mass / acc || p >= t.single) return {k, x};
  }
  return {-1, draw_residual(target, draft, vocab, candidates, count, final_u, scratch)};
}

/// Depth of node `node` (1 for a child of the root), along its parents.
inline std::int32_t depth_along_parents(TreeView tree, std::int32_t node) {
  std::int32_t depth = 0;
  for (; node >= 0; node = tree.parents[static_cast<std::size_t>(node)]) ++depth;
  return depth;
}

/// The thresholded walk without validation. `target_at(row)` is the target row after node
/// row - 1 (row 0 the root's) and `draft_at(row)` nullptr or a float row subtracted from it where
/// a correction or bonus is drawn, except at a node `max_accepted` deep (the walk stops there, as
/// SGLang's does when accept_index is full). `tree` must hold only nodes at most `max_accepted`
/// deep. `buffers` as TreeBuffers documents.
template <class TargetAt, class DraftAt, class Coins>
TreeVerdict verify_tree_thresholded_unchecked(TreeView tree, const TargetAt& target_at,
                                              const DraftAt& draft_at, std::int64_t vocab,
                                              AcceptanceThresholds t, const Coins& coins,
                                              std::int32_t max_accepted,
                                              const TreeBuffers& buffers) {
  const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                          const RandomStream&) {
    return thresholded_row(target_at(row), draft_at(row), vocab, children, count, t,
                           NodeCoins{coins.coin(row), coins.final_uniform()}, buffers.scratch);
  };
  const auto bonus = [&](std::size_t row, const RandomStream&) {
    const auto node = static_cast<std::int32_t>(row) - 1;
    const std::int32_t depth = row == 0 ? 0 : depth_along_parents(tree, node);
    const float* draft = depth >= max_accepted ? nullptr : draft_at(row);
    return draw_residual(target_at(row), draft, vocab, buffers.candidates, 0,
                         coins.final_uniform(), buffers.scratch);
  };
  return walk_tree(tree, RandomStream{}, buffers.accepted_nodes, buffers.candidates, buffers.ids,
                   verify, bonus);
}

/// Row accessors of N + 1 contiguous rows (and of no draft rows).
template <class T>
struct ContiguousRows {
  const T* rows;
  std::size_t vocab;
  const T* operator()(std::size_t row) const { return rows + row * vocab; }
};
struct NoDraftRows {
  const float* operator()(std::size_t) const { return nullptr; }
};

}  // namespace detail

/// Walks a target-only tree with SGLang's relaxation (detail::thresholded_row): at the current
/// node its children are tried in stored order against one running coin, accepted when the coin
/// is at most their accumulated target mass / t.acc or when one's target probability reaches
/// t.single; all rejected, the correction is drawn from the target without the children; a leaf
/// ends the walk with a bonus token from its row. LOSSY unless t = (1, 1), where the output is
/// exactly the target's for any tree (repeated sibling tokens included: a repeat is never taken).
/// Rows, tree and `accepted_nodes` as verify_tree_target_only takes them. Randomness: the coin of
/// row r is draw 0 of `stream.at_node(r)`, the correction or bonus is draw 1 of
/// `stream.at_node(0)`. Throws specdec::Error naming the bad argument (thresholds outside [0, 1]).
template <class T = float>
TreeVerdict verify_tree_target_only_thresholded(
    TreeView tree, std::type_identity_t<std::span<const T>> target_rows, std::int64_t vocab,
    AcceptanceThresholds thresholds, const RandomStream& stream,
    std::span<std::int32_t> accepted_nodes, Workspace& ws) {
  detail::check_thresholds(thresholds);
  auto scope = ws.scope();
  const TreeBuffers buffers =
      detail::checked_target_only_tree<T>(ws, tree, target_rows, vocab, accepted_nodes);
  return detail::verify_tree_thresholded_unchecked(
      tree, detail::ContiguousRows<T>{target_rows.data(), static_cast<std::size_t>(vocab)},
      detail::NoDraftRows{}, vocab, thresholds, detail::StreamCoins{stream},
      INT32_MAX, buffers);
}

/// The same walk with the engine's uniforms (`coins.node_coins`: N + 1 entries in [0, 1], by row;
/// `coins.final_uniform` in [0, 1)): the tokens an engine running this rule with those uniforms
/// emits. Throws specdec::Error naming the bad argument.
template <class T = float>
TreeVerdict verify_tree_target_only_thresholded(
    TreeView tree, std::type_identity_t<std::span<const T>> target_rows, std::int64_t vocab,
    AcceptanceThresholds thresholds, SuppliedCoins coins, std::span<std::int32_t> accepted_nodes,
    Workspace& ws) {
  detail::check_thresholds(thresholds);
  const auto n = tree.tokens.size();
  detail::check_size("coins.node_coins", coins.node_coins.size(), n + 1);
  for (std::size_t r = 0; r <= n; ++r) {
    const float c = coins.node_coins[r];
    if (!(c >= 0.0f && c <= 1.0f)) {
      detail::fail(ArgName("coins.node_coins", static_cast<std::int64_t>(r)),
                   "{} is outside [0, 1]", c);
    }
  }
  detail::check_in_closed("coins.final_uniform", coins.final_uniform, 0.0f, 1.0f);
  auto scope = ws.scope();
  const TreeBuffers buffers =
      detail::checked_target_only_tree<T>(ws, tree, target_rows, vocab, accepted_nodes);
  return detail::verify_tree_thresholded_unchecked(
      tree, detail::ContiguousRows<T>{target_rows.data(), static_cast<std::size_t>(vocab)},
      detail::NoDraftRows{}, vocab, thresholds,
      detail::GivenCoins{coins.node_coins.data(), coins.final_uniform}, INT32_MAX, buffers);
}

/// Typical acceptance over a target-only tree (Medusa; TensorRT-LLM's posterior_threshold is
/// `rule.epsilon`, posterior_alpha `rule.delta`): at the current node the first child, in stored
/// order, whose target probability exceeds min(epsilon, delta * exp(-H(target))) is accepted;
/// none: the correction is drawn from the target row; a leaf: the bonus token from its row.
/// LOSSY (deterministic acceptance). The same walk and draws as verify_tree with Typical (which
/// reads no draft row): the correction is draw K of the node's stream, the bonus draw 0 of the
/// leaf's. Rows, tree and `accepted_nodes` as verify_tree_target_only takes them. Throws
/// specdec::Error naming the bad argument.
template <class T = float>
TreeVerdict verify_tree_target_only_typical(TreeView tree,
                                            std::type_identity_t<std::span<const T>> target_rows,
                                            std::int64_t vocab, Typical rule,
                                            const RandomStream& stream,
                                            std::span<std::int32_t> accepted_nodes,
                                            Workspace& ws) {
  check_typical_parameters(rule.epsilon, rule.delta);
  auto scope = ws.scope();
  const TreeBuffers buffers =
      detail::checked_target_only_tree<T>(ws, tree, target_rows, vocab, accepted_nodes, false);
  const auto v = static_cast<std::size_t>(vocab);
  const T* rows = target_rows.data();
  const auto verify = [&](std::size_t row, const Token* kids, std::int32_t count,
                          const RandomStream& s) {
    return detail::typical_row(rows + row * v, vocab, kids, count, rule.epsilon, rule.delta, s);
  };
  const auto bonus = [&](std::size_t row, const RandomStream& s) {
    return detail::sample_row(rows + row * v, vocab, s.uniform(0));
  };
  return detail::walk_tree(tree, stream, buffers.accepted_nodes, buffers.candidates, buffers.ids,
                           verify, bonus);
}

}  // namespace specdec
