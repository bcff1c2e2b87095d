// SPDX-License-Identifier: MIT
// RSD-C: a draft tree with fixed branching factors, each node's children drawn by Gumbel-top-k
// (sampling without replacement) from its own draft row.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/gumbel_topk.hpp"

namespace specdec {

/// Scratch bytes draft_rsd_c needs (V-sized Gumbel-top-k scratch, the widest level's node ids and
/// b_max tokens and values).
inline std::size_t rsd_c_workspace_size(std::span<const std::int32_t> branching,
                                        std::int64_t vocab) {
  std::int64_t level = 1, widest = 1, b_max = 1;
  for (auto b : branching) {
    level *= std::max<std::int32_t>(b, 1);
    widest = std::max(widest, level);
    b_max = std::max<std::int64_t>(b_max, b);
  }
  const auto w = static_cast<std::size_t>(widest), b = static_cast<std::size_t>(b_max);
  return gumbel_top_k_workspace_size(vocab) + Workspace::round_up(w * sizeof(std::int32_t)) +
         Workspace::round_up(b * sizeof(Token)) + Workspace::round_up(b * sizeof(float));
}

/// Builds an RSD-C tree (seed 000 Alg. 3-4; docs/algorithms.md §3.3): the root gets branching[0]
/// children, each node at depth l gets branching[l] children, each set drawn without replacement
/// by Gumbel-top-k from that node's draft row (fewer when the row has fewer non-zero entries).
/// Rows come from `draft_rows`, one call per level (level order). Depth = branching.size().
/// `out.scores[i]` is node i's perturbed value log draft(token) + Gumbel under its parent.
/// Draws: node n's children (kRootNode = the root) use `stream.at_node(n + 1)`, uniform x
/// perturbing token x. Throws specdec::Error for an empty `branching`, a factor outside
/// [1, V], a tree of more than 2^24 - 2 nodes, or an invalid draft row.
template <DraftRowFunction F>
void draft_rsd_c(std::span<const std::int32_t> branching, std::int64_t vocab, F&& draft_rows,
                 const RandomStream& stream, DraftedTree& out, Workspace& workspace) {
  detail::check_vocab(vocab);
  if (branching.empty()) detail::fail("branching", "is empty: the tree needs depth >= 1");
  std::int64_t level_size = 1, total = 0, widest = 1, b_max = 1;
  for (std::size_t l = 0; l < branching.size(); ++l) {
    if (branching[l] < 1 || branching[l] > vocab) {
      detail::fail(fmt::format("branching[{}]", l), "{} must be in [1, {}] (the vocabulary size)",
                   branching[l], vocab);
    }
    level_size *= branching[l];
    detail::check_node_budget(total += level_size);
    widest = std::max(widest, level_size);
    b_max = std::max<std::int64_t>(b_max, branching[l]);
  }
  out.clear(vocab);
  out.tree.reserve(static_cast<std::size_t>(total));
  auto scope = workspace.scope();
  auto gumbel = detail::take_gumbel_top_k_scratch(workspace, vocab);
  auto nodes = workspace.take<std::int32_t>(static_cast<std::size_t>(widest));
  gumbel.tokens = workspace.take<Token>(static_cast<std::size_t>(b_max)).data();
  gumbel.values = workspace.take<float>(static_cast<std::size_t>(b_max)).data();

  std::int32_t begin = 0, end = 0;  // the level being expanded; the root first
  for (std::size_t l = 0; l < branching.size(); ++l) {
    const auto rows = detail::request_level_rows(out, draft_rows, l == 0, begin, end, nodes);
    const auto count = static_cast<std::size_t>(rows.rows);
    begin = out.size();
    for (std::size_t i = 0; i < count; ++i) {
      const auto parent = nodes[i];
      const float* row = rows.row_data(static_cast<std::int64_t>(i));
      const auto got = detail::gumbel_top_k_row<RowKind::kProbabilities>(
          row, vocab, branching[l], stream.at_node(static_cast<std::uint32_t>(parent + 1)), 0,
          gumbel);
      for (std::int64_t j = 0; j < got; ++j) {
        const auto t = gumbel.tokens[j];
        out.add(t, parent, out.path_log_prob(parent) + std::log(row[t]), gumbel.values[j]);
      }
    }
    end = out.size();
  }
}

}  // namespace specdec
