// SPDX-License-Identifier: MIT
// One sequence's chain verification straight from logits, with standard rejection sampling: the
// same verdict and tokens as warping every row (warp_logits) and calling verify_chain, but each
// row is reduced to its statistics (core/warp/logit_stats.hpp) and p(x), q(x) are recomputed at the
// drafted tokens only. Whole rows are written only where the rule reads them: the target and draft
// rows at the first rejection (the residual) or the target row after full acceptance (the bonus),
// and not even those when the warp cuts (top-k, top-p, min-p): the residual and the bonus row are
// then positive only at the target's candidates, and are summed and drawn from there as the
// written rows would be. Rows after the first rejection are never read.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/core/warp/logit_stats.hpp"
#include "specdec/core/rough_bounds.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/warp/scratch.hpp"
#include "specdec/core/warp/row_writer.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/rejection.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec::detail {

/// Rows of at least this many entries are drawn from without being written (FilledRow): a row of
/// scratch then holds the span being computed and the block sums.
inline constexpr std::int64_t kFilledRowMin = 2 * kFilledSpan;

/// Scratch of one chain step from logits: three rows of `vocab` floats, the warp's scratch and the
/// draft row's tiles.
inline std::size_t chain_logits_scratch_size(std::int64_t vocab) {
  return 3 * Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float)) +
         warp_workspace_size(vocab) +
         Workspace::round_up(static_cast<std::size_t>(tile_count(vocab)) * sizeof(TileSum));
}

struct ChainLogitsScratch {
  float* target_row;  // vocab floats each
  float* draft_row;
  float* residual;
  std::int32_t* warp;     // warp_workspace_size(vocab) bytes
  TileSum* draft_tiles;   // tile_count(vocab)
};

/// The chain scratch laid out in `base` (chain_logits_scratch_size(vocab) bytes).
inline ChainLogitsScratch chain_logits_scratch(std::byte* base, std::int64_t vocab) {
  const auto row = Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
  return {reinterpret_cast<float*>(base), reinterpret_cast<float*>(base + row),
          reinterpret_cast<float*>(base + 2 * row), reinterpret_cast<std::int32_t*>(base + 3 * row),
          reinterpret_cast<TileSum*>(base + 3 * row + warp_workspace_size(vocab))};
}

/// Rows made on first use (constrained logits, verify/constrained_logits.hpp): fetch(context, i)
/// is row i, valid while the walk works on it; rough(context, w, i, x, &logit), when given, is
/// rough_row of row i for its entry x (whose logit it sets) without making the row.
template <class T>
struct RowSource {
  const T* (*fetch)(void* context, std::int64_t i) = nullptr;
  RoughRow (*rough)(void* context, const Warp& w, std::int64_t i, Token x, float* logit) = nullptr;
  void* context = nullptr;
};

/// A row of logits in a matrix: `rows` points at row 0 of the sequence, `stride` elements apart;
/// `first` is row 0's index in the matrix named `name` (for error messages). With a `source`, rows
/// come from it instead.
template <class T>
struct LogitRows {
  const T* rows;
  std::int64_t stride;
  std::string_view name;
  std::int64_t first;
  RowSource<T> source{};
  const T* row(std::int64_t i) const {
    return source.fetch != nullptr ? source.fetch(source.context, i) : rows + i * stride;
  }
  /// rough_row of row i for its entry x, whose logit goes to `logit` (`tiles`: tile_count(vocab)).
  RoughRow rough(const Warp& w, std::int64_t i, Token x, std::int64_t vocab, TileSum* tiles,
                 float& logit) const {
    if (source.rough != nullptr) return source.rough(source.context, w, i, x, &logit);
    const T* r = row(i);
    logit = to_float(r[x]);
    return rough_row(w, r, vocab, logit, tiles);
  }
};

template <class T>
WarpStats checked_warp_stats(const Warp& w, const LogitRows<T>& rows, std::int64_t i,
                             std::int64_t vocab, std::int32_t* scratch,
                             std::int64_t* support = nullptr) {
  bool invalid = false;
  const T* row = rows.row(i);
  const WarpStats s = warp_stats(w, row, vocab, warp_scratch(scratch, vocab), invalid, support);
  if (invalid) {
    check_logits_row<T>(ArgName(rows.name, rows.first + i),
                        std::span<const T>(row, static_cast<std::size_t>(vocab)));
  }
  return s;
}

/// Writes the warped row i of `rows` into `out` (vocab floats); a bad row is reported by name.
template <class T>
void write_warp_of_row(const Warp& w, const LogitRows<T>& rows, std::int64_t i, std::int64_t vocab,
                       std::int32_t* scratch, float* out) {
  const WarpStats s = checked_warp_stats(w, rows, i, vocab, scratch);
  write_warped_row(s, rows.row(i), vocab, out);
}

/// sample_row(u) on the warp of row i of `rows`, without writing the row where the warp allows:
/// a cut row is drawn from the entries it keeps, a long uncut row a block at a time. Uses the
/// scratch's warp words, target row and (for a short uncut row) nothing else.
template <class T>
Token sample_warped_logits(const Warp& w, const LogitRows<T>& rows, std::int64_t i,
                           std::int64_t vocab, float u, const ChainLogitsScratch& scratch) {
  std::int64_t support = -1;
  const WarpStats stats = checked_warp_stats(w, rows, i, vocab, scratch.warp, &support);
  const T* logits = rows.row(i);
  if (support >= 0) {
    // A cut row: drawn from the entries it keeps, as sample_row would draw from the written row.
    const WarpScratch ws = warp_scratch(scratch.warp, vocab);
    const std::int64_t kept =
        kept_candidates(stats, logits, ws, support, ws.bucket, scratch.target_row);
    return SparseRow{ws.bucket, scratch.target_row, kept, vocab}.sample(u);
  }
  if (stats.greedy >= 0) return static_cast<Token>(stats.greedy);  // sample_row on a one-hot row
  if (vocab >= kFilledRowMin) {
    const FilledRow row{[&](std::int64_t b, std::int64_t e, float* block) {
                          write_warped_row(stats, logits + b, e - b, block);
                        },
                        vocab, scratch.target_row, scratch.target_row + kFilledSpan};
    return row.sample(u, row.sum());
  }
  write_warped_row(stats, logits, vocab, scratch.target_row);
  return sample_row(scratch.target_row, vocab, u);
}

/// The first test at a row: its warped draft row when given (`q_row`, else nullptr), the row,
/// the token tested and the test's uniform.
struct FirstTest {
  const float* q_row;
  std::int64_t row;
  Token token;
  float u;
};

/// The end of a chain walk from logits whose `gamma` tokens all passed: the bonus token, draw 0
/// of position gamma's stream, from the target's row gamma.
template <class T>
ChainVerdict bonus_from_logits(const Warp& w, const LogitRows<T>& target, std::int64_t gamma,
                               std::int64_t vocab, const RandomStream& stream, Token* out,
                               const ChainLogitsScratch& scratch) {
  const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(gamma));
  out[gamma] = sample_warped_logits(w, target, gamma, vocab, s.uniform(0), scratch);
  const auto accepted = static_cast<std::int32_t>(gamma);
  return {accepted, accepted + 1};
}

/// Whether one rough pass over row i of the target (and of the draft, unless its warped row
/// `q_row` is given) proves u * q(x) < p(x), the first test of rejection, multi-round and RRS:
/// the pass bounds p(x) and q(x) closely enough to accept most tokens, in about half the
/// arithmetic of the exact statistics (for a warp that roughly_bounded admits). False decides
/// nothing: the caller tests on the exact statistics.
template <class T>
bool accepted_on_rough_bounds(const Warp& w, const LogitRows<T>& target, const LogitRows<T>& draft,
                              const FirstTest& test, std::int64_t vocab,
                              const ChainLogitsScratch& scratch) {
  const auto [q_row, i, x, u] = test;
  ProbabilityBounds q{};
  if (q_row != nullptr) {
    q = {q_row[x], q_row[x]};
  } else {
    float draft_logit = 0.0f;
    const RoughRow d = draft.rough(w, i, x, vocab, scratch.draft_tiles, draft_logit);
    if (d.invalid) return false;
    q = warped_probability_bounds(d, w.top_p, draft_logit);
  }
  if (!(q.lo > 0.0f)) return false;
  float target_logit = 0.0f;
  const RoughRow t =
      target.rough(w, i, x, vocab, warp_scratch(scratch.warp, vocab).tiles, target_logit);
  if (t.invalid) return false;
  const ProbabilityBounds p = warped_probability_bounds(t, w.top_p, target_logit);
  return p.lo > 0.0f && detail::accepts(u, q.hi, 1.0f, p.lo);
}

/// The logits of a chain of `length` draft tokens (already checked to lie in the vocabulary):
/// target rows 0..length and draft rows 0..length-1; `draft_probs`, when given, holds the draft
/// side as warped rows already written (`vocab` apart; a drafter sampled from them) and `draft`
/// is not read: only the target rows are reduced to statistics.
template <class T>
struct ChainLogitRows {
  LogitRows<T> target;
  LogitRows<T> draft{};  // none for a target-only walk
  const Token* tokens = nullptr;
  std::int64_t length = 0;
  std::int64_t vocab = 0;
  const float* draft_probs = nullptr;
};

/// verify_chain(Rejection{}) of `chain` against warp `w`, from logits. Same draws as
/// verify_chain. A drafted token of warped draft probability 0 is reported as
/// `token_name[i]`; a bad logit row by its name and index.
template <class T>
ChainVerdict verify_chain_logits_unchecked(const Warp& w, const ChainLogitRows<T>& chain,
                                           const RandomStream& stream, Token* out,
                                           const ArgName& token_name,
                                           const ChainLogitsScratch& scratch) {
  const LogitRows<T>& target = chain.target;
  const LogitRows<T>& draft = chain.draft;
  const Token* tokens = chain.tokens;
  const std::int64_t gamma = chain.length;
  const std::int64_t vocab = chain.vocab;
  const float* draft_probs = chain.draft_probs;
  ChainVerdict verdict;
  // A warp cutting by top-p or not at all: each row is first read once with rough exponentials,
  // which bound p(x) and q(x) closely enough to accept most tokens; the rest (and every
  // rejection) are decided on the exact statistics.
  const bool rough = roughly_bounded(w, vocab);
  for (std::int64_t i = 0; i < gamma; ++i) {
    const Token x = tokens[i];
    const float* q_row = draft_probs == nullptr ? nullptr : draft_probs + i * vocab;
    const float u0 =
        stream.at_position(stream.position + static_cast<std::uint32_t>(i)).uniform(0);
    if (rough && accepted_on_rough_bounds(w, target, draft, {q_row, i, x, u0}, vocab, scratch)) {
      out[i] = x;
      continue;
    }
    // The draft row first, so the target's candidates stay in the scratch for a rejection; a
    // bad target row is still reported before a bad draft row.
    std::int64_t support = -1;
    bool draft_invalid = false;
    WarpStats draft_stats{};
    if (q_row == nullptr) {
      draft_stats =
          warp_stats(w, draft.row(i), vocab, warp_scratch(scratch.warp, vocab), draft_invalid);
    }
    const WarpStats target_stats = checked_warp_stats(w, target, i, vocab, scratch.warp, &support);
    if (draft_invalid) checked_warp_stats(w, draft, i, vocab, scratch.warp);
    const auto q_at = [&](std::int64_t id) {
      return q_row != nullptr ? q_row[id]
                              : warped_probability(draft_stats, to_float(draft.row(i)[id]), id);
    };
    const float qx = q_at(x);
    if (!(qx > 0.0f)) fail(token_name[i], "token {} has draft probability 0", x);
    const float px = warped_probability(target_stats, to_float(target.row(i)[x]), x);
    const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    // the multi-round residual walk's test for one candidate (mass 1).
    if (detail::accepts(s.uniform(0), qx, 1.0f, px)) {
      out[i] = x;
      continue;
    }
    verdict.accepted = static_cast<std::int32_t>(i);
    verdict.emitted = verdict.accepted + 1;
    if (support >= 0) {
      // A cut target row: the residual is positive only where the row keeps an entry.
      const WarpScratch ws = warp_scratch(scratch.warp, vocab);
      const std::int64_t kept = kept_candidates(target_stats, target.row(i), ws, support,
                                                ws.bucket, scratch.target_row);
      for (std::int64_t j = 0; j < kept; ++j) scratch.draft_row[j] = q_at(ws.bucket[j]);
      out[i] = rejection_correction_sparse(ws.bucket, scratch.target_row, scratch.draft_row, kept,
                                           vocab, s, scratch.residual);
      return verdict;
    }
    // A one-hot draft row written a span at a time would put its one in every span: only rows
    // given whole, or warps without greedy rows, are computed that way.
    if (vocab >= kFilledRowMin && target_stats.greedy < 0 &&
        (q_row != nullptr || draft_stats.greedy < 0)) {
      // Neither row is cut: the residual [p - q]+ is computed a span at a time, never written
      // (p and q in the first two scratch rows, the span and the block sums in the third).
      const T* target_logits = target.row(i);
      const T* draft_logits = draft.row(i);
      const auto residual = [&](std::int64_t b, std::int64_t e, float* out_span) {
        write_warped_row(target_stats, target_logits + b, e - b, scratch.target_row);
        const float* q = q_row + b;
        if (q_row == nullptr) {
          write_warped_row(draft_stats, draft_logits + b, e - b, scratch.draft_row);
          q = scratch.draft_row;
        }
        for (std::int64_t j = 0; j < e - b; ++j) {
          out_span[j] = scaled_residual(scratch.target_row[j], 1.0f, q[j]);
        }
      };
      const auto target_only = [&](std::int64_t b, std::int64_t e, float* out_span) {
        write_warped_row(target_stats, target_logits + b, e - b, out_span);
      };
      float* sums = scratch.residual + kFilledSpan;
      out[i] = rejection_correction_filled(FilledRow{residual, vocab, scratch.residual, sums},
                                           FilledRow{target_only, vocab, scratch.residual, sums}, s);
      return verdict;
    }
    // The residual needs both rows: write them and let the rule's kernel decide on them.
    write_warped_row(target_stats, target.row(i), vocab, scratch.target_row);
    if (q_row == nullptr) {
      write_warped_row(draft_stats, draft.row(i), vocab, scratch.draft_row);
      q_row = scratch.draft_row;
    }
    const NodeVerdict node = rejection_row(scratch.target_row, q_row, vocab, x, s, scratch.residual);
    out[i] = node.token;
    if (node.accepted >= 0) {
      verdict = {};
      continue;
    }
    return verdict;
  }
  return bonus_from_logits(w, target, gamma, vocab, stream, out, scratch);
}

/// The logits of a checked entry's chain, named as its arguments.
template <class T>
ChainLogitRows<T> chain_logit_rows(std::span<const T> target_logits, std::span<const T> draft_logits,
                                   std::span<const Token> draft_tokens, std::int64_t vocab) {
  return {.target = {target_logits.data(), vocab, "target_logits", 0},
          .draft = {draft_logits.data(), vocab, "draft_logits", 0},
          .tokens = draft_tokens.data(),
          .length = static_cast<std::int64_t>(draft_tokens.size()),
          .vocab = vocab};
}

/// The checks verify_chain_logits makes before it walks: the vocabulary, the warp, shapes and
/// token ids. Rows are checked as the walk reaches them.
template <class T>
void check_chain_logits_shapes(const Warp& warp, std::span<const T> target_logits,
                               std::span<const T> draft_logits,
                               std::span<const Token> draft_tokens, std::int64_t vocab,
                               std::size_t out_size) {
  if (vocab < 1) fail("vocab", "{} must be >= 1", vocab);
  warp.validate(vocab);
  const auto length = draft_tokens.size();
  const auto v = static_cast<std::size_t>(vocab);
  check_size("target_logits", target_logits.size(),
             checked_mul<std::size_t>("vocab", length + 1, v));
  check_size("draft_logits", draft_logits.size(), length * v);
  if (out_size < length + 1) fail("out", "has {} entries, needs L + 1 = {}", out_size, length + 1);
  for (std::size_t i = 0; i < length; ++i) {
    check_token(ArgName("draft_tokens", static_cast<std::int64_t>(i)), draft_tokens[i], vocab);
  }
}

}  // namespace specdec::detail

namespace specdec {

/// Bytes of Workspace verify_chain_logits takes for rows of `vocab` (and of the scratch the
/// unchecked form needs).
inline std::size_t verify_chain_logits_workspace_size(std::int64_t vocab) {
  return detail::chain_logits_scratch_size(std::max<std::int64_t>(vocab, 1));
}

/// verify_chain with the Rejection rule on the rows `warp` makes of logits, without writing them:
/// the same tokens, draws and verdict as warping every row (warp_logits) and calling
/// verify_chain(Rejection{}, ...). Layout as verify_chain's, of logits: `target_logits` holds
/// L + 1 rows of `vocab` (row L gives the bonus token), `draft_logits` L rows (the rows the draft
/// tokens were drawn from after the same warp). Each row is reduced to the statistics of its
/// warp; p(x) and q(x) are computed at the drafted tokens only, and a row is written (or drawn
/// from a block at a time) only for the residual at a rejection or the bonus token. T = float,
/// or Eigen::half / Eigen::bfloat16 with <Eigen/Core> included.
/// Throws specdec::Error naming the bad argument (vocab, a field of the warp, target_logits,
/// draft_logits, draft_tokens[i], out); rows are checked as the walk reaches them (rows after the
/// first rejection are never read).
template <class T = float>
ChainVerdict verify_chain_logits(const Warp& warp,
                                 std::type_identity_t<std::span<const T>> target_logits,
                                 std::type_identity_t<std::span<const T>> draft_logits,
                                 std::span<const Token> draft_tokens, std::int64_t vocab,
                                 const RandomStream& stream, std::span<Token> out, Workspace& ws) {
  detail::check_chain_logits_shapes<T>(warp, target_logits, draft_logits, draft_tokens, vocab,
                                       out.size());
  auto scope = ws.scope();
  auto bytes = ws.take<std::byte>(detail::chain_logits_scratch_size(vocab));
  return detail::verify_chain_logits_unchecked<T>(
      warp, detail::chain_logit_rows<T>(target_logits, draft_logits, draft_tokens, vocab), stream,
      out.data(), "draft_tokens", detail::chain_logits_scratch(bytes.data(), vocab));
}

}  // namespace specdec
