// SPDX-License-Identifier: MIT
// The CPU backend of batched Gumbel-top-k and stochastic-beam-search levels: rows (sequences) in
// parallel on the thread pool, each through the single-row functions of draft/.
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

template <>
struct GumbelTopKBatchImpl<backend::Cpu> {
  static std::size_t workspace_size(const backend::Cpu& cpu, const GumbelTopKBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.rows, cpu.threads);
    return static_cast<std::size_t>(threads) * gumbel_top_k_workspace_size(shape.vocab);
  }

  template <class T>
  static void run(const backend::Cpu& cpu, const GumbelTopKBatchArgs<T>& args, Workspace& ws) {
    check_gumbel_top_k_batch(args);
    const auto& kind = args.kind;
    const auto& rows = args.rows;
    const auto& k = args.k;
    const auto& streams = args.streams;
    const auto& tokens = args.tokens;
    const auto& values = args.values;
    const auto& counts = args.counts;
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

  static void run(const backend::Cpu& cpu, const BeamLevelBatchArgs& args, Workspace& ws) {
    check_beam_level_batch(args);
    const auto& draft_rows = args.draft_rows;
    const auto& beam_counts = args.beam_counts;
    const auto& nodes = args.nodes;
    const auto& log_probs = args.log_probs;
    const auto& scores = args.scores;
    const auto& streams = args.streams;
    const auto& next_parents = args.next_parents;
    const auto& next_tokens = args.next_tokens;
    const auto& next_log_probs = args.next_log_probs;
    const auto& next_scores = args.next_scores;
    const auto& next_counts = args.next_counts;
    const std::int64_t batch = nodes.rows, width = nodes.cols;
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
