// SPDX-License-Identifier: MIT
// The CPU backend of batched chain and tree verification: sequences in parallel on the thread
// pool, each through verify_chain's / verify_tree's own checks and walks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/verify_batch.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec::detail {

template <>
struct ChainBatchImpl<backend::Cpu> {
  /// Per thread taking part: one float row of scratch; from logits three rows (the residual and
  /// the two rows written at a rejection) and the warp's scratch.
  static std::size_t per_thread_bytes(const ChainBatchShape& shape) {
    const auto v = static_cast<std::size_t>(std::max<std::int64_t>(shape.vocab, 0));
    if (shape.from_logits) return chain_logits_scratch_size(std::max<std::int64_t>(shape.vocab, 0));
    return Workspace::round_up(v * sizeof(float));
  }
  static std::size_t workspace_size(const backend::Cpu& cpu, const ChainBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.batch, cpu.threads);
    return static_cast<std::size_t>(threads) * per_thread_bytes(shape);
  }

  static void pad(MatrixView<Token> emitted, std::int64_t b, std::int32_t from) {
    for (std::int64_t i = from; i < emitted.cols; ++i) emitted(b, i) = kNoToken;
  }

  static void run(const backend::Cpu& cpu, MatrixView<const float> target_rows,
                  MatrixView<const float> draft_rows, MatrixView<const Token> draft_tokens,
                  std::span<const RandomStream> streams, MatrixView<Token> emitted,
                  std::span<std::int32_t> accepted, Workspace& ws) {
    check_chain_batch(target_rows.rows, target_rows.cols, target_rows.stride, draft_rows.rows,
                      draft_rows.cols, draft_rows.stride, draft_tokens.rows, draft_tokens.cols,
                      draft_tokens.stride, streams.size(), emitted.rows, emitted.cols,
                      emitted.stride, accepted.size(), "target_rows", "draft_rows");
    if (target_rows.stride != target_rows.cols || draft_rows.stride != draft_rows.cols) {
      // verify_chain reads a sequence's rows back to back.
      fail(target_rows.stride != target_rows.cols ? "target_rows" : "draft_rows",
           "must be contiguous (stride == vocab) on the CPU backend");
    }
    const std::int64_t batch = draft_tokens.rows, gamma = draft_tokens.cols;
    const std::int64_t vocab = target_rows.cols;
    const auto v = static_cast<std::size_t>(vocab);
    const auto g = static_cast<std::size_t>(gamma);
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    auto scope = ws.scope();
    auto scratch = ws.take<float>(v * static_cast<std::size_t>(threads));
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const std::span<const float> target(target_rows.row_data(b * (gamma + 1)), (g + 1) * v);
      const std::span<const float> draft(draft_rows.row_data(b * gamma), g * v);
      const std::span<const Token> tokens(draft_tokens.row_data(b), g);
      try {
        check_chain_inputs<float>(Rejection{}, target, draft, tokens, vocab, g + 1, {}, {});
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
      const auto verdict = verify_chain_unchecked<float>(
          Rejection{}, target.data(), draft.data(), tokens.data(), g, vocab,
          streams[static_cast<std::size_t>(b)], emitted.row_data(b),
          scratch.data() + static_cast<std::size_t>(slot) * v);
      accepted[static_cast<std::size_t>(b)] = verdict.accepted;
      pad(emitted, b, verdict.emitted);
    });
  }

  template <class T>
  static void run_logits(const backend::Cpu& cpu, MatrixView<const T> target_logits,
                         MatrixView<const T> draft_logits, std::span<const Warp> warps,
                         MatrixView<const Token> draft_tokens,
                         std::span<const RandomStream> streams, MatrixView<Token> emitted,
                         std::span<std::int32_t> accepted, Workspace& ws) {
    check_chain_batch(target_logits.rows, target_logits.cols, target_logits.stride,
                      draft_logits.rows, draft_logits.cols, draft_logits.stride, draft_tokens.rows,
                      draft_tokens.cols, draft_tokens.stride, streams.size(), emitted.rows,
                      emitted.cols, emitted.stride, accepted.size(), "target_logits",
                      "draft_logits");
    const std::int64_t batch = draft_tokens.rows, gamma = draft_tokens.cols;
    const std::int64_t vocab = target_logits.cols;
    check_sequence_warps(warps, batch, vocab);
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t i = 0; i < gamma; ++i) {
        // Tokens are checked up front; rows only as the walk reaches them.
        check_token(ArgName("draft_tokens", b)[i], draft_tokens(b, i), vocab);
      }
    }
    const std::size_t per_thread = chain_logits_scratch_size(vocab);
    const auto row_bytes = Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
    auto scope = ws.scope();
    auto bytes = ws.take<std::byte>(per_thread * static_cast<std::size_t>(threads));
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      std::byte* base = bytes.data() + static_cast<std::size_t>(slot) * per_thread;
      const ChainLogitsScratch scratch{reinterpret_cast<float*>(base),
                                       reinterpret_cast<float*>(base + row_bytes),
                                       reinterpret_cast<float*>(base + 2 * row_bytes),
                                       reinterpret_cast<std::int32_t*>(base + 3 * row_bytes)};
      const Warp& w = warps[warps.size() == 1 ? 0 : static_cast<std::size_t>(b)];
      const LogitRows<T> target{target_logits.row_data(b * (gamma + 1)), target_logits.stride,
                                "target_logits", b * (gamma + 1)};
      const LogitRows<T> draft{draft_logits.row_data(b * gamma), draft_logits.stride,
                               "draft_logits", b * gamma};
      const auto verdict = verify_chain_logits_unchecked<T>(
          w, target, draft, draft_tokens.row_data(b), gamma, vocab,
          streams[static_cast<std::size_t>(b)], emitted.row_data(b), ArgName("draft_tokens", b),
          scratch);
      accepted[static_cast<std::size_t>(b)] = verdict.accepted;
      pad(emitted, b, verdict.emitted);
    });
  }
};

template <>
struct TreeBatchImpl<backend::Cpu> {
  /// Per thread taking part: verify_tree's scratch for the largest tree.
  static std::size_t per_thread_bytes(const TreeBatchShape& shape) {
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(shape.max_nodes, 0)) + 1;
    const auto v = static_cast<std::size_t>(std::max<std::int64_t>(shape.vocab, 0));
    return 4 * Workspace::round_up(n * sizeof(std::int32_t)) +
           Workspace::round_up(v * sizeof(float));
  }
  static std::size_t workspace_size(const backend::Cpu& cpu, const TreeBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.batch, cpu.threads);
    return static_cast<std::size_t>(threads) * per_thread_bytes(shape);
  }

  static void run(const backend::Cpu& cpu, const Rule& rule,
                  std::span<const std::int32_t> node_offsets, std::span<const Token> tokens,
                  std::span<const std::int32_t> parents, MatrixView<const float> target_rows,
                  MatrixView<const float> draft_rows, std::span<const RandomStream> streams,
                  std::span<std::int32_t> accepted_nodes, std::span<std::int32_t> accepted,
                  std::span<Token> final_tokens, std::span<std::uint8_t> bonus, Workspace& ws) {
    const std::int64_t largest =
        check_tree_batch(node_offsets, tokens.size(), parents.size(), target_rows.rows,
                         target_rows.cols, draft_rows.rows, draft_rows.cols, streams.size(),
                         accepted_nodes.size(), accepted.size(), final_tokens.size(), bonus.size());
    if (target_rows.stride != target_rows.cols || draft_rows.stride != draft_rows.cols) {
      fail(target_rows.stride != target_rows.cols ? "target_rows" : "draft_rows",
           "must be contiguous (stride == vocab) on the CPU backend");
    }
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    const std::int64_t vocab = target_rows.cols;
    const auto v = static_cast<std::size_t>(vocab);
    const auto n_max = static_cast<std::size_t>(largest) + 1;
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    const auto t = static_cast<std::size_t>(threads);
    auto scope = ws.scope();
    auto ints = ws.take<std::int32_t>(4 * n_max * t);
    auto scratch = ws.take<float>(v * t);
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const auto s = static_cast<std::size_t>(slot);
      const auto begin = static_cast<std::size_t>(node_offsets[static_cast<std::size_t>(b)]);
      const auto n =
          static_cast<std::size_t>(node_offsets[static_cast<std::size_t>(b) + 1]) - begin;
      const auto first_row = static_cast<std::int64_t>(begin) + b;
      const std::span<const float> target(target_rows.row_data(first_row), (n + 1) * v);
      const std::span<const float> draft(draft_rows.row_data(first_row), (n + 1) * v);
      std::int32_t* depth = ints.data() + s * 4 * n_max;
      std::int32_t* children = depth + n_max;
      std::int32_t* ids = children + n_max;
      auto* candidates = reinterpret_cast<Token*>(ids + n_max);
      try {
        check_tree_inputs<float>(rule, tokens.subspan(begin, n), parents.subspan(begin, n), target,
                                 draft, vocab, n, {}, {}, depth, children);
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
      const auto verdict = verify_tree_unchecked<float>(
          rule, tokens.data() + begin, parents.data() + begin, n, target.data(), draft.data(),
          vocab, streams[static_cast<std::size_t>(b)], accepted_nodes.data() + begin, candidates,
          ids, scratch.data() + s * v);
      accepted[static_cast<std::size_t>(b)] = verdict.accepted;
      final_tokens[static_cast<std::size_t>(b)] = verdict.token;
      if (!bonus.empty()) bonus[static_cast<std::size_t>(b)] = verdict.bonus ? 1 : 0;
    });
  }
};

}  // namespace specdec::detail
