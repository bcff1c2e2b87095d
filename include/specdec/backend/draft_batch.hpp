// SPDX-License-Identifier: MIT
// Batched drafting: Gumbel-top-k over B rows and one stochastic-beam-search level for B
// sequences of beams, on any backend.
#pragma once

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/shapes.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/draft/gumbel_topk.hpp"

namespace specdec {

/// The views of a batched Gumbel-top-k (gumbel_top_k_batch) over `rows.rows` rows:
///   kind:    kLogWeights (raw or warped log-probabilities or logits, -inf = banned) or
///            kProbabilities (a raw or warped probability row, 0 = banned);
///   rows:    the rows, T = float, Eigen::half or Eigen::bfloat16;
///   k:       samples per row;
///   streams: one RandomStream per row, a Resident array: host memory, or on_device(streams, rows)
///            (then a CUDA call makes no host copy, allocation or synchronisation, so it can be
///            captured in a CUDA graph and replayed with new stream contents; not scanned);
///   tokens:  rows x k samples in sampling order, -1 past counts[r];
///   values:  rows x k perturbed values, -inf past counts[r], or a view with no rows;
///   counts:  one count per row.
template <class T>
struct GumbelTopKBatchArgs {
  RowKind kind = RowKind::kLogWeights;
  MatrixView<const T> rows{};
  std::int64_t k = 0;
  Resident<const RandomStream> streams{};
  MatrixView<Token> tokens{};
  MatrixView<float> values{};
  std::span<std::int32_t> counts{};
};

/// The views of one stochastic-beam-search level for B sequences of up to W live beams
/// (stochastic_beam_level_batch); B x W matrices unless said otherwise:
///   draft_rows:  B W warped draft rows, beam i of sequence b at row b * W + i;
///   beam_counts: B live-beam counts (1 at the root level);
///   nodes:       the tree node of each beam (kRootNode = -1 for the root);
///   log_probs, scores: each beam's path log probability and truncated perturbed value (0 and 0
///                at the root);
///   streams:     B RandomStreams, a Resident array (on the device, a CUDA call makes no host
///                copy, allocation or synchronisation, so it can be captured in a CUDA graph and
///                replayed with new contents; not scanned);
///   next_parents, next_tokens, next_log_probs, next_scores: the W best extensions, best first,
///                padded with -1 / -inf;
///   next_counts: B extension counts.
struct BeamLevelBatchArgs {
  MatrixView<const float> draft_rows{};
  std::span<const std::int32_t> beam_counts{};
  MatrixView<const std::int32_t> nodes{};
  MatrixView<const float> log_probs{};
  MatrixView<const float> scores{};
  Resident<const RandomStream> streams{};
  MatrixView<std::int32_t> next_parents{};
  MatrixView<Token> next_tokens{};
  MatrixView<float> next_log_probs{};
  MatrixView<float> next_scores{};
  std::span<std::int32_t> next_counts{};
};

namespace detail {

template <class Backend>
struct GumbelTopKBatchImpl : NoBackendImpl<Backend> {};
template <class Backend>
struct BeamLevelBatchImpl : NoBackendImpl<Backend> {};

/// The shape checks of gumbel_top_k_batch every backend makes (the rows' contents aside).
template <class T>
void check_gumbel_top_k_batch(const GumbelTopKBatchArgs<T>& args) {
  const std::int64_t rows = args.rows.rows;
  check_matrix("rows", args.rows, {.min_rows = 1});
  check_sample_count("k", args.k, args.rows.cols);
  check_resident("streams", args.streams, static_cast<std::size_t>(rows));
  check_matrix("tokens", args.tokens, {.rows = rows, .cols = args.k, .cols_of = "k"});
  if (args.values.rows != 0)
    check_matrix("values", args.values, {.rows = rows, .cols = args.k, .cols_of = "k"});
  check_size("counts", args.counts.size(), static_cast<std::size_t>(rows));
}

/// The shape checks of stochastic_beam_level_batch every backend makes (beam counts, nodes and
/// rows aside).
inline void check_beam_level_batch(const BeamLevelBatchArgs& args) {
  const std::int64_t batch = args.nodes.rows, width = args.nodes.cols;
  if (batch < 1) fail("nodes", "has {} rows (sequences), expected at least 1", batch);
  if (width < 1) fail("nodes", "has {} columns (beam width), expected at least 1", width);
  check_matrix("draft_rows", args.draft_rows, {.rows = batch * width, .formula = "B W"});
  check_size("beam_counts", args.beam_counts.size(), static_cast<std::size_t>(batch));
  const MatrixShape beams{.rows = batch, .formula = "B", .cols = width, .cols_of = "nodes"};
  check_matrix("nodes", args.nodes, beams);
  check_matrix("log_probs", args.log_probs, beams);
  check_matrix("scores", args.scores, beams);
  check_resident("streams", args.streams, static_cast<std::size_t>(batch));
  check_matrix("next_parents", args.next_parents, beams);
  check_matrix("next_tokens", args.next_tokens, beams);
  check_matrix("next_log_probs", args.next_log_probs, beams);
  check_matrix("next_scores", args.next_scores, beams);
  check_size("next_counts", args.next_counts.size(), static_cast<std::size_t>(batch));
  if (width > args.draft_rows.cols)
    fail("nodes", "beam width {} exceeds the vocabulary ({})", width, args.draft_rows.cols);
}

}  // namespace detail

/// Bytes of workspace gumbel_top_k_batch needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const GumbelTopKBatchShape& shape) {
  return detail::GumbelTopKBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Bytes of workspace stochastic_beam_level_batch needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const BeamLevelBatchShape& shape) {
  return detail::BeamLevelBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Gumbel-top-k on every row (layout: GumbelTopKBatchArgs): row r is gumbel_top_k (kLogWeights)
/// or gumbel_top_k_probabilities (kProbabilities) with `streams[r]` and first draw 0, so uniform x
/// of streams[r] perturbs token x. tokens receives the samples in sampling order, values their
/// perturbed values, counts how many were drawn; entries past counts[r] are -1 / -inf.
/// Rows and outputs live where the backend computes; streams are Resident.
/// Throws specdec::Error naming the bad argument ("rows[3]" for a bad row).
template <backend::BackendPolicy Backend, class T, class Scratch>
void gumbel_top_k_batch(const Backend& backend, const GumbelTopKBatchArgs<T>& args,
                        Scratch&& workspace) {
  detail::GumbelTopKBatchImpl<Backend>::template run<T>(backend, args,
                                                        std::forward<Scratch>(workspace));
}

/// One level of stochastic beam search (the level draft_rsd_s takes) for B sequences of up to W
/// live beams (layout: BeamLevelBatchArgs). Sequence b has beam_counts[b] live beams (1 for the
/// root level); its beam i is tree node nodes(b, i) (kRootNode = -1 for the root) with path log
/// probability log_probs(b, i) and truncated perturbed value scores(b, i) (0 and 0 at the root);
/// its warped draft row is row b * W + i of draft_rows. Each beam draws its top-W children by
/// Gumbel-top-k with `streams[b].at_node(nodes(b, i) + 1)` (uniform x perturbs token x); the W
/// extensions with the largest truncated value are written, best first, to next_parents (the beam
/// index i), next_tokens, next_log_probs and next_scores (B x W each, padded with -1 / -inf past
/// next_counts[b]). Equal to draft_rsd_s level by level. Throws specdec::Error naming the bad
/// argument.
template <backend::BackendPolicy Backend, class Scratch>
void stochastic_beam_level_batch(const Backend& backend, const BeamLevelBatchArgs& args,
                                 Scratch&& workspace) {
  detail::BeamLevelBatchImpl<Backend>::run(backend, args, std::forward<Scratch>(workspace));
}

}  // namespace specdec
