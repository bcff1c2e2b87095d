// SPDX-License-Identifier: MIT
// The chain rules besides standard rejection on constrained logits: block verification, greedy
// matching and typical acceptance, each walking the target rows that constrained_logits.hpp
// transforms on first read (ConstrainedRows as the rows' source), so each gives the tokens of its
// plain form on rows transformed densely. Greedy matching and typical acceptance read no draft
// rows (the draft tokens are tested against the target alone); block verification reads the
// draft's logits as given. A draft token the target's row forbids is rejected with certainty
// (greedy: it is not the argmax; typical: its probability 0 is at no threshold; block: its weight
// and every stopping probability after it are 0), so the rows after it are never read. Each has
// an unchecked form (namespace unchecked, on caller-owned scratch) that the checked one runs.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/verify/block_logits.hpp"
#include "specdec/verify/constrained_logits.hpp"
#include "specdec/verify/typical.hpp"
#include "specdec/verify/walk_inputs.hpp"

namespace specdec::detail {

/// Greedy matching along `chain`'s tokens on its target rows of logits (no draws, draft rows not
/// read): token i is accepted when it is the argmax of row i (ties to the lowest id); the first
/// other token is replaced by that argmax, and a chain accepted whole ends with row `length`'s
/// argmax. A bad row is reported by its name and index.
template <class T>
ChainVerdict verify_chain_greedy_logits_unchecked(const ChainLogitRows<T>& chain, Token* out,
                                                  const ChainLogitsScratch& scratch) {
  const LogitRows<T>& target = chain.target;
  const Token* tokens = chain.tokens;
  const std::int64_t length = chain.length, vocab = chain.vocab;
  // The greedy warp's statistics: a read for validity, then the argmax.
  const auto argmax = [&](std::int64_t i) {
    return static_cast<Token>(
        checked_warp_stats(Warp{.temperature = 0.0f}, target, i, vocab, scratch.warp).greedy);
  };
  const auto verify = [&](std::size_t i, const RandomStream&) -> NodeVerdict {
    const Token best = argmax(static_cast<std::int64_t>(i));
    return {tokens[i] == best ? 0 : -1, best};
  };
  const auto bonus = [&](const RandomStream&) { return argmax(length); };
  return walk_chain(static_cast<std::size_t>(length), RandomStream{}, out, NoRowChecks{}, verify,
                    bonus);
}

/// verify_chain(rule, ...) with Typical on the rows warp `w` makes of `chain`'s target rows
/// 0..length of logits (its draft rows are not read): the same draws and tokens. A token whose p(x)
/// passes every threshold the row's entropy allows is accepted from the row's statistics; any other
/// test writes the row for typical_row. The bonus token is drawn from row `length` as
/// verify_chain_logits draws it.
template <class T>
ChainVerdict verify_chain_typical_logits_unchecked(const Warp& w, const Typical& rule,
                                                   const ChainLogitRows<T>& chain,
                                                   const RandomStream& stream, Token* out,
                                                   const ChainLogitsScratch& scratch) {
  const LogitRows<T>& target = chain.target;
  const Token* tokens = chain.tokens;
  const std::int64_t length = chain.length, vocab = chain.vocab;
  const auto verify = [&](std::size_t i, const RandomStream& s) -> NodeVerdict {
    const auto r = static_cast<std::int64_t>(i);
    const Token x = tokens[i];
    const WarpStats t = checked_warp_stats(w, target, r, vocab, scratch.warp);
    // typical_row's first test, on the entry the written row would hold.
    if (warped_probability(t, to_float(target.row(r)[x]), x) >
        typical_threshold_bound(rule.epsilon, rule.delta)) {
      return {0, x};
    }
    write_warped_row(t, target.row(r), vocab, scratch.target_row);
    return typical_row(scratch.target_row, vocab, &x, 1, rule.epsilon, rule.delta, s);
  };
  const auto bonus = [&](const RandomStream& s) {
    return sample_warped_logits(w, target, length, vocab, s.uniform(0), scratch);
  };
  return walk_chain(static_cast<std::size_t>(length), stream, out, NoRowChecks{}, verify, bonus);
}

/// with_constrained_chain without the constraints' checks, on caller-owned scratch: the walk's
/// scratch and the transformed rows of `logits.target` from `bytes`
/// (verify_chain_logits_workspace_size(vocab, length) bytes aligned to 64); returns
/// walk(rows, scratch, rest), `rest` the bytes after them.
template <class Walk>
auto with_constrained_chain_unchecked(const LogitConstraints& constraints,
                                      const ChainLogits<float>& logits, std::byte* bytes,
                                      Walk&& walk) {
  const std::int64_t vocab = logits.vocab;
  const auto length = static_cast<std::int64_t>(logits.length);
  std::byte* extra = bytes + chain_logits_scratch_size(vocab);
  auto rows =
      constrained_rows(constraints, LogitRows<float>{logits.target, vocab, "target_logits", 0},
                       ChainPrefix{logits.draft_tokens}, vocab, extra);
  return walk(rows.rows_view(), chain_logits_scratch(bytes, vocab),
              extra + constrained_rows_size(vocab, length));
}

/// `logits`' draft tokens on the target rows `target` (transformed), for the walks that read no
/// draft row.
inline ChainLogitRows<float> target_only_chain(const LogitRows<float>& target,
                                               const ChainLogits<float>& logits) {
  return {.target = target,
          .tokens = logits.draft_tokens,
          .length = static_cast<std::int64_t>(logits.length),
          .vocab = logits.vocab};
}

/// The ChainLogits of a checked entry's spans.
inline ChainLogits<float> chain_logits_of(std::span<const float> target_logits,
                                          std::span<const float> draft_logits,
                                          std::span<const Token> draft_tokens, std::int64_t vocab) {
  return {.target = target_logits.data(),
          .draft = draft_logits.data(),
          .draft_tokens = draft_tokens.data(),
          .length = draft_tokens.size(),
          .vocab = vocab};
}

/// The checked constrained chain entries' scratch: the constraints checked for L + 1 rows, then
/// `bytes` bytes of `ws` for the unchecked form `run` (in a scope of `ws`).
template <class Run>
ChainVerdict with_checked_constraints(const LogitConstraints& constraints, std::int64_t length,
                                      std::int64_t vocab, Workspace& ws, std::size_t bytes,
                                      Run&& run) {
  check_constraints(constraints, length + 1, vocab);
  auto scope = ws.scope();
  return run(ws.take<std::byte>(bytes).data());
}

}  // namespace specdec::detail

namespace specdec::constrained::unchecked {

/// verify_block_logits without validation, same draws and bits: `logits` as
/// ChainLogits documents (L = logits.length draft tokens, draft logits read), `constraints` valid
/// for its L + 1 rows and `warp` for the vocabulary (detail::check_constraints, Warp::validate:
/// the caller's part, as the sizes are); `out` holds L + 1 tokens and `scratch`
/// verify_block_logits_workspace_size(vocab, L) bytes aligned to 64. Rows are still
/// reduced to their statistics, which notice a NaN or +inf: such a row, or a drafted token of
/// draft probability 0, may throw specdec::Error instead of giving a result.
template <UniformSource U>
ChainVerdict verify_block_logits(const Warp& warp, const ChainLogits<float>& logits,
                                 const LogitConstraints& constraints, const U& uniforms, Token* out,
                                 std::byte* scratch) {
  return detail::with_constrained_chain_unchecked(
      constraints, logits, scratch,
      [&](const detail::LogitRows<float>& target, const detail::ChainLogitsScratch& rows_scratch,
          std::byte* rest) {
        const detail::ChainLogitRows<float> chain{
            .target = target,
            .draft = {logits.draft, logits.vocab, "draft_logits", 0},
            .tokens = logits.draft_tokens,
            .length = static_cast<std::int64_t>(logits.length),
            .vocab = logits.vocab};
        const auto tau = detail::block_verify_logits_unchecked<float>(
            warp, chain, uniforms, reinterpret_cast<double*>(rest), "draft_tokens", rows_scratch,
            out);
        return ChainVerdict{tau, tau + 1};
      });
}

/// verify_chain_greedy_logits without validation, same tokens: reads `logits.target`
/// ((L + 1) * vocab logits), `logits.draft_tokens`, `logits.length` and `logits.vocab` (no draft
/// logits), `constraints` valid for the L + 1 rows; `out` holds L + 1 tokens and `scratch`
/// verify_chain_logits_workspace_size(vocab, L) bytes aligned to 64. A row holding a
/// NaN or +inf may throw specdec::Error instead of giving a result.
inline ChainVerdict verify_chain_greedy_logits(const ChainLogits<float>& logits,
                                               const LogitConstraints& constraints, Token* out,
                                               std::byte* scratch) {
  return detail::with_constrained_chain_unchecked(
      constraints, logits, scratch,
      [&](const detail::LogitRows<float>& target, const detail::ChainLogitsScratch& rows_scratch,
          std::byte*) {
        return detail::verify_chain_greedy_logits_unchecked<float>(
            detail::target_only_chain(target, logits), out, rows_scratch);
      });
}

/// verify_chain_typical_logits without validation, same draws and bits: `logits` as
/// for verify_chain_greedy_logits (no draft logits), `warp` valid for the vocabulary
/// and `rule`'s epsilon and delta in range (check_typical_parameters); `out` and `scratch` as
/// there. A row holding a NaN or +inf may throw specdec::Error instead of giving a result.
inline ChainVerdict verify_chain_typical_logits(const Warp& warp, const Typical& rule,
                                                const ChainLogits<float>& logits,
                                                const LogitConstraints& constraints,
                                                const RandomStream& stream, Token* out,
                                                std::byte* scratch) {
  return detail::with_constrained_chain_unchecked(
      constraints, logits, scratch,
      [&](const detail::LogitRows<float>& target, const detail::ChainLogitsScratch& rows_scratch,
          std::byte*) {
        return detail::verify_chain_typical_logits_unchecked<float>(
            warp, rule, detail::target_only_chain(target, logits), stream, out, rows_scratch);
      });
}

}  // namespace specdec::constrained::unchecked

namespace specdec::constrained {

/// Bytes of Workspace verify_block_logits takes for `length` draft tokens of `vocab`.
inline std::size_t verify_block_logits_workspace_size(std::int64_t vocab, std::int64_t length) {
  return verify_chain_logits_workspace_size(vocab, length) +
         Workspace::round_up(static_cast<std::size_t>(std::max<std::int64_t>(length, 0) + 1) *
                             sizeof(double));
}

/// verify_block_logits with the target rows transformed by `constraints` before the warp (row i's
/// draft prefix is draft_tokens[0, i)), as verify_chain_logits documents: the same
/// tokens and draws as transforming every target row and calling verify_block_logits. The draft
/// logits are taken as given; a draft token the target's row forbids gets weight 0, so no block
/// passes it and the rows after it are never read. Draws from `uniforms` as verify_block (draw
/// i - 1 the stopping test of position i, draw L the final token). Throws specdec::Error naming
/// the bad argument, as verify_block_logits and verify_chain_logits.
template <UniformSource U>
ChainVerdict verify_block_logits(const Warp& warp, std::span<const float> target_logits,
                                 std::span<const float> draft_logits,
                                 std::span<const Token> draft_tokens, std::int64_t vocab,
                                 const LogitConstraints& constraints, const U& uniforms,
                                 std::span<Token> out, Workspace& ws) {
  detail::check_chain_logits_shapes<float>(warp, target_logits, draft_logits, draft_tokens, vocab,
                                           out.size());
  detail::check_count("draft_tokens", draft_tokens.size(), 0, std::size_t{1} << 20);
  const auto length = std::ssize(draft_tokens);
  return detail::with_checked_constraints(
      constraints, length, vocab, ws, verify_block_logits_workspace_size(vocab, length),
      [&](std::byte* scratch) {
        return unchecked::verify_block_logits(
            warp, detail::chain_logits_of(target_logits, draft_logits, draft_tokens, vocab),
            constraints, uniforms, out.data(), scratch);
      });
}

/// Greedy matching of L draft tokens against target rows of logits transformed by `constraints`
/// (as verify_chain_logits documents; no warp: greedy decoding reads the argmax):
/// token i is accepted while it is the argmax of transformed row i (ties to the lowest id), the
/// first other one is replaced by that argmax, and a chain accepted whole ends with row L's
/// argmax; the same tokens as verify_chain(Greedy{}, ...) on the transformed rows. No draws and
/// no draft rows: `target_logits` holds L + 1 rows of `vocab`. A forbidden draft token is never
/// the argmax, so the rows after it are never read. Workspace:
/// verify_chain_logits_workspace_size(vocab, L) bytes. Throws specdec::Error naming
/// the bad argument, as verify_chain_target_only_logits.
inline ChainVerdict verify_chain_greedy_logits(std::span<const float> target_logits,
                                               std::span<const Token> draft_tokens,
                                               std::int64_t vocab,
                                               const LogitConstraints& constraints,
                                               std::span<Token> out, Workspace& ws) {
  detail::check_target_only_chain_shapes(Warp{.temperature = 0.0f}, target_logits, draft_tokens,
                                         vocab, out.size());
  const auto length = std::ssize(draft_tokens);
  return detail::with_checked_constraints(
      constraints, length, vocab, ws, verify_chain_logits_workspace_size(vocab, length),
      [&](std::byte* scratch) {
        return unchecked::verify_chain_greedy_logits(
            detail::chain_logits_of(target_logits, {}, draft_tokens, vocab), constraints,
            out.data(), scratch);
      });
}

/// Typical acceptance (Medusa; `rule`'s epsilon and delta) of L draft tokens against the target
/// rows `warp` makes of logits transformed by `constraints` (as verify_chain_logits
/// documents): token i is accepted when its probability in warped row i exceeds
/// min(epsilon, delta * exp(-H)); the first other one is replaced by a draw from that row, and a
/// chain accepted whole ends with a draw from row L. The same tokens and draws as
/// verify_chain(rule, ...) on the transformed, warped rows (whatever its draft rows: typical
/// acceptance reads none); lossy, as typical acceptance is. `target_logits` holds L + 1 rows of
/// `vocab`, no draft rows. A forbidden draft token (probability 0) passes no threshold, so the
/// rows after it are never read. Workspace: verify_chain_logits_workspace_size(vocab,
/// L) bytes. Throws specdec::Error naming the bad argument (epsilon, delta, and as
/// verify_chain_target_only_logits).
inline ChainVerdict verify_chain_typical_logits(
    const Warp& warp, const Typical& rule, std::span<const float> target_logits,
    std::span<const Token> draft_tokens, std::int64_t vocab, const LogitConstraints& constraints,
    const RandomStream& stream, std::span<Token> out, Workspace& ws) {
  detail::check_target_only_chain_shapes(warp, target_logits, draft_tokens, vocab, out.size());
  check_typical_parameters(rule.epsilon, rule.delta);
  const auto length = std::ssize(draft_tokens);
  return detail::with_checked_constraints(
      constraints, length, vocab, ws, verify_chain_logits_workspace_size(vocab, length),
      [&](std::byte* scratch) {
        return unchecked::verify_chain_typical_logits(
            warp, rule, detail::chain_logits_of(target_logits, {}, draft_tokens, vocab),
            constraints, stream, out.data(), scratch);
      });
}

}  // namespace specdec::constrained
