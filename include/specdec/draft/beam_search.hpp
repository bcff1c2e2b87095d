// SPDX-License-Identifier: MIT
// Beam search and beam sampling over a draft model (MTAD): the best draft sequence and its prefix
// joint log probabilities.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"

namespace specdec {

/// The sequence a beam search returns.
struct BeamSearchResult {
  std::vector<Token> tokens;            // the best sequence, `length` tokens (fewer if cut short)
  std::vector<float> prefix_log_probs;  // Q_i: draft log probability of tokens[0..i] (joint)
  std::vector<std::int32_t> nodes;      // the node of each token in the search tree
};

/// How beam_search picks each level's beams among all W x V extensions.
enum class BeamMode {
  kDeterministic,  // the W extensions of highest joint probability (ties: lower parent, token)
  kSampling,       // W extensions sampled without replacement from norm(joint probabilities)
};

/// What beam_search searches: `width` beams kept per level, `length` levels, picked by `mode`.
struct BeamSearchShape {
  std::int32_t width = 1;
  std::int32_t length = 1;
  BeamMode mode = BeamMode::kDeterministic;
};

/// Scratch bytes beam_search needs.
inline std::size_t beam_search_workspace_size(std::int32_t width, std::int64_t vocab) {
  return rsd_s_workspace_size(width, vocab);
}

/// Beam search (or beam sampling) of `length` tokens over the draft model behind `draft_rows`
/// (seed 002 §2.1; docs/algorithms.md §3.5). Starting from the root, each level scores every extension
/// (beam k, token x) by its joint log probability phi_k + log draft(x | beam k) and keeps `width`
/// of them: the best (kDeterministic) or a sample without replacement proportional to the joint
/// probabilities (kSampling, by Gumbel-top-k on the joint log probabilities). Zero-probability
/// tokens are never kept. `search` receives every beam node (level order, each level sorted by its
/// ranking value, rows of expanded nodes stored as in DraftedTree; `log_probs` = joint log
/// probability, `scores` = ranking value), and `best` the final beam of highest joint probability
/// with Q_i = log draft(tokens[0..i]).
/// Draws (kSampling only): node n's extensions (kRootNode = the root) use
/// `stream.at_node(n + 1)`, uniform x perturbing token x; kDeterministic draws nothing.
/// Throws specdec::Error for width < 1, length < 1, too many nodes or an invalid draft row.
template <DraftRowFunction F>
void beam_search(const BeamSearchShape& shape, std::int64_t vocab, F&& draft_rows,
                 const RandomStream& stream, DraftedTree& search, BeamSearchResult& best,
                 Workspace& workspace) {
  const auto [width, length, mode] = shape;
  detail::start_beam_tree(search, vocab, width, length, "length");
  const auto w = static_cast<std::size_t>(width);
  {
    auto scope = workspace.scope();
    const auto gumbel = detail::take_gumbel_top_k_scratch(workspace, vocab);
    auto nodes = workspace.take<std::int32_t>(w);
    auto candidates = workspace.take<detail::BeamCandidate>(w * w);

    std::int32_t begin = 0, end = 0;
    for (std::int32_t level = 0; level < length; ++level) {
      const auto rows =
          detail::request_level_rows(search, draft_rows, level == 0, begin, end, nodes);
      const auto count = static_cast<std::size_t>(rows.rows);
      std::size_t m = 0;
      for (std::size_t i = 0; i < count; ++i) {
        const auto parent = nodes[i];
        const double phi = search.path_log_prob(parent);
        const float* row = rows.row_data(static_cast<std::int64_t>(i));
        if (mode == BeamMode::kSampling) {
          detail::perturb_row_host<RowKind::kProbabilities>(
              row, vocab, stream.at_node(static_cast<std::uint32_t>(parent + 1)), 0,
              gumbel.perturbed);
        } else {
          for (std::int64_t x = 0; x < vocab; ++x) {
            gumbel.perturbed[static_cast<std::size_t>(x)] =
                row[x] > 0.0f ? std::log(row[x]) : kNegInf;
          }
        }
        // Only a beam's own top `width` extensions can enter the level's top `width`.
        const auto got = detail::select_top_k_of_row(gumbel.perturbed, vocab, width, gumbel.index);
        for (std::int64_t j = 0; j < got; ++j) {
          const auto t = gumbel.index[static_cast<std::size_t>(j)];
          const double log_prob = phi + std::log(static_cast<double>(row[t]));
          candidates[m++] = {phi + gumbel.perturbed[static_cast<std::size_t>(t)],
                             static_cast<float>(log_prob), parent, static_cast<Token>(t), 0};
        }
      }
      const auto kept = detail::keep_best(candidates.first(m), w);
      begin = search.size();
      for (std::size_t j = 0; j < kept; ++j) {
        const auto& c = candidates[j];
        search.add(c.token, c.parent, c.log_prob, static_cast<float>(c.score));
      }
      end = search.size();
    }
  }
  // The best final beam: highest joint log probability, ties to the earlier node.
  std::int32_t best_node = -1;
  const auto last_depth = search.tree.max_depth();
  for (std::int32_t n = 0; n < search.size(); ++n) {
    if (search.tree.depths[static_cast<std::size_t>(n)] != last_depth) continue;
    if (best_node < 0 || search.log_probs[static_cast<std::size_t>(n)] >
                             search.log_probs[static_cast<std::size_t>(best_node)]) {
      best_node = n;
    }
  }
  const auto d = static_cast<std::size_t>(last_depth);
  best.tokens.resize(d);
  best.prefix_log_probs.resize(d);
  best.nodes.resize(d);
  for (auto n = best_node; n >= 0; n = search.tree.parents[static_cast<std::size_t>(n)]) {
    const auto at = static_cast<std::size_t>(search.tree.depths[static_cast<std::size_t>(n)] - 1);
    best.tokens[at] = search.tree.tokens[static_cast<std::size_t>(n)];
    best.prefix_log_probs[at] = search.log_probs[static_cast<std::size_t>(n)];
    best.nodes[at] = n;
  }
}

}  // namespace specdec
