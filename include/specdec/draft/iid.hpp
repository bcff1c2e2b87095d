// SPDX-License-Identifier: MIT
// I.i.d. drafting: K candidates from one row with replacement, and SpecTr / SpecInfer trees of K
// independent draft sequences.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/drafted_tree.hpp"

namespace specdec {
namespace detail {

/// Row function: k tokens drawn with replacement from the non-negative `weights` (sum `total`),
/// candidate i by inverse CDF with uniform `first_draw + i`. O(k V); zero weights are never drawn.
template <class Source>
SPECDEC_HOST_DEVICE void sample_iid_row(const float* weights, std::int64_t n, float total,
                                        std::int64_t k, const Source& source,
                                        std::uint32_t first_draw, Token* out) {
  for (std::int64_t i = 0; i < k; ++i) {
    const float u = static_cast<float>(source.uniform(first_draw + static_cast<std::uint32_t>(i)));
    out[i] = static_cast<Token>(sample_weights(weights, n, total, u));
  }
}

}  // namespace detail

/// Draws `tokens.size()` candidates i.i.d. (with replacement) from a (raw or warped) probability
/// row. Draws: candidate i uses uniform `first_draw + i`. Throws specdec::Error for an invalid
/// row or an empty `tokens`.
template <UniformSource Source>
void sample_iid(std::span<const float> probabilities, const Source& source, std::span<Token> tokens,
                std::uint32_t first_draw = 0) {
  check_probability_row("probabilities", probabilities);
  if (tokens.empty()) detail::fail("tokens", "is empty: ask for at least one candidate");
  float total = 0.0f;
  for (float p : probabilities) total += p;
  detail::sample_iid_row(probabilities.data(), static_cast<std::int64_t>(probabilities.size()),
                         total, static_cast<std::int64_t>(tokens.size()), source, first_draw,
                         tokens.data());
}

/// SpecTr / SpecInfer drafting: `k` independent draft sequences of `depth` tokens each, sampled
/// from the draft model through `draft_rows`, stored as `k` separate chains (identical prefixes
/// are NOT merged, so the root's children are exactly the k i.i.d. first tokens and each node's
/// child is one draw from that node's row; a multi-draft verifier sees the draws with their
/// multiplicities). Node id of chain c at depth d (1-based) is (d - 1) * k + c; every node except
/// those at depth `depth` has its draft row stored. Prefix deduplication before evaluating the
/// tree is the tree utilities' job.
/// Draws: the children of node n (kRootNode for the root) use `stream.at_node(n + 1)`, child i
/// taking uniform i (so the root's candidates use draws 0..k-1 of node 0).
/// Scratch: k node ids from `workspace`.
/// Throws specdec::Error if k < 1, depth < 1, vocab < 1 or a draft row is invalid.
template <DraftRowFunction F>
void draft_iid_chains(std::int32_t k, std::int32_t depth, std::int64_t vocab, F&& draft_rows,
                      const RandomStream& stream, DraftedTree& out, Workspace& workspace) {
  if (k < 1) detail::fail("k", "{} must be >= 1", k);
  if (depth < 1) detail::fail("depth", "{} must be >= 1", depth);
  detail::check_vocab(vocab);
  detail::check_node_budget(static_cast<std::int64_t>(k) * depth);
  out.clear(vocab);
  out.tree.reserve(static_cast<std::size_t>(k) * static_cast<std::size_t>(depth));
  std::int32_t root = kRootNode;
  auto rows = detail::request_rows(out, draft_rows, std::span<const std::int32_t>(&root, 1));
  for (std::int32_t c = 0; c < k; ++c) {
    const auto row = rows.row(0);
    const Token t = static_cast<Token>(
        detail::sample_weights(row.data(), vocab, detail::row_total(row),
                               stream.at_node(0).uniform(static_cast<std::uint32_t>(c))));
    out.add(t, kRootNode, std::log(row[static_cast<std::size_t>(t)]), 0.0f);
  }
  // Node ids of the level being expanded: reuse one small buffer per call.
  auto scope = workspace.scope();
  auto level = workspace.take<std::int32_t>(static_cast<std::size_t>(k));
  for (std::int32_t d = 1; d < depth; ++d) {
    for (std::int32_t c = 0; c < k; ++c) level[static_cast<std::size_t>(c)] = (d - 1) * k + c;
    rows = detail::request_rows(out, draft_rows, level);
    for (std::int32_t c = 0; c < k; ++c) {
      const auto parent = level[static_cast<std::size_t>(c)];
      const auto row = rows.row(c);
      const Token t = static_cast<Token>(detail::sample_weights(
          row.data(), vocab, detail::row_total(row),
          stream.at_node(static_cast<std::uint32_t>(parent + 1)).uniform(0)));
      out.add(t, parent, out.path_log_prob(parent) + std::log(row[static_cast<std::size_t>(t)]),
              0.0f);
    }
  }
}

}  // namespace specdec
