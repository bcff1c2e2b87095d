// SPDX-License-Identifier: MIT
// Per-run decoding metrics: tokens, calls, target budget, block efficiency, MBSU, acceptance per
// level, wall time; merged across sequences and rendered as a results-table row.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/core/error.hpp"

namespace specdec {

/// What one speculative step reports to the metrics (one target call).
struct StepRecord {
  std::int64_t tree_tokens = 0;     // draft-tree nodes the target scored (0 for autoregressive)
  std::int32_t tree_depth = 0;      // deepest level of the verified tree
  std::int32_t accepted_depth = 0;  // draft tokens accepted (length of the kept path)
  std::int64_t emitted = 0;      // tokens appended to the output (accepted + 1, fewer at the end)
  std::int64_t draft_calls = 0;  // draft-provider calls made to build the tree
};

/// Counters accumulated over a run (one or many sequences). Definitions (docs/algorithms.md §5):
/// - block efficiency eta = tokens_generated / target_calls (tokens per target call);
/// - target budget = tree tokens the target scores per call (total and mean);
/// - MBSU = eta / (L * r + 1) for draft depth L and cost ratio r = draft cost / target cost;
/// - acceptance at depth d = accepted[d-1] / attempted[d-1], where a step *attempts* depth d when
///   its tree reaches depth d and the first d - 1 levels were accepted, and *accepts* it when the
///   kept path reaches depth d.
struct DecodeMetrics {
  std::int64_t sequences = 0;
  std::int64_t tokens_generated = 0;
  std::int64_t target_calls = 0;
  std::int64_t draft_calls = 0;
  std::int64_t target_tree_tokens = 0;
  std::vector<std::int64_t> attempted_per_level;  // index d - 1 for depth d
  std::vector<std::int64_t> accepted_per_level;
  double wall_seconds = 0.0;

  /// Records one target call. Throws specdec::Error naming the field of `step` that is negative
  /// or inconsistent (accepted_depth > tree_depth).
  void record_step(const StepRecord& step) {
    if (step.tree_tokens < 0) detail::fail("step.tree_tokens", "{} must be >= 0", step.tree_tokens);
    if (step.tree_depth < 0) detail::fail("step.tree_depth", "{} must be >= 0", step.tree_depth);
    if (step.accepted_depth < 0 || step.accepted_depth > step.tree_depth) {
      detail::fail("step.accepted_depth", "{} is outside [0, tree_depth = {}]", step.accepted_depth,
                   step.tree_depth);
    }
    if (step.emitted < 0) detail::fail("step.emitted", "{} must be >= 0", step.emitted);
    if (step.draft_calls < 0) detail::fail("step.draft_calls", "{} must be >= 0", step.draft_calls);
    ++target_calls;
    target_tree_tokens += step.tree_tokens;
    tokens_generated += step.emitted;
    draft_calls += step.draft_calls;
    grow_levels(static_cast<std::size_t>(step.tree_depth));
    for (std::int32_t d = 1; d <= step.tree_depth; ++d) {
      if (step.accepted_depth >= d - 1) ++attempted_per_level[static_cast<std::size_t>(d - 1)];
      if (step.accepted_depth >= d) ++accepted_per_level[static_cast<std::size_t>(d - 1)];
    }
  }

  /// Adds another run's counters (another sequence or batch). Wall time adds up too; a batched
  /// run that overlaps sequences should overwrite `wall_seconds` with its own elapsed time.
  void merge(const DecodeMetrics& other) {
    sequences += other.sequences;
    tokens_generated += other.tokens_generated;
    target_calls += other.target_calls;
    draft_calls += other.draft_calls;
    target_tree_tokens += other.target_tree_tokens;
    grow_levels(other.attempted_per_level.size());
    for (std::size_t d = 0; d < other.attempted_per_level.size(); ++d) {
      attempted_per_level[d] += other.attempted_per_level[d];
      accepted_per_level[d] += other.accepted_per_level[d];
    }
    wall_seconds += other.wall_seconds;
  }

  /// eta: mean tokens produced per target call (0 before any call).
  double block_efficiency() const {
    return target_calls == 0
               ? 0.0
               : static_cast<double>(tokens_generated) / static_cast<double>(target_calls);
  }
  /// Mean tree tokens the target scored per call (0 before any call).
  double mean_target_budget() const {
    return target_calls == 0
               ? 0.0
               : static_cast<double>(target_tree_tokens) / static_cast<double>(target_calls);
  }
  /// Mean draft calls per target call (the effective L of a run whose depth varies).
  double mean_draft_calls() const {
    return target_calls == 0 ? 0.0
                             : static_cast<double>(draft_calls) / static_cast<double>(target_calls);
  }
  /// Memory-bound speed-up eta / (depth * cost_ratio + 1). Throws specdec::Error for a negative
  /// `depth` or a negative / non-finite `cost_ratio`.
  double mbsu(double depth, double cost_ratio) const {
    if (!(depth >= 0.0) || !std::isfinite(depth)) detail::fail("depth", "{} must be >= 0", depth);
    if (!(cost_ratio >= 0.0) || !std::isfinite(cost_ratio)) {
      detail::fail("cost_ratio", "{} must be finite and >= 0", cost_ratio);
    }
    return block_efficiency() / (depth * cost_ratio + 1.0);
  }
  /// Acceptance rate at depth `depth` (>= 1); 0 where no step attempted that depth.
  double acceptance_rate(std::int32_t depth) const {
    if (depth < 1) detail::fail("depth", "{} must be >= 1", depth);
    const auto d = static_cast<std::size_t>(depth - 1);
    if (d >= attempted_per_level.size() || attempted_per_level[d] == 0) return 0.0;
    return static_cast<double>(accepted_per_level[d]) / static_cast<double>(attempted_per_level[d]);
  }
  /// Acceptance rates for depths 1 .. levels().
  std::vector<double> acceptance_rates() const {
    std::vector<double> rates(attempted_per_level.size());
    for (std::size_t d = 0; d < rates.size(); ++d) {
      rates[d] = acceptance_rate(static_cast<std::int32_t>(d + 1));
    }
    return rates;
  }
  std::int32_t levels() const { return static_cast<std::int32_t>(attempted_per_level.size()); }

 private:
  void grow_levels(std::size_t n) {
    if (attempted_per_level.size() < n) {
      attempted_per_level.resize(n, 0);
      accepted_per_level.resize(n, 0);
    }
  }
};

/// The header of the table `format_metrics_row` fills (fixed-width columns, no newline).
inline std::string format_metrics_header() {
  return fmt::format("{:<16} {:>5} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8}  {}", "method", "L",
                     "budget", "tokens", "calls", "eta", "MBSU", "wall_s", "accept/level");
}

/// One row of a results table: method, draft depth, mean target budget, tokens, target calls,
/// block efficiency, MBSU at (depth, cost_ratio), wall time, acceptance per level (no newline).
inline std::string format_metrics_row(std::string_view method, const DecodeMetrics& metrics,
                                      std::int32_t depth, double cost_ratio) {
  std::string levels;
  for (auto rate : metrics.acceptance_rates()) {
    levels += fmt::format("{}{:.3f}", levels.empty() ? "" : " ", rate);
  }
  return fmt::format("{:<16} {:>5} {:>8.2f} {:>10} {:>10} {:>8.3f} {:>8.3f} {:>8.3f}  {}", method,
                     depth, metrics.mean_target_budget(), metrics.tokens_generated,
                     metrics.target_calls, metrics.block_efficiency(),
                     metrics.mbsu(depth, cost_ratio), metrics.wall_seconds, levels);
}

}  // namespace specdec
