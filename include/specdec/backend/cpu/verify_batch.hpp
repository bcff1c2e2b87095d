// SPDX-License-Identifier: MIT
// The CPU backend of batched chain and tree verification (with and without draft rows): sequences
// in parallel on the thread pool (for_each_sequence), each through the single-sequence checks and
// walks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "specdec/backend/cpu/batch_loop.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/ragged.hpp"
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

/// Sequence b's draft tokens of a chain batch, checked up front (rows are checked only as the
/// walk reaches them, so a -1 placeholder is never used as an index).
inline void check_chain_tokens(std::span<const std::int32_t> offsets,
                               std::span<const Token> draft_tokens, std::int64_t vocab) {
  for (std::int64_t b = 0; b + 1 < static_cast<std::int64_t>(offsets.size()); ++b) {
    const RaggedSlice seq = RaggedSlice::of(offsets.data(), b);
    for (std::int64_t i = 0; i < seq.count; ++i) {
      check_token(ArgName("draft_tokens", b)[i],
                  draft_tokens[static_cast<std::size_t>(seq.first + i)], vocab);
    }
  }
}

/// The per-thread scratch of a chain batch: one float row, from logits chain_logits_scratch.
inline std::size_t chain_scratch_bytes(const ChainBatchShape& shape) {
  const auto vocab = std::max<std::int64_t>(shape.vocab, 0);
  if (shape.from_logits) return chain_logits_scratch_size(vocab);
  return Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
}

/// Sequence b of a chain batch of warped rows, as the walks take it.
struct RowSequence {
  std::span<const float> target;  // gamma + 1 rows
  std::span<const float> draft;   // gamma rows, or empty (target-only)
  std::span<const Token> tokens;
  std::span<Token> emitted;
  const RandomStream& stream;
  float* scratch;  // one row
};

/// The CPU reads a batch's rows as contiguous matrices: its target rows, and its draft rows
/// unless the batch is target-only (`draft_rows` false).
template <class Args>
void check_contiguous_rows(const Args& args, bool draft_rows) {
  check_contiguous("target_rows", args.target_rows);
  if (draft_rows) check_contiguous("draft_rows", args.draft_rows);
}

/// The loop of both chain batches of warped rows (`draft_rows` false: target-only): the checks,
/// then walk(sequence) for each sequence, which returns its ChainVerdict.
template <class Walk>
void for_each_chain(const backend::Cpu& cpu, const ChainBatchArgs& args, Workspace& ws,
                    bool draft_rows, Walk&& walk) {
  const RaggedSizes sizes = check_chain_batch<backend::Cpu>(args, draft_rows);
  check_contiguous_rows(args, draft_rows);
  const auto v = static_cast<std::size_t>(args.target_rows.cols);
  const SequenceLoop loop{.batch = sizes.batch,
                          .scratch_bytes = chain_scratch_bytes({.vocab = args.target_rows.cols})};
  for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* scratch) {
    const RaggedSlice seq = RaggedSlice::of(args.draft_offsets.data(), b);
    const auto g = static_cast<std::size_t>(seq.count);
    const auto i = static_cast<std::size_t>(b);
    const RowSequence sequence{
        .target = {args.target_rows.row_data(seq.first_row()), (g + 1) * v},
        .draft = draft_rows ? std::span<const float>(args.draft_rows.row_data(seq.first), g * v)
                            : std::span<const float>{},
        .tokens = args.draft_tokens.subspan(static_cast<std::size_t>(seq.first), g),
        .emitted = args.emitted.subspan(static_cast<std::size_t>(seq.first_row()), g + 1),
        .stream = args.streams[i],
        .scratch = reinterpret_cast<float*>(scratch)};
    const ChainVerdict verdict = verdict_or_status(args.status, b, ChainVerdict{-1, 0},
                                                   [&] { return walk(sequence); });
    finish_chain(verdict.accepted, verdict.emitted, sequence.emitted, args.accepted[i]);
  });
  count_failures(args.status);
}

template <>
struct ChainBatchImpl<backend::Cpu> {
  static std::size_t workspace_size(const backend::Cpu& cpu, const ChainBatchShape& shape) {
    return sequence_loop_bytes(cpu, shape.batch, chain_scratch_bytes(shape));
  }

  static void run(const backend::Cpu& cpu, const ChainBatchArgs& args, Workspace& ws) {
    const std::int64_t vocab = args.target_rows.cols;
    for_each_chain(cpu, args, ws, /*draft_rows=*/true, [&](const RowSequence& s) {
      // Rows are checked as the walk reaches them (rows after the first rejection are never read).
      const Rule rule = Rejection{};
      check_chain_shapes<float>(s.target, s.draft, s.tokens, vocab, s.emitted.size(), {}, {});
      const ChainRowChecks<float> check{rule,     s.target, s.draft, {}, {},
                                        s.tokens, static_cast<std::size_t>(vocab)};
      return verify_chain_unchecked<float>(
          rule,
          specdec::ChainRows<float>{.target = s.target.data(),
                                    .draft = s.draft.data(),
                                    .draft_tokens = s.tokens.data(),
                                    .length = s.tokens.size(),
                                    .vocab = vocab},
          s.stream, s.emitted.data(), s.scratch, check);
    });
  }

  /// Verifies each sequence from its logits' statistics (verify/chain_logits.hpp).
  template <class T>
  static void run_logits(const backend::Cpu& cpu, const ChainBatchLogitsArgs<T>& args,
                         Workspace& ws);
};

/// Tree b of a tree batch: its nodes, its N_b + 1 rows of `rows` from its root row, and the
/// scratch of verify_tree (4 ints per node and one float row) carved from `bytes`.
struct TreeSequence {
  TreeView tree;
  std::size_t first = 0;  // its first node in the batch
  std::span<const float> target;
  const float* draft = nullptr;
  std::int32_t* depth = nullptr;
  std::int32_t* children = nullptr;
  std::int32_t* ids = nullptr;
  Token* candidates = nullptr;
  float* scratch = nullptr;
};

/// The per-thread scratch of a tree batch: verify_tree's for its largest tree.
inline std::size_t tree_scratch_bytes(const TreeBatchShape& shape) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(shape.max_nodes, 0)) + 1;
  const auto v = static_cast<std::size_t>(std::max<std::int64_t>(shape.vocab, 0));
  return Workspace::round_up(4 * n * sizeof(std::int32_t)) +
         Workspace::round_up(v * sizeof(float));
}

inline TreeSequence tree_sequence(const TreeBatchArgs& args, std::int64_t b, std::int64_t largest,
                                  std::byte* bytes) {
  const RaggedSlice seq = RaggedSlice::of(args.node_offsets.data(), b);
  const auto n = static_cast<std::size_t>(seq.count);
  const auto v = static_cast<std::size_t>(args.target_rows.cols);
  const auto n_max = static_cast<std::size_t>(largest) + 1;
  auto* depth = reinterpret_cast<std::int32_t*>(bytes);
  return {.tree = args.trees.subtree(static_cast<std::size_t>(seq.first), n),
          .first = static_cast<std::size_t>(seq.first),
          .target = {args.target_rows.row_data(seq.first_row()), (n + 1) * v},
          .draft = args.draft_rows.data == nullptr ? nullptr
                                                   : args.draft_rows.row_data(seq.first_row()),
          .depth = depth,
          .children = depth + n_max,
          .ids = depth + 2 * n_max,
          .candidates = reinterpret_cast<Token*>(depth + 3 * n_max),
          .scratch = reinterpret_cast<float*>(
              bytes + Workspace::round_up(4 * n_max * sizeof(std::int32_t)))};
}

/// The loop of both tree batches (`draft_rows` false: target-only): the checks, then
/// walk(b, tree, buffers) for each tree, which returns its TreeVerdict; the outputs written.
template <class Walk>
void for_each_tree(const backend::Cpu& cpu, const TreeBatchArgs& args, Workspace& ws,
                   bool draft_rows, Walk&& walk) {
  const RaggedSizes sizes = check_tree_batch<backend::Cpu>(args, draft_rows);
  check_contiguous_rows(args, draft_rows);
  const SequenceLoop loop{
      .batch = sizes.batch,
      .scratch_bytes = tree_scratch_bytes({.max_nodes = sizes.largest,
                                           .vocab = args.target_rows.cols})};
  for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* bytes) {
    const TreeSequence t = tree_sequence(args, b, sizes.largest, bytes);
    const TreeBuffers buffers{args.accepted_nodes.data() + t.first, t.candidates, t.ids,
                              t.scratch};
    const TreeVerdict verdict = verdict_or_status(args.status, b, TreeVerdict{-1, kNoToken, false},
                                                  [&] { return walk(b, t, buffers); });
    const auto i = static_cast<std::size_t>(b);
    args.accepted[i] = verdict.accepted;
    args.final_tokens[i] = verdict.token;
    if (!args.bonus.empty()) args.bonus[i] = verdict.bonus ? 1 : 0;
  });
  count_failures(args.status);
}

template <>
struct TreeBatchImpl<backend::Cpu> {
  static std::size_t workspace_size(const backend::Cpu& cpu, const TreeBatchShape& shape) {
    return sequence_loop_bytes(cpu, shape.batch, tree_scratch_bytes(shape));
  }

  static void run(const backend::Cpu& cpu, const Rule& rule, const TreeBatchArgs& args,
                  Workspace& ws) {
    const std::int64_t vocab = args.target_rows.cols;
    for_each_tree(cpu, args, ws, /*draft_rows=*/true,
                  [&](std::int64_t b, const TreeSequence& t, const TreeBuffers& buffers) {
                    const auto n = static_cast<std::size_t>(t.tree.size());
                    const std::span<const float> draft(t.draft, t.target.size());
                    check_tree_inputs<float>(rule, t.tree, {.target = t.target, .draft = draft},
                                             vocab, n, t.depth, t.children);
                    return verify_tree_unchecked<float>(
                        rule, t.tree, TreeRows<float>{t.target.data(), t.draft, vocab},
                        args.streams[static_cast<std::size_t>(b)], buffers);
                  });
  }
};

template <>
struct ChainBatchTargetOnlyImpl<backend::Cpu> {
  static void run(const backend::Cpu& cpu, const ChainBatchArgs& args, Workspace& ws) {
    const std::int64_t vocab = args.target_rows.cols;
    for_each_chain(cpu, args, ws, /*draft_rows=*/false, [&](const RowSequence& s) {
      check_target_only_chain<float>(s.target, s.tokens, vocab, s.emitted.size());
      return verify_chain_target_only_unchecked<float>(
          s.target.data(), s.tokens.data(), s.tokens.size(), vocab, s.stream, s.emitted.data(),
          s.scratch, TargetRowChecks<float>{s.target, static_cast<std::size_t>(vocab)});
    });
  }

  /// Verifies each sequence from its target logits' statistics (verify/target_only_logits.hpp).
  template <class T>
  static void run_logits(const backend::Cpu& cpu, const ChainBatchLogitsArgs<T>& args,
                         Workspace& ws);
};

template <>
struct TreeBatchTargetOnlyImpl<backend::Cpu> {
  static void run(const backend::Cpu& cpu, const TreeBatchArgs& args, Workspace& ws) {
    const std::int64_t vocab = args.target_rows.cols;
    for_each_tree(cpu, args, ws, /*draft_rows=*/false,
                  [&](std::int64_t b, const TreeSequence& t, const TreeBuffers& buffers) {
                    check_target_only_tree<float>(t.tree, t.target, vocab,
                                                  static_cast<std::size_t>(t.tree.size()),
                                                  t.depth, t.children);
                    return verify_tree_target_only_unchecked<float>(
                        t.tree, TreeRows<float>{.target = t.target.data(), .vocab = vocab},
                        args.streams[static_cast<std::size_t>(b)], buffers);
                  });
  }
};

/// Sequence b of a chain batch from logits, as the walks from logits take it.
template <class T>
struct LogitSequence {
  RaggedSlice slice;
  const Warp& warp;
  LogitRows<T> target;
  const Token* tokens;
  const RandomStream& stream;
  std::span<Token> emitted;
  ChainLogitsScratch scratch;
};

/// Sequence b of a chain batch from logits, its scratch laid out in `bytes`.
template <class T>
LogitSequence<T> logit_sequence(const ChainBatchLogitsArgs<T>& args, std::int64_t b,
                                std::byte* bytes) {
  const RaggedSlice seq = RaggedSlice::of(args.draft_offsets.data(), b);
  return {.slice = seq,
          .warp = args.warps[static_cast<std::size_t>(warp_of(args.warps.size(), b))],
          .target = {args.target_logits.row_data(seq.first_row()), args.target_logits.stride,
                     "target_logits", seq.first_row()},
          .tokens = args.draft_tokens.data() + seq.first,
          .stream = args.streams[static_cast<std::size_t>(b)],
          .emitted = args.emitted.subspan(static_cast<std::size_t>(seq.first_row()),
                                          static_cast<std::size_t>(seq.count) + 1),
          .scratch = chain_logits_scratch(bytes, args.target_logits.cols)};
}

/// With a status buffer, a sequence's warp and tokens are checked with it (a failure is its own).
template <class T>
void check_logit_sequence(const ChainBatchLogitsArgs<T>& args, const LogitSequence<T>& sequence) {
  if (args.status.empty()) return;
  const std::int64_t vocab = args.target_logits.cols;
  sequence.warp.validate(vocab);
  for (std::int64_t k = 0; k < sequence.slice.count; ++k)
    check_token(ArgName("draft_tokens", sequence.slice.index)[k], sequence.tokens[k], vocab);
}

/// The loop of both chain batches from logits (`draft_rows` false: target-only): the checks, then
/// walk(sequence) for each sequence, which returns its ChainVerdict.
template <class T, class Walk>
void for_each_logit_sequence(const backend::Cpu& cpu, const ChainBatchLogitsArgs<T>& args,
                             Workspace& ws, bool draft_rows, Walk&& walk) {
  const RaggedSizes sizes = check_chain_batch<backend::Cpu>(args, draft_rows);
  const std::int64_t vocab = args.target_logits.cols;
  // With a status buffer each sequence's tokens and warp are checked with it (a failure is its own).
  if (args.status.empty()) check_chain_tokens(args.draft_offsets.span(), args.draft_tokens, vocab);
  const SequenceLoop loop{.batch = sizes.batch,
                          .scratch_bytes = chain_logits_scratch_size(vocab),
                          .name_sequence = false};
  for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* bytes) {
    const LogitSequence<T> sequence = logit_sequence(args, b, bytes);
    const ChainVerdict verdict =
        verdict_or_status(args.status, b, ChainVerdict{-1, 0}, [&] {
          check_logit_sequence(args, sequence);
          return walk(sequence);
        });
    finish_chain(verdict.accepted, verdict.emitted, sequence.emitted,
                 args.accepted[static_cast<std::size_t>(b)]);
  });
  count_failures(args.status);
}

// The entries from logits are defined out of their classes, not inline, so that the extern
// templates of backend/cpu/compiled_batch.hpp keep a caller from instantiating them.
template <class T>
void ChainBatchImpl<backend::Cpu>::run_logits(const backend::Cpu& cpu,
                                              const ChainBatchLogitsArgs<T>& args, Workspace& ws) {
  const std::int64_t vocab = args.target_logits.cols;
  for_each_logit_sequence(cpu, args, ws, /*draft_rows=*/true, [&](const LogitSequence<T>& s) {
    const LogitRows<T> draft{args.draft_logits.row_data(s.slice.first), args.draft_logits.stride,
                             "draft_logits", s.slice.first};
    return verify_chain_logits_unchecked<T>(
        s.warp,
        ChainLogitRows<T>{.target = s.target,
                          .draft = draft,
                          .tokens = s.tokens,
                          .length = s.slice.count,
                          .vocab = vocab},
        s.stream, s.emitted.data(), ArgName("draft_tokens", s.slice.index), s.scratch);
  });
}

template <class T>
void ChainBatchTargetOnlyImpl<backend::Cpu>::run_logits(const backend::Cpu& cpu,
                                                        const ChainBatchLogitsArgs<T>& args,
                                                        Workspace& ws) {
  const std::int64_t vocab = args.target_logits.cols;
  for_each_logit_sequence(cpu, args, ws, /*draft_rows=*/false, [&](const LogitSequence<T>& s) {
    return verify_chain_target_only_logits_unchecked<T>(
        s.warp, {.target = s.target, .tokens = s.tokens, .length = s.slice.count, .vocab = vocab},
        s.stream, s.emitted.data(), s.scratch);
  });
}

}  // namespace specdec::detail
