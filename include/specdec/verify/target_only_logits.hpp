// SPDX-License-Identifier: MIT
// Chain verification of drafts without draft rows straight from logits: the same verdict and
// tokens as warping every target row and calling verify_chain_target_only, with each row reduced
// to its statistics (core/warp/logit_stats.hpp). A position reads p(x) alone (most often on a rough
// pass of the row); a rejection draws once from the entries the row keeps with x removed, and the
// bonus from the last row, neither writing a row where the warp allows (a short uncut row is
// written). Rows after the first rejection are never read.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/target_only.hpp"

namespace specdec::detail {

/// A lower bound on the warped probability of an entry that holds top_p of the softmax mass on
/// its own (which warped_probability_bounds leaves undecided), else 0. More than half the mass
/// makes it the unique first entry, and reaching top_p makes it the whole nucleus: its warped
/// probability is p / p, 1 to within float rounding.
inline float nucleus_of_one_bound(const RoughRow& row, float top_p, float logit) {
  if (!(top_p < 1.0f)) return 0.0f;
  const auto term =
      static_cast<double>(exp_flush(scaled_exponent(logit, row.max, row.inv_temperature)));
  const double lo = term / (row.sum * (1.0 + kRoughSum)) * (1.0 - 1e-6);
  return lo >= static_cast<double>(top_p) * (1.0 + 1e-3) && lo > 0.5 ? 1.0f - 1e-5f : 0.0f;
}

/// Whether one rough pass over row i of `target` proves u < p(x), target_only_row's first test
/// (a point-mass draft, mass 1); false decides nothing.
template <class T>
bool target_only_accepted_on_rough_bound(const Warp& w, const LogitRows<T>& target, std::int64_t i,
                                         Token x, std::int64_t vocab, float u,
                                         const ChainLogitsScratch& scratch) {
  float logit = 0.0f;
  const RoughRow rough =
      target.rough(w, i, x, vocab, warp_scratch(scratch.warp, vocab).tiles, logit);
  if (rough.invalid) return false;
  const ProbabilityBounds p = warped_probability_bounds(rough, w.top_p, logit);
  // A confident target (where copied drafts are accepted most) often puts top_p on x alone.
  const float lo = p.lo > 0.0f ? p.lo : nucleus_of_one_bound(rough, w.top_p, logit);
  return lo > 0.0f && accepts(u, 1.0f, 1.0f, lo);
}

/// target_only_row's correction after rejecting x (probability px) on the row of `logits`, whose
/// statistics `stats` (and, for a cut row, `support` candidates in the warp scratch) were just
/// computed: draw 1 of `s` from the row with x removed, unless that leaves less than the residual
/// floor.
template <class T>
Token target_only_correction_logits(const WarpStats& stats, std::int64_t support, const T* logits,
                                    Token x, float px, std::int64_t vocab, const RandomStream& s,
                                    const ChainLogitsScratch& scratch) {
  const float u = s.uniform(1u);
  if (support >= 0) {
    // A cut row: drawn from the entries it keeps (ids ascending), x's zeroed.
    const WarpScratch ws = warp_scratch(scratch.warp, vocab);
    const std::int64_t kept =
        kept_candidates(stats, logits, ws, support, ws.bucket, scratch.target_row);
    const SparseRow row{ws.bucket, scratch.target_row, kept, vocab};
    const std::int32_t* at = std::lower_bound(ws.bucket, ws.bucket + kept, x);
    if (at != ws.bucket + kept && *at == x) {
      float& entry = scratch.target_row[at - ws.bucket];
      if (row.sum() - static_cast<double>(entry) >= kResidualFloor) entry = 0.0f;
    }
    return row.sample(u);
  }
  // A one-hot row: its one is left whether or not x is it.
  if (stats.greedy >= 0) return static_cast<Token>(stats.greedy);
  if (vocab < kFilledRowMin) {
    write_warped_row(stats, logits, vocab, scratch.target_row);
    return target_only_row(scratch.target_row, vocab, &x, 1, s, scratch.residual).token;
  }
  // A long uncut row, a span at a time: the draw's sum is over the row with x removed, the floor
  // test over the whole row, whose block sums differ only in x's block.
  bool remove = true;
  const auto fill = [&](std::int64_t b, std::int64_t e, float* out) {
    write_warped_row(stats, logits + b, e - b, out);
    if (remove && x >= b && x < e) out[x - b] = 0.0f;
  };
  const FilledRow row{fill, vocab, scratch.target_row, scratch.target_row + kFilledSpan};
  const double removed = row.sum();
  const std::int64_t x_block = x / kBlockedSumBlock;
  remove = false;
  const float* whole = row.filled(x_block);
  const float whole_block = block_sum([=](std::int64_t j) { return whole[j]; }, 0,
                                      row.end(x_block) - x_block * kBlockedSumBlock);
  double mass = 0.0;
  for (std::int64_t k = 0; k < row.blocks(); ++k) {
    mass += k == x_block ? whole_block : row.block_sums[k];
  }
  if (mass - static_cast<double>(px) >= kResidualFloor) {
    remove = true;
    return row.sample(u, removed);
  }
  return row.sample(u, row.sum());  // only rounding leaves x (nearly) all the mass
}

/// verify_chain_target_only on the rows warp `w` makes of `chain`'s target rows 0..length of
/// logits (its draft rows are not read), tokens already checked to lie in the vocabulary. Same
/// draws and tokens; a bad row is reported by its name and index.
template <class T>
ChainVerdict verify_chain_target_only_logits_unchecked(const Warp& w,
                                                       const ChainLogitRows<T>& chain,
                                                       const RandomStream& stream, Token* out,
                                                       const ChainLogitsScratch& scratch) {
  const LogitRows<T>& target = chain.target;
  const std::int64_t vocab = chain.vocab;
  ChainVerdict verdict;
  const bool rough = roughly_bounded(w, vocab);
  for (std::int64_t i = 0; i < chain.length; ++i) {
    const Token x = chain.tokens[i];
    const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    if (rough &&
        target_only_accepted_on_rough_bound(w, target, i, x, vocab, s.uniform(0), scratch)) {
      out[i] = x;
      continue;
    }
    std::int64_t support = -1;
    const WarpStats stats = checked_warp_stats(w, target, i, vocab, scratch.warp, &support);
    const float px = warped_probability(stats, to_float(target.row(i)[x]), x);
    if (accepts(s.uniform(0), 1.0f, 1.0f, px)) {  // target_only_row's first test (mass 1)
      out[i] = x;
      continue;
    }
    out[i] = target_only_correction_logits(stats, support, target.row(i), x, px, vocab, s, scratch);
    verdict.accepted = static_cast<std::int32_t>(i);
    verdict.emitted = verdict.accepted + 1;
    return verdict;
  }
  return bonus_from_logits(w, target, chain.length, vocab, stream, out, scratch);
}

}  // namespace specdec::detail

namespace specdec {

/// verify_chain_target_only on the rows `warp` makes of logits, without writing them: the same
/// tokens, draws and verdict as warping every row (warp_logits) and calling
/// verify_chain_target_only. `target_logits` holds L + 1 rows of `vocab` logits (row L gives the
/// bonus token); the L draft tokens come without draft rows. Each row is reduced to the
/// statistics of its warp and read at the drafted token only (accept x when u < p(x)); the first
/// rejection draws once from the entries the row keeps with x removed, and full acceptance draws
/// the bonus from row L, without writing either row (a row shorter than 8192 entries and not cut
/// by top-k, top-p or min-p is written). Workspace: verify_chain_logits_workspace_size(vocab)
/// bytes. T = float, or Eigen::half / Eigen::bfloat16 with <Eigen/Core> included. Throws
/// specdec::Error naming the bad argument (vocab, a field of the warp, target_logits,
/// draft_tokens[i], out); rows are checked as the walk reaches them (rows after the first
/// rejection are never read).
template <class T = float>
ChainVerdict verify_chain_target_only_logits(const Warp& warp,
                                             std::type_identity_t<std::span<const T>> target_logits,
                                             std::span<const Token> draft_tokens,
                                             std::int64_t vocab, const RandomStream& stream,
                                             std::span<Token> out, Workspace& ws) {
  if (vocab < 1) detail::fail("vocab", "{} must be >= 1", vocab);
  warp.validate(vocab);
  const auto length = draft_tokens.size();
  detail::check_size(
      "target_logits", target_logits.size(),
      detail::checked_mul<std::size_t>("vocab", length + 1, static_cast<std::size_t>(vocab)));
  if (out.size() < length + 1) {
    detail::fail("out", "has {} entries, needs L + 1 = {}", out.size(), length + 1);
  }
  for (std::size_t i = 0; i < length; ++i) {
    detail::check_token(ArgName("draft_tokens", static_cast<std::int64_t>(i)), draft_tokens[i],
                        vocab);
  }
  auto scope = ws.scope();
  auto bytes = ws.take<std::byte>(detail::chain_logits_scratch_size(vocab));
  return detail::verify_chain_target_only_logits_unchecked<T>(
      warp,
      {.target = {target_logits.data(), vocab, "target_logits", 0},
       .tokens = draft_tokens.data(),
       .length = static_cast<std::int64_t>(length),
       .vocab = vocab},
      stream, out.data(), detail::chain_logits_scratch(bytes.data(), vocab));
}

}  // namespace specdec
