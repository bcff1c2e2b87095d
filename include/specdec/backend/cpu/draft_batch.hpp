// SPDX-License-Identifier: MIT
// The CPU backend of batched Gumbel-top-k and stochastic-beam-search levels: rows (sequences) in
// parallel on the thread pool, each through the single-row functions of draft/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/backend/cpu/batch_loop.hpp"
#include "specdec/backend/draft_batch.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"

namespace specdec::detail {

template <>
struct GumbelTopKBatchImpl<backend::Cpu> : RowLoopWorkspace<gumbel_top_k_workspace_size> {
  template <class T>
  static void run(const backend::Cpu& cpu, const GumbelTopKBatchArgs<T>& args, Workspace& ws) {
    check_gumbel_top_k_batch(args);
    const auto n = static_cast<std::size_t>(args.rows.cols);
    const SequenceLoop loop{.batch = args.rows.rows,
                            .scratch_bytes = gumbel_top_k_workspace_size(args.rows.cols),
                            .name_sequence = false};
    for_each_sequence(cpu, ws, loop, [&](std::int64_t r, std::byte* scratch) {
      auto* perturbed = reinterpret_cast<float*>(scratch);
      auto* index = reinterpret_cast<std::int32_t*>(scratch + Workspace::round_up(n * sizeof(float)));
      const ArgName name("rows", r);
      const auto& stream = args.streams[static_cast<std::size_t>(r)];
      float* vals = args.values.rows != 0 ? args.values.row_data(r) : nullptr;
      std::int64_t got;
      if (args.kind == RowKind::kProbabilities) {
        check_probability_row<T>(name, args.rows.row(r));
        got = gumbel_top_k_row<RowKind::kProbabilities>(
            args.rows.row_data(r), args.rows.cols, args.k, stream, 0,
            {perturbed, index, args.tokens.row_data(r), vals});
      } else {
        check_logits_row<T>(name, args.rows.row(r));
        got = gumbel_top_k_row<RowKind::kLogWeights>(
            args.rows.row_data(r), args.rows.cols, args.k, stream, 0,
            {perturbed, index, args.tokens.row_data(r), vals});
      }
      args.counts[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(got);
      for (std::int64_t j = got; j < args.k; ++j) {
        args.tokens(r, j) = kNoToken;
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
    return sequence_loop_bytes(cpu, shape.batch, per_thread_bytes(shape));
  }

  static void run(const backend::Cpu& cpu, const BeamLevelBatchArgs& args, Workspace& ws) {
    check_beam_level_batch(args);
    const std::int64_t batch = args.nodes.rows, width = args.nodes.cols;
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto count = args.beam_counts[static_cast<std::size_t>(b)];
      if (count < 1 || count > width) {
        fail(fmt::format("beam_counts[{}]", b), "{} is outside [1, {}] (the beam width)", count,
             width);
      }
      for (std::int32_t i = 0; i < count; ++i) {
        if (args.nodes(b, i) < kRootNode) {
          fail(fmt::format("nodes[{}][{}]", b, i), "{} is not a node id (or -1 for the root)",
               args.nodes(b, i));
        }
      }
    }
    const auto v = static_cast<std::size_t>(args.draft_rows.cols);
    const auto w = static_cast<std::size_t>(width);
    const SequenceLoop loop{
        .batch = batch,
        .scratch_bytes = per_thread_bytes({.width = width, .vocab = args.draft_rows.cols}),
        .name_sequence = false};
    for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* scratch) {
      // per_thread_bytes' layout: the Gumbel-top-k scratch, W tokens, W values, W x W candidates.
      const auto take = [&scratch](std::size_t bytes) {
        std::byte* at = scratch;
        scratch += Workspace::round_up(bytes);
        return at;
      };
      auto* perturbed = reinterpret_cast<float*>(take(v * sizeof(float)));
      auto* index = reinterpret_cast<std::int32_t*>(take(v * sizeof(std::int32_t)));
      auto* tokens = reinterpret_cast<Token*>(take(w * sizeof(Token)));
      auto* values = reinterpret_cast<float*>(take(w * sizeof(float)));
      auto* c = reinterpret_cast<BeamCandidate*>(take(w * w * sizeof(BeamCandidate)));
      const auto count = static_cast<std::size_t>(args.beam_counts[static_cast<std::size_t>(b)]);
      for (std::size_t i = 0; i < count; ++i) {
        check_probability_row<float>(
            ArgName("draft_rows", b * width + static_cast<std::int64_t>(i)),
            args.draft_rows.row(b * width + static_cast<std::int64_t>(i)));
      }
      const auto kept = stochastic_beam_level(
          BeamLevel{count, args.nodes.row_data(b), args.log_probs.row_data(b),
                    args.scores.row_data(b)},
          [&](std::size_t i) {
            return args.draft_rows.row_data(b * width + static_cast<std::int64_t>(i));
          },
          static_cast<std::int32_t>(width), args.draft_rows.cols,
          args.streams[static_cast<std::size_t>(b)],
          GumbelTopKBuffers{perturbed, index, tokens, values},
          c);
      for (std::size_t j = 0; j < w; ++j) {
        const auto jj = static_cast<std::int64_t>(j);
        if (j < kept) {
          args.next_parents(b, jj) = c[j].parent;
          args.next_tokens(b, jj) = c[j].token;
          args.next_log_probs(b, jj) = c[j].log_prob;
          args.next_scores(b, jj) = static_cast<float>(c[j].score);
        } else {
          args.next_parents(b, jj) = -1;
          args.next_tokens(b, jj) = kNoToken;
          args.next_log_probs(b, jj) = -std::numeric_limits<float>::infinity();
          args.next_scores(b, jj) = -std::numeric_limits<float>::infinity();
        }
      }
      args.next_counts[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(kept);
    });
  }
};

}  // namespace specdec::detail
