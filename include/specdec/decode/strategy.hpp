// SPDX-License-Identifier: MIT
// The per-method part of a decoding step, as the Decoder sees it: a DraftStrategy drafts a tree,
// the Decoder scores it with the target in one call, and the strategy verifies the scored tree.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/sequence.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/unchecked.hpp"

namespace specdec {

/// What every method shares: how target rows are warped, when to stop, and the seed of the
/// sequence's random streams (decode/sequence.hpp).
struct LoopOptions {
  Warp warp{};  // applied to every target row before verification
  std::int32_t max_new_tokens = 32;
  Token end_token = kNoToken;  // stop after emitting it (kNoToken = never)
  std::uint64_t seed = 0;

  /// Throws specdec::Error naming the field: the warp's fields, max_new_tokens (>= 0),
  /// end_token (kNoToken or in [0, vocab)).
  void validate(std::int64_t vocab) const {
    warp.validate(vocab);
    if (max_new_tokens < 0) detail::fail("max_new_tokens", "{} must be >= 0", max_new_tokens);
    if (end_token != kNoToken && (end_token < 0 || end_token >= vocab)) {
      detail::fail("end_token", "{} is outside the vocabulary [0, {}) (kNoToken = none)", end_token,
                   vocab);
    }
  }
};

/// The step a strategy is asked to draft or verify: the sequence so far (its tokens and its
/// random streams), the vocabulary and the Decoder's scratch memory.
struct StepContext {
  const SequenceState& sequence;
  std::int64_t vocab;
  Workspace& workspace;
};

/// The target's answer for the drafted tree, row 0 for the root and row i + 1 for node i.
struct TargetScores {
  const TreeBatch& batch;
  MatrixView<const float> logits;  // as the provider returned them (checked finite or -inf)
  MatrixView<const float> rows;    // the same rows through `warp`; 0 rows when the strategy's
                                   // needs_target_rows() said false
  MatrixView<const float> hidden;  // the provider's hidden states; 0 columns unless the
                                   // strategy sets `uses_hidden_states`
  Warp warp{};                     // LoopOptions::warp, for a strategy verifying from logits
};

/// A strategy's decision for one step.
struct StepVerdict {
  std::span<const std::int32_t> accepted;  // kept tree nodes, root to leaf (may be empty)
  Token next = kNoToken;                   // the correction or bonus token after them
  std::int64_t draft_calls = 0;            // draft model calls made to build the tree
};

/// The per-method part of the decoding loop. The Decoder calls, in order:
///   prepare(vocab, workspace)   once: check the options against the target's vocabulary (throw
///                               specdec::Error naming the field) and reserve scratch memory;
///   reset(prompt)               at every new sequence (reset the draft side);
/// then every step
///   draft(context)              -> the tree to score (empty for plain sampling); it lives until
///                               the next draft call;
///   verify(context, scores)     -> the accepted path and the next token, from the target rows;
///   commit(batch, accepted, next)  after the target commits the same path.
/// A strategy may also declare `bool needs_target_rows() const`: when it returns false the
/// Decoder does not warp the target rows (TargetScores::rows has 0 rows) and the strategy
/// verifies from `logits` and `warp` (verify/chain_logits.hpp); without it every row is warped.
/// A strategy that drafts from the target's hidden states declares
/// `static constexpr bool uses_hidden_states = true`; its Decoder then needs a
/// HiddenStateProvider target and fills TargetScores::hidden. Emitting, the end token,
/// max_new_tokens, metrics, and the target's evaluate and commit belong to the Decoder.
template <class S>
concept DraftStrategy = requires(S& strategy, std::int64_t vocab, Workspace& workspace,
                                 std::span<const Token> prompt, const StepContext& context,
                                 const TargetScores& scores, const TreeBatch& batch,
                                 std::span<const std::int32_t> accepted, Token next) {
  strategy.prepare(vocab, workspace);
  strategy.reset(prompt);
  { strategy.draft(context) } -> std::convertible_to<const DraftTree&>;
  { strategy.verify(context, scores) } -> std::same_as<StepVerdict>;
  strategy.commit(batch, accepted, next);
};

/// True for a strategy that declares `uses_hidden_states = true`.
template <class S>
inline constexpr bool uses_hidden_states = requires {
  requires static_cast<bool>(S::uses_hidden_states);
};

namespace detail {

/// Whether the Decoder warps the target rows for `strategy` (its needs_target_rows(), else yes).
template <class S>
bool needs_target_rows(const S& strategy) {
  if constexpr (requires { { strategy.needs_target_rows() } -> std::convertible_to<bool>; }) {
    return static_cast<bool>(strategy.needs_target_rows());
  } else {
    return true;
  }
}

/// Warps one logits row into `out` and, when `raw` is given, its plain softmax into `raw` (the
/// row the cascade deferral and the greedy lossy test read).
inline void warp_row(const Warp& warp, std::span<const float> logits, std::span<float> out,
                     float* raw, Workspace& workspace) {
  auto scope = workspace.scope();
  const auto vocab = static_cast<std::int64_t>(logits.size());
  auto idx = workspace.take<std::int32_t>(warp_workspace_size(vocab) / sizeof(std::int32_t));
  unchecked::warp_logits<float>(warp, logits, out, idx.data());
  if (raw != nullptr) {
    unchecked::warp_logits<float>(Warp{}, logits, std::span<float>(raw, out.size()), idx.data());
  }
}

}  // namespace detail

}  // namespace specdec
