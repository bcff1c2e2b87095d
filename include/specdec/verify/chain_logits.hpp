// SPDX-License-Identifier: MIT
// One sequence's chain verification straight from logits, with standard rejection sampling: the
// same verdict and tokens as warping every row (warp_logits) and calling verify_chain, but each
// row is reduced to its statistics (core/warp_stats.hpp) and p(x), q(x) are recomputed at the
// drafted tokens only. Whole rows are written only where the rule reads them: the target and draft
// rows at the first rejection (the residual) or the target row after full acceptance (the bonus),
// and not even those when the warp cuts (top-k, top-p, min-p): the residual and the bonus row are
// then positive only at the target's candidates, and are summed and drawn from there as the
// written rows would be. Rows after the first rejection are never read.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/core/validate.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/warp_stats.hpp"
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

/// A row of logits in a matrix: `rows` points at row 0 of the sequence, `stride` elements apart;
/// `first` is row 0's index in the matrix named `name` (for error messages).
template <class T>
struct LogitRows {
  const T* rows;
  std::int64_t stride;
  std::string_view name;
  std::int64_t first;
  const T* row(std::int64_t i) const { return rows + i * stride; }
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

/// verify_chain(Rejection{}) of `gamma` draft tokens (already checked to lie in the vocabulary)
/// against warp `w` of target rows 0..gamma and draft rows 0..gamma-1, from logits. Same draws as
/// verify_chain. A drafted token of warped draft probability 0 is reported as
/// `token_name[i]`; a bad logit row by its name and index.
template <class T>
ChainVerdict verify_chain_logits_unchecked(const Warp& w, const LogitRows<T>& target,
                                           const LogitRows<T>& draft, const Token* tokens,
                                           std::int64_t gamma, std::int64_t vocab,
                                           const RandomStream& stream, Token* out,
                                           const ArgName& token_name,
                                           const ChainLogitsScratch& scratch) {
  ChainVerdict verdict;
  // A warp cutting by top-p or not at all: each row is first read once with rough exponentials,
  // which bound p(x) and q(x) closely enough to accept most tokens; the rest (and every
  // rejection) are decided on the exact statistics.
  const bool rough = roughly_bounded(w, vocab);
  for (std::int64_t i = 0; i < gamma; ++i) {
    const Token x = tokens[i];
    if (rough) {
      const float draft_logit = to_float(draft.row(i)[x]), target_logit = to_float(target.row(i)[x]);
      const RoughRow d = rough_row(w, draft.row(i), vocab, draft_logit, scratch.draft_tiles);
      const RoughRow t =
          rough_row(w, target.row(i), vocab, target_logit, warp_scratch(scratch.warp, vocab).tiles);
      if (!d.invalid && !t.invalid) {
        const ProbabilityBounds q = warped_probability_bounds(d, w.top_p, draft_logit);
        const ProbabilityBounds p = warped_probability_bounds(t, w.top_p, target_logit);
        const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
        if (q.lo > 0.0f && p.lo > 0.0f && detail::accepts(s.uniform(0), q.hi, 1.0f, p.lo)) {
          out[i] = x;
          continue;
        }
      }
    }
    // The draft row first, so the target's candidates stay in the scratch for a rejection; a
    // bad target row is still reported before a bad draft row.
    std::int64_t support = -1;
    bool draft_invalid = false;
    const WarpStats draft_stats =
        warp_stats(w, draft.row(i), vocab, warp_scratch(scratch.warp, vocab), draft_invalid);
    const WarpStats target_stats = checked_warp_stats(w, target, i, vocab, scratch.warp, &support);
    if (draft_invalid) checked_warp_stats(w, draft, i, vocab, scratch.warp);
    const float qx = warped_probability(draft_stats, to_float(draft.row(i)[x]), x);
    if (!(qx > 0.0f)) fail(token_name[i], "token {} has draft probability 0", x);
    const float px = warped_probability(target_stats, to_float(target.row(i)[x]), x);
    const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    // multi_round_row's test for one candidate (mass 1).
    if (detail::accepts(s.uniform(0), qx, 1.0f, px)) {
      out[i] = x;
      continue;
    }
    if (support >= 0) {
      // A cut target row: the residual is positive only where the row keeps an entry.
      const WarpScratch ws = warp_scratch(scratch.warp, vocab);
      const std::int64_t kept = kept_candidates(target_stats, target.row(i), ws, support,
                                                ws.bucket, scratch.target_row);
      for (std::int64_t j = 0; j < kept; ++j) {
        const std::int32_t id = ws.bucket[j];
        scratch.draft_row[j] = warped_probability(draft_stats, to_float(draft.row(i)[id]), id);
      }
      out[i] = rejection_correction_sparse(ws.bucket, scratch.target_row, scratch.draft_row, kept,
                                           vocab, s, scratch.residual);
      verdict.accepted = static_cast<std::int32_t>(i);
      verdict.emitted = verdict.accepted + 1;
      return verdict;
    }
    if (vocab >= kFilledRowMin && target_stats.greedy < 0 && draft_stats.greedy < 0) {
      // Neither row is cut: the residual [p - q]+ is computed a span at a time, never written
      // (p and q in the first two scratch rows, the span and the block sums in the third).
      const T* target_logits = target.row(i);
      const T* draft_logits = draft.row(i);
      const auto residual = [&](std::int64_t b, std::int64_t e, float* out_span) {
        write_warped_row(target_stats, target_logits + b, e - b, scratch.target_row);
        write_warped_row(draft_stats, draft_logits + b, e - b, scratch.draft_row);
        for (std::int64_t j = 0; j < e - b; ++j) {
          out_span[j] = scaled_residual(scratch.target_row[j], 1.0f, scratch.draft_row[j]);
        }
      };
      const auto target_only = [&](std::int64_t b, std::int64_t e, float* out_span) {
        write_warped_row(target_stats, target_logits + b, e - b, out_span);
      };
      float* sums = scratch.residual + kFilledSpan;
      out[i] = rejection_correction_filled(FilledRow{residual, vocab, scratch.residual, sums},
                                           FilledRow{target_only, vocab, scratch.residual, sums}, s);
      verdict.accepted = static_cast<std::int32_t>(i);
      verdict.emitted = verdict.accepted + 1;
      return verdict;
    }
    // The residual needs both rows: write them and let the rule's kernel decide on them.
    write_warped_row(target_stats, target.row(i), vocab, scratch.target_row);
    write_warped_row(draft_stats, draft.row(i), vocab, scratch.draft_row);
    const NodeVerdict node =
        rejection_row(scratch.target_row, scratch.draft_row, vocab, x, s, scratch.residual);
    out[i] = node.token;
    if (node.accepted >= 0) continue;
    verdict.accepted = static_cast<std::int32_t>(i);
    verdict.emitted = verdict.accepted + 1;
    return verdict;
  }
  std::int64_t support = -1;
  const WarpStats bonus = checked_warp_stats(w, target, gamma, vocab, scratch.warp, &support);
  const auto s = stream.at_position(stream.position + static_cast<std::uint32_t>(gamma));
  if (support >= 0) {
    // A cut row: the bonus token is drawn from the entries it keeps, as sample_row would draw it
    // from the written row.
    const WarpScratch ws = warp_scratch(scratch.warp, vocab);
    const std::int64_t kept =
        kept_candidates(bonus, target.row(gamma), ws, support, ws.bucket, scratch.target_row);
    out[gamma] = SparseRow{ws.bucket, scratch.target_row, kept, vocab}.sample(s.uniform(0));
  } else if (bonus.greedy >= 0) {
    out[gamma] = static_cast<Token>(bonus.greedy);  // sample_row on a one-hot row
  } else if (vocab >= kFilledRowMin) {
    // Drawn from the row computed a block at a time, never written.
    const T* logits = target.row(gamma);
    const FilledRow row{[&](std::int64_t b, std::int64_t e, float* block) {
                          write_warped_row(bonus, logits + b, e - b, block);
                        },
                        vocab, scratch.target_row, scratch.target_row + kFilledSpan};
    out[gamma] = row.sample(s.uniform(0), row.sum());
  } else {
    write_warped_row(bonus, target.row(gamma), vocab, scratch.target_row);
    out[gamma] = sample_row(scratch.target_row, vocab, s.uniform(0));
  }
  verdict.accepted = static_cast<std::int32_t>(gamma);
  verdict.emitted = verdict.accepted + 1;
  return verdict;
}

}  // namespace specdec::detail
