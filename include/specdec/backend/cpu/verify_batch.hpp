// SPDX-License-Identifier: MIT
// The CPU backend of batched chain and tree verification (with and without draft rows): sequences
// in parallel on the thread pool, each through the single-sequence checks and walks.
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
#include "specdec/verify/target_only.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec::detail {

template <>
struct ChainBatchImpl<backend::Cpu> {
  /// Per thread taking part: one float row of scratch; from logits three rows (the residual and
  /// the two rows written at a rejection) and the warp's scratch.
  static std::size_t per_thread_bytes(const ChainBatchShape& shape) {
    const auto vocab = std::max<std::int64_t>(shape.vocab, 0);
    if (shape.from_logits) return chain_logits_scratch_size(vocab);
    return Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
  }
  static std::size_t workspace_size(const backend::Cpu& cpu, const ChainBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.batch, cpu.threads);
    return static_cast<std::size_t>(threads) * per_thread_bytes(shape);
  }

  /// Where sequence b's rows and tokens lie in a ragged batch (ChainBatchArgs).
  struct Sequence {
    std::int64_t first_draft;  // draft_offsets[b]: its first draft row and token
    std::int64_t gamma;        // its draft tokens
    std::int64_t index;        // b
    /// Its first target row and first emitted token: one more per earlier sequence.
    std::int64_t first_target() const { return first_draft + index; }
  };
  static Sequence sequence(std::span<const std::int32_t> draft_offsets, std::int64_t b) {
    const auto i = static_cast<std::size_t>(b);
    return {draft_offsets[i], draft_offsets[i + 1] - draft_offsets[i], b};
  }

  /// Checks and verifies one sequence of warped rows (`target`: gamma + 1 rows, `draft`: gamma
  /// rows), writes its gamma + 1 emitted tokens (padded with -1) and returns its accepted count.
  static std::int32_t verify_sequence(std::span<const float> target, std::span<const float> draft,
                                      std::span<const Token> tokens, std::int64_t vocab,
                                      const RandomStream& stream, std::span<Token> emitted,
                                      float* scratch, std::int64_t b) {
    // Rows are checked as the walk reaches them (rows after the first rejection are never read).
    const Rule rule = Rejection{};
    ChainVerdict verdict;
    try {
      check_chain_shapes<float>(target, draft, tokens, vocab, emitted.size(), {}, {});
      const ChainRowChecks<float> check{rule, target, draft, {}, {}, tokens,
                                        static_cast<std::size_t>(vocab)};
      verdict = verify_chain_unchecked<float>(rule, target.data(), draft.data(), tokens.data(),
                                              tokens.size(), vocab, stream, emitted.data(),
                                              scratch, nullptr, nullptr, check);
    } catch (const Error& e) {
      rethrow_for_sequence(e, b);
    }
    std::fill(emitted.begin() + verdict.emitted, emitted.end(), kNoToken);
    return verdict.accepted;
  }

  static void check_contiguous(MatrixView<const float> target, MatrixView<const float> draft) {
    if (target.stride != target.cols || draft.stride != draft.cols) {
      // verify_chain reads a sequence's rows back to back.
      fail(target.stride != target.cols ? "target_rows" : "draft_rows",
           "must be contiguous (stride == vocab) on the CPU backend");
    }
  }

  static void run(const backend::Cpu& cpu, const ChainBatchArgs& args, Workspace& ws) {
    check_chain_batch<float>(args.draft_offsets, args.target_rows, args.draft_rows,
                             args.draft_tokens.size(), args.streams.size(), args.emitted.size(),
                             args.accepted.size(), "target_rows", "draft_rows");
    check_contiguous(args.target_rows, args.draft_rows);
    const auto batch = static_cast<std::int64_t>(args.draft_offsets.size() - 1);
    const std::int64_t vocab = args.target_rows.cols;
    const auto v = static_cast<std::size_t>(vocab);
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    auto scope = ws.scope();
    auto scratch = ws.take<float>(v * static_cast<std::size_t>(threads));
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const Sequence seq = sequence(args.draft_offsets, b);
      const auto g = static_cast<std::size_t>(seq.gamma);
      args.accepted[static_cast<std::size_t>(b)] = verify_sequence(
          std::span<const float>(args.target_rows.row_data(seq.first_target()), (g + 1) * v),
          std::span<const float>(args.draft_rows.row_data(seq.first_draft), g * v),
          args.draft_tokens.subspan(static_cast<std::size_t>(seq.first_draft), g), vocab,
          args.streams[static_cast<std::size_t>(b)],
          args.emitted.subspan(static_cast<std::size_t>(seq.first_target()), g + 1),
          scratch.data() + static_cast<std::size_t>(slot) * v, b);
    });
  }

  /// Verifies each sequence from its logits' statistics (verify/chain_logits.hpp).
  template <class T>
  static void run_logits(const backend::Cpu& cpu, const ChainBatchLogitsArgs<T>& args,
                         Workspace& ws) {
    check_chain_batch<T>(args.draft_offsets, args.target_logits, args.draft_logits,
                         args.draft_tokens.size(), args.streams.size(), args.emitted.size(),
                         args.accepted.size(), "target_logits", "draft_logits");
    const auto batch = static_cast<std::int64_t>(args.draft_offsets.size() - 1);
    const std::int64_t vocab = args.target_logits.cols;
    check_sequence_warps(args.warps, batch, vocab);
    for (std::int64_t b = 0; b < batch; ++b) {
      const Sequence seq = sequence(args.draft_offsets, b);
      for (std::int64_t i = 0; i < seq.gamma; ++i) {
        // Tokens are checked up front; rows only as the walk reaches them.
        check_token(ArgName("draft_tokens", b)[i],
                    args.draft_tokens[static_cast<std::size_t>(seq.first_draft + i)], vocab);
      }
    }
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    const std::size_t per_thread = chain_logits_scratch_size(vocab);
    auto scope = ws.scope();
    auto bytes = ws.take<std::byte>(per_thread * static_cast<std::size_t>(threads));
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const ChainLogitsScratch scratch = chain_logits_scratch(
          bytes.data() + static_cast<std::size_t>(slot) * per_thread, vocab);
      const Sequence seq = sequence(args.draft_offsets, b);
      const Warp& w = args.warps[args.warps.size() == 1 ? 0 : static_cast<std::size_t>(b)];
      const LogitRows<T> target{args.target_logits.row_data(seq.first_target()),
                                args.target_logits.stride, "target_logits", seq.first_target()};
      const LogitRows<T> draft{args.draft_logits.row_data(seq.first_draft),
                               args.draft_logits.stride, "draft_logits", seq.first_draft};
      const auto emitted = args.emitted.subspan(static_cast<std::size_t>(seq.first_target()),
                                                static_cast<std::size_t>(seq.gamma) + 1);
      const auto verdict = verify_chain_logits_unchecked<T>(
          w, target, draft, args.draft_tokens.data() + seq.first_draft, seq.gamma, vocab,
          args.streams[static_cast<std::size_t>(b)], emitted.data(), ArgName("draft_tokens", b),
          scratch);
      args.accepted[static_cast<std::size_t>(b)] = verdict.accepted;
      std::fill(emitted.begin() + verdict.emitted, emitted.end(), kNoToken);
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

  /// Checks and verifies tree b of the batch with `ints` (4 n_max ints) and `scratch` (V floats).
  static void verify_sequence(const Rule& rule, const TreeBatchArgs& args, std::int64_t b,
                              std::size_t n_max, std::int32_t* ints, float* scratch) {
    const auto i = static_cast<std::size_t>(b);
    const auto begin = static_cast<std::size_t>(args.node_offsets[i]);
    const auto n = static_cast<std::size_t>(args.node_offsets[i + 1]) - begin;
    const std::int64_t vocab = args.target_rows.cols;
    const auto v = static_cast<std::size_t>(vocab);
    const auto first_row = static_cast<std::int64_t>(begin) + b;
    const std::span<const float> target(args.target_rows.row_data(first_row), (n + 1) * v);
    const std::span<const float> draft(args.draft_rows.row_data(first_row), (n + 1) * v);
    std::int32_t* depth = ints;
    std::int32_t* children = depth + n_max;
    std::int32_t* ids = children + n_max;
    auto* candidates = reinterpret_cast<Token*>(ids + n_max);
    const TreeView tree = args.trees.subtree(begin, n);
    try {
      check_tree_inputs<float>(rule, tree, target, draft, vocab, n, {}, {}, depth, children);
    } catch (const Error& e) {
      rethrow_for_sequence(e, b);
    }
    const auto verdict = verify_tree_unchecked<float>(
        rule, tree, target.data(), draft.data(), vocab, args.streams[i], args.accepted_nodes.data() + begin, candidates, ids,
        scratch);
    args.accepted[i] = verdict.accepted;
    args.final_tokens[i] = verdict.token;
    if (!args.bonus.empty()) args.bonus[i] = verdict.bonus ? 1 : 0;
  }

  static void run(const backend::Cpu& cpu, const Rule& rule, const TreeBatchArgs& args,
                  Workspace& ws) {
    const std::int64_t largest = check_tree_batch(args);
    const auto& target_rows = args.target_rows;
    const auto& draft_rows = args.draft_rows;
    if (target_rows.stride != target_rows.cols || draft_rows.stride != draft_rows.cols) {
      fail(target_rows.stride != target_rows.cols ? "target_rows" : "draft_rows",
           "must be contiguous (stride == vocab) on the CPU backend");
    }
    const auto batch = static_cast<std::int64_t>(args.node_offsets.size() - 1);
    const auto v = static_cast<std::size_t>(target_rows.cols);
    const auto n_max = static_cast<std::size_t>(largest) + 1;
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    const auto t = static_cast<std::size_t>(threads);
    auto scope = ws.scope();
    auto ints = ws.take<std::int32_t>(4 * n_max * t);
    auto scratch = ws.take<float>(v * t);
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const auto s = static_cast<std::size_t>(slot);
      verify_sequence(rule, args, b, n_max, ints.data() + s * 4 * n_max, scratch.data() + s * v);
    });
  }
};

template <>
struct ChainBatchTargetOnlyImpl<backend::Cpu> {
  using Chain = ChainBatchImpl<backend::Cpu>;

  static void run(const backend::Cpu& cpu, const ChainBatchArgs& args, Workspace& ws) {
    check_chain_batch_target_only(args);
    if (args.target_rows.stride != args.target_rows.cols) {
      fail("target_rows", "must be contiguous (stride == vocab) on the CPU backend");
    }
    const auto batch = static_cast<std::int64_t>(args.draft_offsets.size() - 1);
    const std::int64_t vocab = args.target_rows.cols;
    const auto v = static_cast<std::size_t>(vocab);
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    auto scope = ws.scope();
    auto scratch = ws.take<float>(v * static_cast<std::size_t>(threads));
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const Chain::Sequence seq = Chain::sequence(args.draft_offsets, b);
      const auto g = static_cast<std::size_t>(seq.gamma);
      const std::span<const float> target(args.target_rows.row_data(seq.first_target()),
                                          (g + 1) * v);
      const auto tokens = args.draft_tokens.subspan(static_cast<std::size_t>(seq.first_draft), g);
      const auto emitted =
          args.emitted.subspan(static_cast<std::size_t>(seq.first_target()), g + 1);
      ChainVerdict verdict;
      try {
        check_target_only_chain<float>(target, tokens, vocab, emitted.size());
        verdict = verify_chain_target_only_unchecked<float>(
            target.data(), tokens.data(), g, vocab, args.streams[static_cast<std::size_t>(b)],
            emitted.data(), scratch.data() + static_cast<std::size_t>(slot) * v,
            TargetRowChecks<float>{target, v});
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
      std::fill(emitted.begin() + verdict.emitted, emitted.end(), kNoToken);
      args.accepted[static_cast<std::size_t>(b)] = verdict.accepted;
    });
  }

  /// Verifies each sequence from its target logits' statistics (verify/target_only_logits.hpp).
  template <class T>
  static void run_logits(const backend::Cpu& cpu, const ChainBatchLogitsArgs<T>& args,
                         Workspace& ws) {
    check_chain_batch_target_only_logits(args);
    const auto batch = static_cast<std::int64_t>(args.draft_offsets.size() - 1);
    const std::int64_t vocab = args.target_logits.cols;
    for (std::int64_t b = 0; b < batch; ++b) {
      const Chain::Sequence seq = Chain::sequence(args.draft_offsets, b);
      for (std::int64_t i = 0; i < seq.gamma; ++i) {
        // Tokens are checked up front (a -1 placeholder is never an index); rows as reached.
        check_token(ArgName("draft_tokens", b)[i],
                    args.draft_tokens[static_cast<std::size_t>(seq.first_draft + i)], vocab);
      }
    }
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    const std::size_t per_thread = chain_logits_scratch_size(vocab);
    auto scope = ws.scope();
    auto bytes = ws.take<std::byte>(per_thread * static_cast<std::size_t>(threads));
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const ChainLogitsScratch scratch =
          chain_logits_scratch(bytes.data() + static_cast<std::size_t>(slot) * per_thread, vocab);
      const Chain::Sequence seq = Chain::sequence(args.draft_offsets, b);
      const Warp& w = args.warps[args.warps.size() == 1 ? 0 : static_cast<std::size_t>(b)];
      const LogitRows<T> target{args.target_logits.row_data(seq.first_target()),
                                args.target_logits.stride, "target_logits", seq.first_target()};
      const auto emitted = args.emitted.subspan(static_cast<std::size_t>(seq.first_target()),
                                                static_cast<std::size_t>(seq.gamma) + 1);
      const auto verdict = verify_chain_target_only_logits_unchecked<T>(
          w, target, args.draft_tokens.data() + seq.first_draft, seq.gamma, vocab,
          args.streams[static_cast<std::size_t>(b)], emitted.data(), scratch);
      args.accepted[static_cast<std::size_t>(b)] = verdict.accepted;
      std::fill(emitted.begin() + verdict.emitted, emitted.end(), kNoToken);
    });
  }
};

template <>
struct TreeBatchTargetOnlyImpl<backend::Cpu> {
  static void run(const backend::Cpu& cpu, const TreeBatchArgs& args, Workspace& ws) {
    const std::int64_t largest = check_tree_batch(args, /*draft_rows=*/false);
    if (args.target_rows.stride != args.target_rows.cols) {
      fail("target_rows", "must be contiguous (stride == vocab) on the CPU backend");
    }
    const auto batch = static_cast<std::int64_t>(args.node_offsets.size() - 1);
    const std::int64_t vocab = args.target_rows.cols;
    const auto v = static_cast<std::size_t>(vocab);
    const auto n_max = static_cast<std::size_t>(largest) + 1;
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(batch, cpu.threads);
    const auto t = static_cast<std::size_t>(threads);
    auto scope = ws.scope();
    auto ints = ws.take<std::int32_t>(4 * n_max * t);
    auto scratch = ws.take<float>(v * t);
    pool.run(batch, threads, [&](std::int64_t b, int slot) {
      const auto i = static_cast<std::size_t>(b);
      const auto s = static_cast<std::size_t>(slot);
      const auto begin = static_cast<std::size_t>(args.node_offsets[i]);
      const auto n = static_cast<std::size_t>(args.node_offsets[i + 1]) - begin;
      const std::span<const float> target(
          args.target_rows.row_data(static_cast<std::int64_t>(begin) + b), (n + 1) * v);
      std::int32_t* depth = ints.data() + s * 4 * n_max;
      std::int32_t* children = depth + n_max;
      std::int32_t* ids = children + n_max;
      auto* candidates = reinterpret_cast<Token*>(ids + n_max);
      const TreeView tree = args.trees.subtree(begin, n);
      try {
        check_target_only_tree<float>(tree, target, vocab, n, depth, children);
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
      const auto verdict = verify_tree_target_only_unchecked<float>(
          tree, target.data(), vocab, args.streams[i], args.accepted_nodes.data() + begin,
          candidates, ids, scratch.data() + s * v);
      args.accepted[i] = verdict.accepted;
      args.final_tokens[i] = verdict.token;
      if (!args.bonus.empty()) args.bonus[i] = verdict.bonus ? 1 : 0;
    });
  }
};

}  // namespace specdec::detail
