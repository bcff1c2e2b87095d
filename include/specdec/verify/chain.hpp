// SPDX-License-Identifier: MIT
// Chain verification (docs/algorithms.md §2.1): a block of L draft tokens, one per position,
// verified in order with any rule; the first rejection ends it, a bonus token follows when all
// pass.
#pragma once

#include "specdec/verify/rule.hpp"
#include "specdec/verify/walk_inputs.hpp"

namespace specdec {

struct ChainVerdict {
  std::int32_t accepted = 0;  // draft tokens accepted (0..L)
  std::int32_t emitted = 0;   // tokens written: accepted + 1 (the correction or the bonus)
};

namespace detail {

/// The checks verify_chain makes before it walks: shapes and token ids. Rows are checked as the
/// walk reaches them (ChainRowChecks): rows after the first rejection are never read.
template <class T>
void check_chain_shapes(std::span<const T> target_rows, std::span<const T> draft_rows,
                        std::span<const Token> draft_tokens, std::int64_t vocab,
                        std::size_t out_size, std::span<const T> raw_target_rows,
                        std::span<const T> raw_draft_rows) {
  if (vocab < 1) detail::fail("vocab", "{} must be >= 1", vocab);
  const auto length = draft_tokens.size();
  const auto v = static_cast<std::size_t>(vocab);
  const auto target_size = detail::checked_mul<std::size_t>("vocab", length + 1, v);
  detail::check_size("target_rows", target_rows.size(), target_size);
  detail::check_size("draft_rows", draft_rows.size(), length * v);
  if (!raw_target_rows.empty()) detail::check_size("raw_target_rows", raw_target_rows.size(), target_size);
  if (!raw_draft_rows.empty()) detail::check_size("raw_draft_rows", raw_draft_rows.size(), length * v);
  if (out_size < length + 1) {
    detail::fail("out", "has {} entries, needs L + 1 = {}", out_size, length + 1);
  }
  for (std::size_t i = 0; i < length; ++i) {
    detail::check_token(ArgName("draft_tokens", static_cast<std::int64_t>(i)), draft_tokens[i], vocab);
  }
}

/// The row checks of a chain, position by position: check(i) for i < L checks the rows of
/// position i (probability rows, the drafted token's support, the rule's parameters on them),
/// check(L) the bonus row.
template <class T>
struct ChainRowChecks {
  const Rule& rule;
  std::span<const T> target_rows, draft_rows, raw_target_rows, raw_draft_rows;
  std::span<const Token> draft_tokens;
  std::size_t vocab;

  void operator()(std::size_t i) const {
    const auto row = [&](std::span<const T> rows) { return rows.subspan(i * vocab, vocab); };
    check_probability_row<T>(ArgName("target_rows", i), row(target_rows));
    if (!raw_target_rows.empty()) {
      check_probability_row<T>(ArgName("raw_target_rows", i), row(raw_target_rows));
    }
    if (i == draft_tokens.size()) return;
    const auto draft = row(draft_rows);
    check_probability_row<T>(ArgName("draft_rows", i), draft);
    if (!raw_draft_rows.empty()) {
      check_probability_row<T>(ArgName("raw_draft_rows", i), row(raw_draft_rows));
    }
    const bool needs_support = !std::holds_alternative<Typical>(rule) &&
                               !std::holds_alternative<Greedy>(rule) &&
                               !(std::holds_alternative<Lossy>(rule) && std::get<Lossy>(rule).greedy);
    if (needs_support &&
        !(static_cast<float>(draft[static_cast<std::size_t>(draft_tokens[i])]) > 0.0f)) {
      detail::fail(ArgName("draft_tokens", static_cast<std::int64_t>(i)),
                   "token {} has draft probability 0", draft_tokens[i]);
    }
    detail::check_rule<T>(rule, row(target_rows), draft, 1);
  }
};

/// No row checks (verify_chain_unchecked's default).
struct NoRowChecks {
  void operator()(std::size_t) const {}
};

/// The walk every chain verifier shares: for i < length, check(i) then verify(i, stream_i) (a
/// NodeVerdict for draft token i), stopping at the first rejection with its correction token; when
/// all pass, check(length) then out[length] = bonus(stream_length). stream_i is
/// `stream.at_position(stream.position + i)`.
template <class Check, class Verify, class Bonus>
ChainVerdict walk_chain(std::size_t length, const RandomStream& stream, Token* out,
                        const Check& check, const Verify& verify, const Bonus& bonus) {
  ChainVerdict verdict;
  for (std::size_t i = 0; i < length; ++i) {
    check(i);
    const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    const NodeVerdict node = verify(i, s);
    out[i] = node.token;
    if (node.accepted < 0) {
      verdict.accepted = static_cast<std::int32_t>(i);
      verdict.emitted = verdict.accepted + 1;
      return verdict;
    }
  }
  check(length);
  out[length] = bonus(stream.at_position(stream.position + static_cast<std::uint32_t>(length)));
  verdict.accepted = static_cast<std::int32_t>(length);
  verdict.emitted = verdict.accepted + 1;
  return verdict;
}

/// verify_chain without validation: `rows` as ChainRows documents (raw rows may be nullptr),
/// `scratch` holds `rows.vocab` floats. Same draws as verify_chain. `check(i)` runs before
/// position i is verified, and check(length) before the bonus token is drawn.
template <class T, class Check = NoRowChecks>
ChainVerdict verify_chain_unchecked(const Rule& rule, const specdec::ChainRows<T>& rows,
                                    const RandomStream& stream, Token* out, float* scratch,
                                    const Check& check = {}) {
  const auto verify = [&](std::size_t i, const RandomStream& s) {
    return detail::verify_node_unchecked(rule, node_rows(rows, i), &rows.draft_tokens[i], 1, s,
                                         scratch);
  };
  const auto bonus = [&](const RandomStream& s) {
    return bonus_token(rule, rows.target + rows.length * static_cast<std::size_t>(rows.vocab),
                       rows.vocab, s);
  };
  return walk_chain(rows.length, stream, out, check, verify, bonus);
}

}  // namespace detail

/// Verifies the draft tokens `draft_tokens` (L of them) position by position.
/// Layout: `rows.target` holds L + 1 warped rows of `vocab` (row i = the target at position i,
/// i.e. after the first i draft tokens; row L gives the bonus token), `rows.draft` holds L warped
/// rows (row i = the row draft token i was drawn from). `rows.raw_target` / `rows.raw_draft`
/// (same shapes, or empty = the warped rows) feed the cascade deferral and lossy greedy; errors
/// name them target_rows, draft_rows, raw_target_rows and raw_draft_rows.
/// Writes the accepted tokens then the correction or bonus token into `out` (>= L + 1 entries).
/// Randomness: position i is verified with `stream.at_position(stream.position + i)` and the
/// draws of the rule's row function (test = draw 0, correction = draw 1 for one candidate); the
/// bonus token is draw 0 of `stream.at_position(stream.position + L)`. The bonus token always comes
/// from the warped target row L, also for lossy and cascade rules (whose pi at position L would
/// need one more draft row); for Greedy it is that row's argmax (no draw).
/// Throws specdec::Error naming the bad argument. Rows are checked as the walk reaches them: rows
/// after the first rejection are never read.
template <class T = float>
ChainVerdict verify_chain(const Rule& rule, const RowSpans<T>& rows,
                          std::span<const Token> draft_tokens, std::int64_t vocab,
                          const RandomStream& stream, std::span<Token> out, Workspace& ws) {
  const auto& [target_rows, draft_rows, raw_target_rows, raw_draft_rows] = rows;
  detail::check_chain_shapes<T>(target_rows, draft_rows, draft_tokens, vocab, out.size(),
                                raw_target_rows, raw_draft_rows);
  auto scope = ws.scope();
  auto scratch = ws.take<float>(static_cast<std::size_t>(vocab));
  const detail::ChainRowChecks<T> check{rule,           target_rows,    draft_rows,
                                        raw_target_rows, raw_draft_rows, draft_tokens,
                                        static_cast<std::size_t>(vocab)};
  const ChainRows<T> chain{.target = target_rows.data(),
                           .draft = draft_rows.data(),
                           .draft_tokens = draft_tokens.data(),
                           .length = draft_tokens.size(),
                           .vocab = vocab,
                           .raw_target = raw_target_rows.empty() ? nullptr : raw_target_rows.data(),
                           .raw_draft = raw_draft_rows.empty() ? nullptr : raw_draft_rows.data()};
  return detail::verify_chain_unchecked<T>(rule, chain, stream, out.data(), scratch.data(), check);
}

/// verify_chain without raw rows (the warped rows serve the rules that read them).
template <class T = float>
ChainVerdict verify_chain(const Rule& rule, std::type_identity_t<std::span<const T>> target_rows,
                          std::type_identity_t<std::span<const T>> draft_rows,
                          std::span<const Token> draft_tokens, std::int64_t vocab,
                          const RandomStream& stream, std::span<Token> out, Workspace& ws) {
  return verify_chain<T>(rule, RowSpans<T>{.target = target_rows, .draft = draft_rows},
                         draft_tokens, vocab, stream, out, ws);
}

}  // namespace specdec
