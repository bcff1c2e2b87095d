// SPDX-License-Identifier: MIT
// Constrained chain verification with the draft given as probabilities (vLLM's rejection sampler
// takes `draft_probs`, the rows the drafter sampled from): the target rows are logits transformed
// by LogitConstraints (constrained_logits.hpp) and then warped, the draft rows are used as given.
// The walk is verify_chain_logits' with its `draft_probs` side, on the transformed rows made
// lazily; so the tokens equal transforming and warping every target row and calling
// verify_chain(Rejection{}) on them with the same draft rows, bit for bit. A draft token vLLM
// cannot verify (outside [0, V): its placeholder -1; or of draft probability 0) is rejected with
// certainty, as vLLM rejects it: the chain ends there with a draw from the residual [p - q]+.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/core/inverse_cdf.hpp"
#include "specdec/verify/constrained_logits.hpp"

namespace specdec::detail {

/// The first position of `tokens[0, length)` whose token is outside [0, vocab) or has draft
/// probability 0 (not > 0) in its row of `draft_probs` (`vocab` apart); `length` when none.
inline std::int64_t first_unverifiable(const Token* tokens, const float* draft_probs,
                                       std::int64_t length, std::int64_t vocab) {
  for (std::int64_t i = 0; i < length; ++i) {
    const Token x = tokens[i];
    if (x < 0 || x >= vocab || !(draft_probs[i * vocab + x] > 0.0f)) return i;
  }
  return length;
}

/// The checks of a chain with draft probabilities (its tokens are not checked: see
/// first_unverifiable): the vocabulary, the warp and the sizes.
inline void check_draft_probs_chain(const Warp& warp, std::size_t target_size,
                                    std::size_t draft_size, std::size_t length,
                                    std::int64_t vocab, std::size_t out_size) {
  if (vocab < 1) fail("vocab", "{} must be >= 1", vocab);
  warp.validate(vocab);
  const auto v = static_cast<std::size_t>(vocab);
  check_size("target_logits", target_size, checked_mul<std::size_t>("vocab", length + 1, v));
  check_size("draft_probs", draft_size, length * v);
  if (out_size < length + 1) fail("out", "has {} entries, needs L + 1 = {}", out_size, length + 1);
}

/// The chain walk with draft probabilities over `chain`'s target (transformed rows) and
/// draft_probs (its draft rows are not read): the walk runs up to the first unverifiable token c;
/// when it accepts everything before c, the token at c is drawn (draw 1 of position c's stream,
/// as a rejection's correction) from [p_c - q_c]+, or from p_c when that has no mass.
inline ChainVerdict verify_chain_draft_probs_unchecked(const Warp& warp,
                                                       const ChainLogitRows<float>& chain,
                                                       const RandomStream& stream, Token* out,
                                                       const ArgName& token_name,
                                                       const ChainLogitsScratch& scratch) {
  const LogitRows<float>& target = chain.target;
  const float* draft_probs = chain.draft_probs;
  const std::int64_t length = chain.length, vocab = chain.vocab;
  const std::int64_t cut = first_unverifiable(chain.tokens, draft_probs, length, vocab);
  ChainLogitRows<float> walk = chain;
  walk.draft = {draft_probs, vocab, "draft_probs", target.first};
  walk.length = cut;
  const ChainVerdict verdict =
      verify_chain_logits_unchecked<float>(warp, walk, stream, out, token_name, scratch);
  if (cut == length || verdict.accepted < cut) return verdict;
  // Every token before c passed: out[c] is the rejection's correction at row c.
  write_warp_of_row(warp, target, cut, vocab, scratch.warp, scratch.target_row);
  const double mass = residual_update(scratch.target_row, draft_probs + cut * vocab, 1.0f, vocab,
                                      scratch.residual, kResidualFloor);
  const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(cut));
  out[cut] = sample_row(mass < 0.0 ? scratch.target_row : scratch.residual, vocab, s.uniform(1));
  return verdict;
}

}  // namespace specdec::detail

namespace specdec::constrained {

/// verify_chain_logits with the draft side given as probabilities: target_logits
/// holds L + 1 rows of `vocab` logits, transformed by `constraints` (row i's draft prefix:
/// draft_tokens[0, i)) and warped by `warp`; draft_probs holds L rows of `vocab` probabilities
/// (the rows the tokens were drawn from), used as given. The tokens, draws and verdict equal
/// transforming and warping every target row and calling verify_chain(Rejection{}, ...) with
/// draft_probs. A draft token outside [0, vocab) or of draft probability 0 is rejected with
/// certainty (vLLM's rule for its placeholders): the token there is drawn from the residual.
/// Workspace: verify_chain_logits_workspace_size(vocab, L) bytes. Throws
/// specdec::Error naming the bad argument: vocab, a field of the warp, target_logits (its size,
/// or row i when reached and invalid), draft_probs (its size), out, and the constraints' names as
/// verify_chain_logits.
inline ChainVerdict verify_chain_draft_probs(
    const Warp& warp, std::span<const float> target_logits, std::span<const float> draft_probs,
    std::span<const Token> draft_tokens, std::int64_t vocab, const LogitConstraints& constraints,
    const RandomStream& stream, std::span<Token> out, Workspace& ws) {
  detail::check_draft_probs_chain(warp, target_logits.size(), draft_probs.size(),
                                  draft_tokens.size(), vocab, out.size());
  return detail::with_constrained_chain(
      constraints, target_logits, draft_tokens, vocab, ws,
      [&](const detail::LogitRows<float>& rows, const detail::ChainLogitsScratch& scratch) {
        return detail::verify_chain_draft_probs_unchecked(warp,
                                                          {.target = rows,
                                                           .tokens = draft_tokens.data(),
                                                           .length = std::ssize(draft_tokens),
                                                           .vocab = vocab,
                                                           .draft_probs = draft_probs.data()},
                                                          stream, out.data(), "draft_tokens",
                                                          scratch);
      });
}

}  // namespace specdec::constrained
