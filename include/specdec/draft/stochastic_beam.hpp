// SPDX-License-Identifier: MIT
// RSD-S: stochastic beam search (Kool et al. 2019) over a draft model, with the numerically stable
// truncated-Gumbel update, producing a draft tree whose sibling sets are samples without
// replacement from their parent's draft row.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/drafting_rows.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/gumbel_topk.hpp"

namespace specdec {

namespace detail {

/// Keeps the `keep` best candidates at the front, sorted by score decreasing (ties: lower parent
/// id, then lower token).
inline std::size_t keep_best(std::span<BeamCandidate> c, std::size_t keep) {
  const auto k = std::min(keep, c.size());
  std::partial_sort(
      c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(),
      [](const BeamCandidate& a, const BeamCandidate& b) { return beam_ranks_before(a, b); });
  return k;
}

/// The live beams of one stochastic-beam-search level: beam i < count is tree node nodes[i]
/// (kRootNode = the root) with path log probability phis[i] and truncated perturbed value
/// psis[i].
struct BeamLevel {
  std::size_t count = 0;
  const std::int32_t* nodes = nullptr;
  const float* phis = nullptr;
  const float* psis = nullptr;
};

/// One stochastic-beam-search level over `beams`: beam i draws its top-`width` children by
/// Gumbel-top-k on its warped draft row row_at(i) with `stream.at_node(nodes[i] + 1)` (uniform x
/// perturbs token x); g = phi + log draft(x) + Gumbel, Z = max g, psi' = truncated_gumbel(psi, g,
/// Z). The `width` best extensions by psi' are left at the front of `candidates` (sorted, ties to
/// the lower parent index then token) and their number returned; `parent` is the beam index i.
/// Scratch: `gumbel` over `vocab` entries with `width` tokens and values (values required),
/// `candidates` count * width.
template <class RowAt>
std::size_t stochastic_beam_level(const BeamLevel& beams, const RowAt& row_at, std::int32_t width,
                                  std::int64_t vocab, const RandomStream& stream,
                                  const GumbelTopKBuffers& gumbel, BeamCandidate* candidates) {
  std::size_t m = 0;
  for (std::size_t i = 0; i < beams.count; ++i) {
    const double phi = beams.phis[i];
    const double psi = beams.psis[i];
    const float* row = row_at(i);
    const auto got = gumbel_top_k_row<RowKind::kProbabilities>(
        row, vocab, width, stream.at_node(static_cast<std::uint32_t>(beams.nodes[i] + 1)), 0,
        gumbel);
    for (std::int64_t j = 0; j < got; ++j) {
      const auto t = gumbel.tokens[static_cast<std::size_t>(j)];
      candidates[m++] = beam_candidate(phi, psi, gumbel.values[0],
                                       gumbel.values[static_cast<std::size_t>(j)], row[t],
                                       static_cast<std::int32_t>(i), t);
    }
  }
  return keep_best(std::span<BeamCandidate>(candidates, m), static_cast<std::size_t>(width));
}

}  // namespace detail

/// Scratch bytes draft_rsd_s needs for beam width `width` over `vocab` tokens.
inline std::size_t rsd_s_workspace_size(std::int32_t width, std::int64_t vocab) {
  const auto w = static_cast<std::size_t>(std::max(width, 1));
  return gumbel_top_k_workspace_size(vocab) + Workspace::round_up(w * sizeof(std::int32_t)) +
         Workspace::round_up(w * sizeof(Token)) + Workspace::round_up(w * sizeof(float)) +
         Workspace::round_up(w * w * sizeof(detail::BeamCandidate)) +
         2 * Workspace::round_up(w * sizeof(float));
}

/// Builds an RSD-S tree by stochastic beam search (seed 000 Alg. 8-9 with the fix of
/// docs/algorithms.md §3.4): beam width `width`, `depth` levels. Every beam node k carries its path
/// log probability phi_k and truncated perturbed value psi_k (root: 0, 0). Each level, every beam
/// node draws its top-`width` children by Gumbel-top-k on its draft row (only those can enter the
/// global top `width`), g = phi_k + log draft(x) + Gumbel, Z_k = max g, and
/// psi' = truncated_gumbel(psi_k, g, Z_k); the `width` extensions with the largest psi' (not g)
/// form the next level, sorted by psi' decreasing. Siblings therefore appear in their sampling
/// order, and the children of one parent are a sample without replacement from its draft row
/// (Theorem 3.2), which is what recursive rejection sampling verifies.
/// `out.log_probs` = phi, `out.scores` = psi. Levels have at most `width` nodes (fewer when the
/// rows have too few non-zero tokens); the last level's nodes are W distinct sequences.
/// Draws: node n's children (kRootNode = the root) use `stream.at_node(n + 1)`, uniform x
/// perturbing token x. Throws specdec::Error for width < 1, depth < 1, too many nodes or an
/// invalid draft row.
template <DraftRowFunction F>
void draft_rsd_s(std::int32_t width, std::int32_t depth, std::int64_t vocab, F&& draft_rows,
                 const RandomStream& stream, DraftedTree& out, Workspace& workspace) {
  detail::start_beam_tree(out, vocab, width, depth, "depth");
  const auto w = static_cast<std::size_t>(width);
  auto scope = workspace.scope();
  auto gumbel = detail::take_gumbel_top_k_scratch(workspace, vocab);
  auto nodes = workspace.take<std::int32_t>(w);
  gumbel.tokens = workspace.take<Token>(w).data();
  gumbel.values = workspace.take<float>(w).data();
  auto candidates = workspace.take<detail::BeamCandidate>(w * w);
  auto phis = workspace.take<float>(w);
  auto psis = workspace.take<float>(w);

  std::int32_t begin = 0, end = 0;
  for (std::int32_t level = 0; level < depth; ++level) {
    const auto rows = detail::request_level_rows(out, draft_rows, level == 0, begin, end, nodes);
    const auto count = static_cast<std::size_t>(rows.rows);
    for (std::size_t i = 0; i < count; ++i) {
      phis[i] = out.path_log_prob(nodes[i]);
      psis[i] = nodes[i] < 0 ? 0.0f : out.scores[static_cast<std::size_t>(nodes[i])];
    }
    const auto kept = detail::stochastic_beam_level(
        {count, nodes.data(), phis.data(), psis.data()},
        [&](std::size_t i) { return rows.row_data(static_cast<std::int64_t>(i)); }, width, vocab,
        stream, gumbel, candidates.data());
    begin = out.size();
    for (std::size_t j = 0; j < kept; ++j) {
      const auto& c = candidates[j];
      out.add(c.token, nodes[static_cast<std::size_t>(c.parent)], c.log_prob,
              static_cast<float>(c.score));
    }
    end = out.size();
  }
}

}  // namespace specdec
