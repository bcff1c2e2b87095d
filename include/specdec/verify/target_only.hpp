// SPDX-License-Identifier: MIT
// Verification of drafts that come without draft rows (n-gram and prompt-lookup copies, EAGLE,
// Medusa and MTP top-k children; docs/algorithms.md §1.9): each draft token counts as drawn from
// a point mass on itself, so only the target rows are read.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/verify/chain.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec {
namespace detail {

/// Tries `count` candidates in order against the warped `target` row: candidate k is accepted iff
/// u_k * mass_k < p_k(x_k), where p_k is the target with the candidates rejected so far removed
/// (their entries zeroed, not renormalised) and mass_k its mass (1 until the first rejection, so
/// accepting the first candidate reads one entry). All rejected: the correction is drawn from
/// p_(count+1). Equivalently: draw y from the target and accept the first candidate equal to y,
/// else emit y; a repeated candidate has no mass left and is never accepted. A removal that would
/// leave less than the residual floor keeps the current row (only rounding can cause it).
/// Draws: draw k tests candidate k, draw `count` draws the correction. `scratch` holds `vocab`
/// floats.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict target_only_row(const T* target, std::int64_t vocab,
                                                const Token* candidates, std::int32_t count,
                                                const U& uniforms, float* scratch) {
  bool materialised = false;  // scratch holds p_k once true
  double mass = 1.0;          // mass of p_k
  for (std::int32_t k = 0; k < count; ++k) {
    const Token x = candidates[k];
    const float px = materialised ? scratch[x] : to_float(target[x]);
    if (accepts(uniforms.uniform(static_cast<std::uint32_t>(k)), 1.0f, static_cast<float>(mass),
                px)) {
      return {k, x};
    }
    if (!materialised) {
      mass = copy_row(target, vocab, scratch);
      materialised = true;
    }
    const double rest = mass - static_cast<double>(scratch[x]);
    if (rest >= kResidualFloor) {
      scratch[x] = 0.0f;
      mass = rest;
    }
  }
  const float u = uniforms.uniform(static_cast<std::uint32_t>(count));
  return {-1, materialised ? sample_row(scratch, vocab, u) : sample_row(target, vocab, u)};
}

/// The checks verify_chain_target_only makes before it walks: shapes and token ids (a -1
/// placeholder is reported, never used as an index). Rows are checked as the walk reaches them.
template <class T>
void check_target_only_chain(std::span<const T> target_rows, std::span<const Token> draft_tokens,
                             std::int64_t vocab, std::size_t out_size) {
  if (vocab < 1) detail::fail("vocab", "{} must be >= 1", vocab);
  const auto length = draft_tokens.size();
  detail::check_size(
      "target_rows", target_rows.size(),
      detail::checked_mul<std::size_t>("vocab", length + 1, static_cast<std::size_t>(vocab)));
  if (out_size < length + 1) {
    detail::fail("out", "has {} entries, needs L + 1 = {}", out_size, length + 1);
  }
  for (std::size_t i = 0; i < length; ++i) {
    detail::check_token(ArgName("draft_tokens", static_cast<std::int64_t>(i)), draft_tokens[i],
                        vocab);
  }
}

/// The row checks of a target-only chain: check(i) checks target row i as the walk reaches it.
template <class T>
struct TargetRowChecks {
  std::span<const T> target_rows;
  std::size_t vocab;
  void operator()(std::size_t i) const {
    check_probability_row<T>(ArgName("target_rows", static_cast<std::int64_t>(i)),
                             target_rows.subspan(i * vocab, vocab));
  }
};

/// verify_chain_target_only without validation: `length` draft tokens, (length + 1) * vocab target
/// entries, `out` length + 1 tokens, `scratch` vocab floats. Same draws as the checked call.
template <class T, class Check = NoRowChecks>
ChainVerdict verify_chain_target_only_unchecked(const T* target_rows, const Token* draft_tokens,
                                                std::size_t length, std::int64_t vocab,
                                                const RandomStream& stream, Token* out,
                                                float* scratch, const Check& check = {}) {
  const auto v = static_cast<std::size_t>(vocab);
  const auto verify = [&](std::size_t i, const RandomStream& s) {
    return target_only_row(target_rows + i * v, vocab, &draft_tokens[i], 1, s, scratch);
  };
  const auto bonus = [&](const RandomStream& s) {
    return detail::sample_row(target_rows + length * v, vocab, s.uniform(0));
  };
  return walk_chain(length, stream, out, check, verify, bonus);
}

/// The checks verify_tree_target_only makes: the tree (check_tree_structure) and every target row.
/// `depth` and `children` are scratch of N + 1 entries each.
template <class T>
void check_target_only_tree(TreeView tree, std::span<const T> target_rows, std::int64_t vocab,
                            std::size_t accepted_size, std::int32_t* depth,
                            std::int32_t* children) {
  const auto rows_size = check_tree_structure(tree, vocab, accepted_size, depth, children);
  detail::check_size("target_rows", target_rows.size(), rows_size);
  const auto v = static_cast<std::size_t>(vocab);
  for (std::size_t r = 0; r <= tree.tokens.size(); ++r) {
    check_probability_row<T>(ArgName("target_rows", static_cast<std::int64_t>(r)),
                             target_rows.subspan(r * v, v));
  }
}

/// The checked preamble of the target-only tree entries (checked_tree_buffers with
/// check_target_only_tree), with `vocab` floats of scratch unless `with_scratch` is false.
template <class T>
TreeBuffers checked_target_only_tree(Workspace& ws, TreeView tree, std::span<const T> target_rows,
                                     std::int64_t vocab, std::span<std::int32_t> accepted_nodes,
                                     bool with_scratch = true) {
  return checked_tree_buffers(
      ws, tree, accepted_nodes, with_scratch ? static_cast<std::size_t>(vocab) : 0,
      [&](std::int32_t* depth, std::int32_t* children) {
        check_target_only_tree<T>(tree, target_rows, vocab, accepted_nodes.size(), depth,
                                  children);
      });
}

/// verify_tree_target_only's walk without validation (same draws): `rows.target` holds N + 1
/// rows (no draft rows are read), `buffers` as TreeBuffers documents.
template <class T>
TreeVerdict verify_tree_target_only_unchecked(TreeView tree, const TreeRows<T>& rows,
                                              const RandomStream& stream,
                                              const TreeBuffers& buffers) {
  const auto v = static_cast<std::size_t>(rows.vocab);
  const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                          const RandomStream& s) {
    return target_only_row(rows.target + row * v, rows.vocab, children, count, s, buffers.scratch);
  };
  const auto bonus = [&](std::size_t row, const RandomStream& s) {
    return detail::sample_row(rows.target + row * v, rows.vocab, s.uniform(0));
  };
  return walk_tree(tree, stream, buffers.accepted_nodes, buffers.candidates, buffers.ids, verify,
                   bonus);
}

}  // namespace detail

/// Verifies `candidates` (1 to 2^20, repeats allowed) that come without a draft row against the
/// warped `target` row, trying them in order: the output is exactly distributed as the target
/// (target_only_row documents the test and the draws). Throws specdec::Error naming the bad
/// argument.
template <class T = float, UniformSource U>
NodeVerdict verify_target_only(std::type_identity_t<std::span<const T>> target,
                               std::span<const Token> candidates, const U& uniforms,
                               Workspace& ws) {
  check_probability_row<T>("target", target);
  detail::check_count("candidates", candidates.size(), 1, std::size_t{1} << 20);
  detail::check_tokens("candidates", candidates, static_cast<std::int64_t>(target.size()));
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  return detail::target_only_row(target.data(), static_cast<std::int64_t>(target.size()),
                                 candidates.data(), static_cast<std::int32_t>(candidates.size()),
                                 uniforms, scratch.data());
}

/// Verifies L draft tokens that come without draft rows (n-gram copies, top-1 draft heads),
/// position by position: draft token x at position i is accepted iff u < p_i(x); the first
/// rejection emits a token drawn from p_i with x removed (renormalised); when all pass, a bonus
/// token is drawn from p_L. Lossless: the emitted tokens are distributed as the target's.
/// `target_rows` holds L + 1 warped rows of `vocab` (row i = the target after the first i draft
/// tokens). Writes the accepted tokens then the correction or bonus token into `out` (>= L + 1
/// entries). Randomness as verify_chain's: position i uses
/// `stream.at_position(stream.position + i)` (draw 0 the test, draw 1 the correction), the bonus
/// token is draw 0 at position + L. Throws specdec::Error naming the bad argument; rows are
/// checked as the walk reaches them (rows after the first rejection are never read).
template <class T = float>
ChainVerdict verify_chain_target_only(std::type_identity_t<std::span<const T>> target_rows,
                                      std::span<const Token> draft_tokens, std::int64_t vocab,
                                      const RandomStream& stream, std::span<Token> out,
                                      Workspace& ws) {
  detail::check_target_only_chain<T>(target_rows, draft_tokens, vocab, out.size());
  auto scope = ws.scope();
  auto scratch = ws.take<float>(static_cast<std::size_t>(vocab));
  const detail::TargetRowChecks<T> check{target_rows, static_cast<std::size_t>(vocab)};
  return detail::verify_chain_target_only_unchecked<T>(target_rows.data(), draft_tokens.data(),
                                                       draft_tokens.size(), vocab, stream,
                                                       out.data(), scratch.data(), check);
}

/// Walks a candidate tree that comes without draft rows (EAGLE or MTP top-k children, Medusa's
/// Cartesian trees, several n-gram continuations): at the current node its children are tried in
/// stored (level) order with verify_target_only's rule (equivalently: draw y from the target at
/// that node and descend to the first child whose token is y), so the output is the target's for
/// any tree, repeated sibling tokens included (a repeat is never taken). All rejected: the
/// correction is drawn from the target with the children's tokens removed; a node without children
/// ends the walk with a bonus token drawn from its row. `tree` and `accepted_nodes` as verify_tree
/// takes them; `target_rows` holds N + 1 warped rows (row 0 = the root, row i + 1 = after node i).
/// Randomness as verify_tree's (node id + 1's stream: draw k tests child k, draw K corrects; the
/// bonus is draw 0 of the leaf's). Throws specdec::Error naming the bad argument.
template <class T = float>
TreeVerdict verify_tree_target_only(TreeView tree,
                                    std::type_identity_t<std::span<const T>> target_rows,
                                    std::int64_t vocab, const RandomStream& stream,
                                    std::span<std::int32_t> accepted_nodes, Workspace& ws) {
  auto scope = ws.scope();
  const TreeBuffers buffers =
      detail::checked_target_only_tree<T>(ws, tree, target_rows, vocab, accepted_nodes);
  return detail::verify_tree_target_only_unchecked<T>(
      tree, TreeRows<T>{.target = target_rows.data(), .vocab = vocab}, stream, buffers);
}

}  // namespace specdec
