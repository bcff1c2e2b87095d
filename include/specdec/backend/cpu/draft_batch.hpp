// SPDX-License-Identifier: MIT
// The CPU backend of batched Gumbel-top-k and stochastic-beam-search levels: rows (sequences) in
// parallel on the thread pool, each through the single-row kernels of draft/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/draft_batch.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"

namespace specdec::detail {

inline void check_batch_matrix(std::string_view name, std::int64_t rows, std::int64_t cols,
                               std::int64_t stride, std::int64_t want_rows,
                               std::int64_t want_cols) {
  if (rows != want_rows || cols != want_cols)
    fail(name, "is {} x {}, expected {} x {}", rows, cols, want_rows, want_cols);
  if (stride < cols) fail(name, "stride {} is smaller than its {} columns", stride, cols);
}

template <>
struct GumbelTopKBatchImpl<backend::Cpu> {
  static std::size_t workspace_size(const backend::Cpu& cpu, const GumbelTopKBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.rows, cpu.threads);
    return static_cast<std::size_t>(threads) * gumbel_top_k_workspace_size(shape.vocab);
  }

  template <class T>
  static void run(const backend::Cpu& cpu, RowKind kind, MatrixView<const T> rows, std::int64_t k,
                  std::span<const RandomStream> streams, MatrixView<Token> tokens,
                  MatrixView<float> values, std::span<std::int32_t> counts, Workspace& ws) {
    if (rows.rows < 1) fail("rows", "has {} rows, expected at least 1", rows.rows);
    if (rows.cols < 1) fail("rows", "has {} columns, expected at least 1", rows.cols);
    if (rows.stride < rows.cols)
      fail("rows", "stride {} is smaller than its {} columns", rows.stride, rows.cols);
    check_sample_count("k", k, rows.cols);
    if (streams.size() != static_cast<std::size_t>(rows.rows))
      fail("streams", "has {} entries, expected one per row ({})", streams.size(), rows.rows);
    check_batch_matrix("tokens", tokens.rows, tokens.cols, tokens.stride, rows.rows, k);
    if (values.rows != 0)
      check_batch_matrix("values", values.rows, values.cols, values.stride, rows.rows, k);
    check_size("counts", counts.size(), static_cast<std::size_t>(rows.rows));
    const auto n = static_cast<std::size_t>(rows.cols);
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(rows.rows, cpu.threads);
    auto scope = ws.scope();
    auto perturbed = ws.take<float>(n * static_cast<std::size_t>(threads));
    auto index = ws.take<std::int32_t>(n * static_cast<std::size_t>(threads));
    pool.run(rows.rows, threads, [&](std::int64_t r, int slot) {
      const auto s = static_cast<std::size_t>(slot);
      const ArgName name("rows", r);
      const auto& stream = streams[static_cast<std::size_t>(r)];
      float* vals = values.rows != 0 ? values.row_data(r) : nullptr;
      std::int64_t got;
      if (kind == RowKind::kProbabilities) {
        check_probability_row<T>(name, rows.row(r));
        got = gumbel_top_k_row<RowKind::kProbabilities>(
            rows.row_data(r), rows.cols, k, stream, 0, perturbed.data() + s * n,
            index.data() + s * n, tokens.row_data(r), vals);
      } else {
        check_logits_row<T>(name, rows.row(r));
        got = gumbel_top_k_row<RowKind::kLogWeights>(rows.row_data(r), rows.cols, k, stream, 0,
                                                     perturbed.data() + s * n, index.data() + s * n,
                                                     tokens.row_data(r), vals);
      }
      counts[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(got);
      for (std::int64_t j = got; j < k; ++j) {
        tokens(r, j) = kNoToken;
        if (vals != nullptr) vals[j] = -std::numeric_limits<float>::infinity();
      }
    });
  }
};

template <>
struct BeamLevelBatchImpl<backend::Cpu> {
  static std::size_t per_thread_bytes(const BeamLevelBatchShape& shape) {
    const auto w = static_cast<std::size_t>(std::max<std::int64_t>(shape.width, 1));
    return gumbel_top_k_workspace_size(shape.vocab) + Workspace::round_up(w * sizeof(Token)) +
           Workspace::round_up(w * sizeof(float)) +
           Workspace::round_up(w * w * sizeof(BeamCandidate));
  }
  static std::size_t workspace_size(const backend::Cpu& cpu, const BeamLevelBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.batch, cpu.threads);
    return static_cast<std::size_t>(threads) * per_thread_bytes(shape);
  }

  static void run(const backend::Cpu& cpu, MatrixView<const float> draft_rows,
                  std::span<const std::int32_t> beam_counts, MatrixView<const std::int32_t> nodes,
                  MatrixView<const float> log_probs, MatrixView<const float> scores,
                  std::span<const RandomStream> streams, MatrixView<std::int32_t> next_parents,
                  MatrixView<Token> next_tokens, MatrixView<float> next_log_probs,
                  MatrixView<float> next_scores, std::span<std::int32_t> next_counts,
                  Workspace& ws) {
    const std::int64_t batch = nodes.rows, width = nodes.cols;
    if (batch < 1) fail("nodes", "has {} rows (sequences), expected at least 1", batch);
    if (width < 1) fail("nodes", "has {} columns (beam width), expected at least 1", width);
    if (draft_rows.cols < 1)
      fail("draft_rows", "has {} columns, expected at least 1", draft_rows.cols);
    check_batch_matrix("draft_rows", draft_rows.rows, draft_rows.cols, draft_rows.stride,
                       batch * width, draft_rows.cols);
    check_size("beam_counts", beam_counts.size(), static_cast<std::size_t>(batch));
    check_batch_matrix("nodes", nodes.rows, nodes.cols, nodes.stride, batch, width);
    check_batch_matrix("log_probs", log_probs.rows, log_probs.cols, log_probs.stride, batch, width);
    check_batch_matrix("scores", scores.rows, scores.cols, scores.stride, batch, width);
    if (streams.size() != static_cast<std::size_t>(batch))
      fail("streams", "has {} entries, expected one per sequence ({})", streams.size(), batch);
    check_batch_matrix("next_parents", next_parents.rows, next_parents.cols, next_parents.stride,
                       batch, width);
    check_batch_matrix("next_tokens", next_tokens.rows, next_tokens.cols, next_tokens.stride, batch,
                       width);
    check_batch_matrix("next_log_probs", next_log_probs.rows, next_log_probs.cols,
                       next_log_probs.stride, batch, width);
    check_batch_matrix("next_scores", next_scores.rows, next_scores.cols, next_scores.stride, batch,
                       width);
    check_size("next_counts", next_counts.size(), static_cast<std::size_t>(batch));
    if (width > draft_rows.cols)
      fail("nodes", "beam width {} exceeds the vocabulary ({})", width, draft_rows.cols);
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto count = beam_counts[static_cast<std::size_t>(b)];
      if (count < 1 || count > width) {
        fail(fmt::format("beam_counts[{}]", b), "{} is outside [1, {}] (the beam width)", count,
             width);
      }
      for (std::int32_t i = 0; i < count; ++i) {
        if (nodes(b, i) < kRootNode) {
          fail(fmt::format("nodes[{}][{}]", b, i), "{} is not a node id (or -1 for the root)",
               nodes(b, i));
        }
      }
    }
    const auto v = static_cast<std::size_t>(draft_rows.cols);
    const auto w = static_cast<std::size_t>(width);
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    const auto t = static_cast<std::size_t>(threads);
    auto scope = ws.scope();
    auto perturbed = ws.take<float>(v * t);
    auto index = ws.take<std::int32_t>(v * t);
    auto tokens = ws.take<Token>(w * t);
    auto values = ws.take<float>(w * t);
    auto candidates = ws.take<BeamCandidate>(w * w * t);
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const auto s = static_cast<std::size_t>(slot);
      const auto count = static_cast<std::size_t>(beam_counts[static_cast<std::size_t>(b)]);
      for (std::size_t i = 0; i < count; ++i) {
        check_probability_row<float>(
            ArgName("draft_rows", b * width + static_cast<std::int64_t>(i)),
            draft_rows.row(b * width + static_cast<std::int64_t>(i)));
      }
      BeamCandidate* c = candidates.data() + s * w * w;
      const auto kept = stochastic_beam_level(
          count, nodes.row_data(b), log_probs.row_data(b), scores.row_data(b),
          [&](std::size_t i) {
            return draft_rows.row_data(b * width + static_cast<std::int64_t>(i));
          },
          static_cast<std::int32_t>(width), draft_rows.cols, streams[static_cast<std::size_t>(b)],
          perturbed.data() + s * v, index.data() + s * v, tokens.data() + s * w,
          values.data() + s * w, c);
      for (std::size_t j = 0; j < w; ++j) {
        const auto jj = static_cast<std::int64_t>(j);
        if (j < kept) {
          next_parents(b, jj) = c[j].parent;
          next_tokens(b, jj) = c[j].token;
          next_log_probs(b, jj) = c[j].log_prob;
          next_scores(b, jj) = static_cast<float>(c[j].score);
        } else {
          next_parents(b, jj) = -1;
          next_tokens(b, jj) = kNoToken;
          next_log_probs(b, jj) = -std::numeric_limits<float>::infinity();
          next_scores(b, jj) = -std::numeric_limits<float>::infinity();
        }
      }
      next_counts[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(kept);
    });
  }
};

}  // namespace specdec::detail
