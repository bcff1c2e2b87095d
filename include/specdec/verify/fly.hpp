// SPDX-License-Identifier: MIT
// FLy, loosely speculative decoding (vLLM's "fly" rejection method): a draft token the target
// would reject is kept anyway when the target is uncertain there (entropy above a threshold) and
// the next `window` drafts pass the target's own test, i.e. the draft has "caught up" with the
// target. Lossy: it trades the target's law at such positions for longer accepted runs.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "specdec/verify/chain.hpp"
#include "specdec/verify/rejection.hpp"
#include "specdec/verify/target_only.hpp"

namespace specdec {

/// FLy's two knobs (vLLM's fly_window_size and fly_entropy_threshold). A mismatch is kept when
/// the `window` drafts after it all pass natively (and exist) and the warped target row's entropy
/// in nats exceeds `entropy_threshold`. A threshold of +infinity keeps nothing: the rule is then
/// the lossless one, token for token.
struct FlyParams {
  std::int32_t window = 1;
  float entropy_threshold = 0.0f;
};

namespace detail {

inline void check_fly(FlyParams params) {
  if (params.window < 0) fail("fly_window_size", "{} is negative", params.window);
  if (!(params.entropy_threshold >= 0.0f)) {
    fail("fly_entropy_threshold", "{} must be >= 0 (nats; +inf keeps no mismatch)",
         params.entropy_threshold);
  }
}

/// The lossless test of draft token x at a position (draw 0 of its stream): u * q(x) < p(x),
/// with q(x) = 1 for drafts without rows (the target-only rule). The same test rejection_row and
/// target_only_row make, so a kept-or-rejected position spends the draws they do.
template <class T>
bool fly_native(const T* target, const T* draft, Token x, const RandomStream& s) {
  return accepts(s.uniform(0), draft == nullptr ? 1.0f : to_float(draft[x]), 1.0f,
                 to_float(target[x]));
}

/// verify_chain_fly without validation on `rows` (rows.draft nullptr: drafts without rows; raw
/// rows unused): `out` length + 1 tokens, `scratch` vocab floats. check(i) runs before row i is
/// read.
template <class T, class Check = NoRowChecks>
ChainVerdict verify_chain_fly_unchecked(const specdec::ChainRows<T>& rows, FlyParams params,
                                        const RandomStream& stream, Token* out, float* scratch,
                                        const Check& check = {}) {
  const T* target_rows = rows.target;
  const T* draft_rows = rows.draft;
  const Token* draft_tokens = rows.draft_tokens;
  const std::size_t length = rows.length;
  const std::int64_t vocab = rows.vocab;
  const auto v = static_cast<std::size_t>(vocab);
  const auto at = [&](std::size_t i) {
    return stream.at_position(stream.position + static_cast<std::uint32_t>(i));
  };
  const auto draft_row = [&](std::size_t i) {
    return draft_rows == nullptr ? nullptr : draft_rows + i * v;
  };
  const auto native = [&](std::size_t i) {
    check(i);
    return fly_native(target_rows + i * v, draft_row(i), draft_tokens[i], at(i));
  };
  const auto window = static_cast<std::size_t>(params.window);
  for (std::size_t i = 0; i < length; ++i) {
    const T* target = target_rows + i * v;
    const Token x = draft_tokens[i];
    bool keep = native(i);
    if (!keep && to_float(target[x]) > 0.0f && i + window < length &&
        row_entropy(target, vocab) > params.entropy_threshold) {
      keep = true;
      for (std::size_t j = i + 1; j <= i + window && keep; ++j) keep = native(j);
    }
    if (keep) {
      out[i] = x;
      continue;
    }
    // The native row rejects again on the same draw 0 and draws the correction with draw 1.
    out[i] = draft_rows == nullptr
                 ? target_only_row(target, vocab, &draft_tokens[i], 1, at(i), scratch).token
                 : rejection_row(target, draft_row(i), vocab, x, at(i), scratch).token;
    return {static_cast<std::int32_t>(i), static_cast<std::int32_t>(i) + 1};
  }
  check(length);
  out[length] = sample_row(target_rows + length * v, vocab, at(length).uniform(0));
  return {static_cast<std::int32_t>(length), static_cast<std::int32_t>(length) + 1};
}

}  // namespace detail

/// FLy on a chain of L draft tokens: L + 1 warped target rows and, for drafts sampled from a
/// draft model, L warped draft rows (empty: drafts without rows, tested with the target-only
/// rule). Position i passes natively when the lossless test accepts it (u_i * q(x_i) < p_i(x_i),
/// q = 1 without rows). A position that fails is still kept when p_i(x_i) > 0 (never a token
/// the target forbids), H(p_i) > params.entropy_threshold, and positions i + 1 .. i + window
/// exist and pass natively; otherwise the walk stops there with the lossless correction (the
/// residual [p - q]+, or p without x_i). All kept: the bonus is drawn from row L. Same draws as
/// verify_chain / verify_chain_target_only, which it equals when nothing is kept. Lossy. Throws
/// specdec::Error naming a bad argument.
template <class T = float>
ChainVerdict verify_chain_fly(std::type_identity_t<std::span<const T>> target_rows,
                              std::type_identity_t<std::span<const T>> draft_rows,
                              std::span<const Token> draft_tokens, std::int64_t vocab,
                              FlyParams params, const RandomStream& stream, std::span<Token> out,
                              Workspace& ws) {
  detail::check_target_only_chain<T>(target_rows, draft_tokens, vocab, out.size());
  detail::check_fly(params);
  const auto v = static_cast<std::size_t>(vocab);
  if (!draft_rows.empty()) {
    detail::check_size("draft_rows", draft_rows.size(), draft_tokens.size() * v);
    for (std::size_t i = 0; i < draft_tokens.size(); ++i) {
      const auto row = draft_rows.subspan(i * v, v);
      check_probability_row<T>(ArgName("draft_rows", static_cast<std::int64_t>(i)), row);
      if (!(detail::to_float(row[static_cast<std::size_t>(draft_tokens[i])]) > 0.0f)) {
        detail::fail(ArgName("draft_tokens", static_cast<std::int64_t>(i)),
                     "token {} has draft probability 0", draft_tokens[i]);
      }
    }
  }
  auto scope = ws.scope();
  auto scratch = ws.take<float>(v);
  return detail::verify_chain_fly_unchecked<T>(
      {.target = target_rows.data(),
       .draft = draft_rows.empty() ? nullptr : draft_rows.data(),
       .draft_tokens = draft_tokens.data(),
       .length = draft_tokens.size(),
       .vocab = vocab},
      params, stream, out.data(), scratch.data(), detail::TargetRowChecks<T>{target_rows, v});
}

}  // namespace specdec
