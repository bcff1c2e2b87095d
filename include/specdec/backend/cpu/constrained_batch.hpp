// SPDX-License-Identifier: MIT
// Constrained verification from logits for ragged batches of chains and trees on the CPU:
// sequence b is verify_chain_logits (verify_tree_logits, their
// target-only forms, or the block, greedy and typical chain rules of constrained_chain_rules.hpp)
// of its rows with its constraints, bit for bit, sequences in parallel on the thread pool as the
// other CPU batches run them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "specdec/backend/cpu/batch_loop.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/backend/verify_batch.hpp"
#include "specdec/verify/constrained_chain_rules.hpp"
#include "specdec/verify/constrained_logits.hpp"
#include "specdec/verify/tree_logits.hpp"

namespace specdec::constrained {

/// The constraints of a chain batch from logits, in ChainBatchLogitsArgs' ragged layout.
/// `bitmask`: xgrammar's batch mask, ceil(V / 32) int32 words per target row for the G + B target
/// rows (sequence b's gamma_b + 1 rows from row draft_offsets[b] + b, as target_logits), or empty
/// for none. `sequences`: B LogitConstraints (one per sequence) or one shared by every sequence;
/// their own `bitmask` must be empty (the batch's is cut for them). Penalties, allowed ids, stop
/// tokens and banned words stay per sequence and sparse. Tree batches take the same over their
/// N + B target rows (tree b's N_b + 1 rows from row node_offsets[b] + b).
struct ChainBatchConstraints {
  std::span<const std::int32_t> bitmask{};
  std::span<const LogitConstraints> sequences{};
};

}  // namespace specdec::constrained

namespace specdec::detail {

using constrained::ChainBatchConstraints;

/// The per-thread scratch of a constrained chain batch for drafts of at most `max_gamma` tokens:
/// the walk's rows, the transformed rows and max_gamma + 1 weights (block verification's).
inline std::size_t constrained_chain_scratch_bytes(std::int64_t vocab, std::int64_t max_gamma) {
  const auto v = std::max<std::int64_t>(vocab, 1);
  return chain_logits_scratch_size(v) + constrained_rows_size(v, max_gamma) +
         Workspace::round_up(static_cast<std::size_t>(std::max<std::int64_t>(max_gamma, 0) + 1) *
                             sizeof(double));
}

/// The batch's checks of `constraints` for `batch` sequences with `rows` target rows in all.
inline void check_batch_constraints(const ChainBatchConstraints& constraints, std::int64_t batch,
                                    std::int64_t rows, std::int64_t vocab) {
  const auto count = constraints.sequences.size();
  if (count != 1 && count != static_cast<std::size_t>(batch)) {
    fail("constraints.sequences", "has {} entries, expected 1 (shared) or {} (one per sequence)",
         count, batch);
  }
  for (std::size_t b = 0; b < count; ++b) {
    if (!constraints.sequences[b].bitmask.empty()) {
      fail(ArgName("constraints.sequences", static_cast<std::int64_t>(b)),
           "has its own bitmask; a batch's masks go in constraints.bitmask");
    }
  }
  if (!constraints.bitmask.empty()) {
    check_size("constraints.bitmask", constraints.bitmask.size(),
               static_cast<std::size_t>(rows * mask_words(vocab)));
  }
}

/// Sequence `slice`'s constraints: its entry with its rows of the batch's bitmask.
inline LogitConstraints sequence_constraints(const ChainBatchConstraints& constraints,
                                             const RaggedSlice& slice, std::int64_t vocab) {
  LogitConstraints c = constraints.sequences[static_cast<std::size_t>(
      warp_of(static_cast<std::int64_t>(constraints.sequences.size()), slice.index))];
  if (!constraints.bitmask.empty()) {
    const auto words = mask_words(vocab);
    c.bitmask = constraints.bitmask.subspan(static_cast<std::size_t>(slice.first_row() * words),
                                            static_cast<std::size_t>((slice.count + 1) * words));
  }
  return c;
}

/// The loop of the constrained chain batches (`draft_rows` false: no draft rows): the checks,
/// then walk(sequence, rows, weights) for each sequence, `rows` its transformed target rows and
/// `weights` gamma + 1 doubles of scratch (block verification's weights).
template <class Walk>
void for_each_constrained_sequence(const backend::Cpu& cpu, const ChainBatchLogitsArgs<float>& args,
                                   const ChainBatchConstraints& constraints, Workspace& ws,
                                   bool draft_rows, Walk&& walk) {
  const RaggedSizes sizes = check_chain_batch<backend::Cpu>(args, draft_rows);
  const std::int64_t vocab = args.target_logits.cols;
  check_batch_constraints(constraints, sizes.batch, sizes.total + sizes.batch, vocab);
  if (args.status.empty()) check_chain_tokens(args.draft_offsets.span(), args.draft_tokens, vocab);
  const SequenceLoop loop{.batch = sizes.batch,
                          .scratch_bytes = constrained_chain_scratch_bytes(vocab, sizes.largest),
                          .name_sequence = false};
  for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* bytes) {
    const LogitSequence<float> sequence = logit_sequence(args, b, bytes);
    const RaggedSlice& seq = sequence.slice;
    const ChainVerdict verdict = verdict_or_status(args.status, b, ChainVerdict{-1, 0}, [&] {
      check_logit_sequence(args, sequence);
      const LogitConstraints c = sequence_constraints(constraints, seq, vocab);
      // Errors of the constraints name the sequence: "penalties.tokens[b][0]", "bitmask[b][2]".
      try {
        check_constraints(c, seq.count + 1, vocab);
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
      const auto v = std::max<std::int64_t>(vocab, 1);
      std::byte* rows_bytes = bytes + chain_logits_scratch_size(v);
      auto rows =
          constrained_rows(c, sequence.target, ChainPrefix{sequence.tokens}, vocab, rows_bytes);
      rows.sequence = b;
      auto* weights =
          reinterpret_cast<double*>(rows_bytes + constrained_rows_size(v, sizes.largest));
      return walk(sequence, rows.rows_view(), weights);
    });
    finish_chain(verdict.accepted, verdict.emitted, sequence.emitted,
                 args.accepted[static_cast<std::size_t>(b)]);
  });
  count_failures(args.status);
}

/// for_each_constrained_sequence without draft rows: walk(sequence, chain), `chain` the
/// sequence's tokens on its transformed target rows.
template <class Walk>
void for_each_constrained_target_chain(const backend::Cpu& cpu,
                                       const ChainBatchLogitsArgs<float>& args,
                                       const ChainBatchConstraints& constraints, Workspace& ws,
                                       Walk&& walk) {
  for_each_constrained_sequence(
      cpu, args, constraints, ws, /*draft_rows=*/false,
      [&](const LogitSequence<float>& s, const LogitRows<float>& target, double*) {
        return walk(s, ChainLogitRows<float>{.target = target,
                                             .tokens = s.tokens,
                                             .length = s.slice.count,
                                             .vocab = args.target_logits.cols});
      });
}

/// Sequence `s`'s chain of a batch with draft rows, its target rows `target` (transformed).
inline ChainLogitRows<float> sequence_chain_rows(const ChainBatchLogitsArgs<float>& args,
                                                 const LogitSequence<float>& s,
                                                 const LogitRows<float>& target) {
  return {.target = target,
          .draft = {args.draft_logits.row_data(s.slice.first), args.draft_logits.stride,
                    "draft_logits", s.slice.first},
          .tokens = s.tokens,
          .length = s.slice.count,
          .vocab = args.target_logits.cols};
}

/// The per-thread scratch of a constrained tree batch for trees of at most `max_nodes` nodes:
/// four ints per node (depths, children, candidates, ids), the walk's rows and the transformed
/// rows.
inline std::size_t constrained_tree_scratch_bytes(std::int64_t vocab, std::int64_t max_nodes) {
  const auto v = std::max<std::int64_t>(vocab, 1);
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(max_nodes, 0)) + 1;
  return Workspace::round_up(4 * n * sizeof(std::int32_t)) + tree_logits_scratch_size(v) +
         constrained_rows_size(v, max_nodes);
}

/// The loop of both constrained tree batches (`rule` nullptr: target-only): the checks, then
/// walk(tree, rows, buffers, bytes) for each tree, `rows` its transformed target rows and `bytes`
/// the walk's scratch; the outputs written.
template <class Walk>
void for_each_constrained_tree(const backend::Cpu& cpu, const Rule* rule, const TreeBatchArgs& args,
                               std::span<const Warp> warps,
                               const ChainBatchConstraints& constraints, Workspace& ws,
                               Walk&& walk) {
  const RaggedSizes sizes = check_tree_batch<backend::Cpu>(args, rule != nullptr);
  const std::int64_t vocab = args.target_rows.cols;
  check_contiguous("target_rows", args.target_rows);
  if (rule != nullptr) check_contiguous("draft_rows", args.draft_rows);
  check_warp_list(warps, sizes.batch, vocab, "sequence");
  check_batch_constraints(constraints, sizes.batch, sizes.total + sizes.batch, vocab);
  const auto n_max = static_cast<std::size_t>(sizes.largest) + 1;
  const SequenceLoop loop{.batch = sizes.batch,
                          .scratch_bytes = constrained_tree_scratch_bytes(vocab, sizes.largest),
                          .name_sequence = false};
  for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* bytes) {
    const RaggedSlice seq = RaggedSlice::of(args.node_offsets.data(), b);
    const auto n = static_cast<std::size_t>(seq.count);
    const auto v = static_cast<std::size_t>(vocab);
    const TreeView tree = args.trees.subtree(static_cast<std::size_t>(seq.first), n);
    const Warp& warp = warps[static_cast<std::size_t>(warp_of(std::ssize(warps), b))];
    auto* depth = reinterpret_cast<std::int32_t*>(bytes);
    const TreeBuffers buffers{.accepted_nodes = args.accepted_nodes.data() + seq.first,
                              .candidates = reinterpret_cast<Token*>(depth + 2 * n_max),
                              .ids = depth + 3 * n_max};
    std::byte* walk_bytes = bytes + Workspace::round_up(4 * n_max * sizeof(std::int32_t));
    std::byte* rows_bytes = walk_bytes + tree_logits_scratch_size(std::max<std::int64_t>(vocab, 1));
    const TreeVerdict verdict =
        verdict_or_status(args.status, b, TreeVerdict{-1, kNoToken, false}, [&] {
          const RowSpans<float> logits{
              .target = {args.target_rows.row_data(seq.first_row()), (n + 1) * v},
              .draft = rule == nullptr
                           ? std::span<const float>{}
                           : std::span<const float>(args.draft_rows.row_data(seq.first_row()),
                                                    (n + 1) * v)};
          const LogitConstraints c = sequence_constraints(constraints, seq, vocab);
          // Errors name the tree: "tokens[b][i]", "penalties.tokens[b][0]", "bitmask[b][2]".
          try {
            check_tree_logits<float>(rule, warp, tree, logits, vocab, n, depth, depth + n_max);
            check_constraints(c, seq.count + 1, vocab);
          } catch (const Error& e) {
            rethrow_for_sequence(e, b);
          }
          auto rows = constrained_rows(
              c, LogitRows<float>{logits.target.data(), vocab, "target_rows", seq.first_row()},
              TreePrefix{tree}, vocab, rows_bytes);
          rows.sequence = b;
          return walk(warp, tree, logits, rows.rows_view(), buffers, walk_bytes,
                      args.streams[static_cast<std::size_t>(b)], seq);
        });
    const auto i = static_cast<std::size_t>(b);
    args.accepted[i] = verdict.accepted;
    args.final_tokens[i] = verdict.token;
    if (!args.bonus.empty()) args.bonus[i] = verdict.bonus ? 1 : 0;
  });
  count_failures(args.status);
}

}  // namespace specdec::detail

namespace specdec::constrained {

/// Bytes of Workspace verify_chain_batch_logits (its target-only, block, greedy and
/// typical forms) takes on `cpu` for `shape` (batch, largest gamma, vocab).
inline std::size_t chain_batch_workspace_size(const backend::Cpu& cpu,
                                              const ChainBatchShape& shape) {
  return detail::sequence_loop_bytes(
      cpu, shape.batch, detail::constrained_chain_scratch_bytes(shape.vocab, shape.max_gamma));
}

/// verify_chain_batch_logits with each sequence's target rows transformed by its constraints:
/// sequence b is verify_chain_logits of its rows, tokens, warps[b] (or warps[0]),
/// streams[b] and constraints (constraints.sequences[b] or [0], with its rows of
/// constraints.bitmask), bit for bit. float logits, host memory. Size `ws` with
/// chain_batch_workspace_size. Throws specdec::Error naming the bad argument (a
/// sequence's constraint as "penalties.tokens[b][i]", "bitmask[b][i]" for its row i allowing no
/// token); with `status`, a sequence whose constraints are bad fails alone (kBadRow, or
/// kTokenOutsideVocab for a token outside the vocabulary).
inline void verify_chain_batch_logits(const backend::Cpu& cpu,
                                      const ChainBatchLogitsArgs<float>& args,
                                      const ChainBatchConstraints& constraints, Workspace& ws) {
  detail::for_each_constrained_sequence(
      cpu, args, constraints, ws, /*draft_rows=*/true,
      [&](const detail::LogitSequence<float>& s, const detail::LogitRows<float>& target, double*) {
        return detail::verify_chain_logits_unchecked<float>(
            s.warp, detail::sequence_chain_rows(args, s, target), s.stream, s.emitted.data(),
            ArgName("draft_tokens", s.slice.index), s.scratch);
      });
}

/// verify_chain_batch_target_only_logits with each sequence's target rows transformed by its
/// constraints (`draft_logits` empty): sequence b is verify_chain_target_only_logits,
/// bit for bit. Workspace and errors as verify_chain_batch_logits.
inline void verify_chain_batch_target_only_logits(const backend::Cpu& cpu,
                                                  const ChainBatchLogitsArgs<float>& args,
                                                  const ChainBatchConstraints& constraints,
                                                  Workspace& ws) {
  detail::for_each_constrained_target_chain(
      cpu, args, constraints, ws, [](const detail::LogitSequence<float>& s, const auto& chain) {
        return detail::verify_chain_target_only_logits_unchecked<float>(
            s.warp, chain, s.stream, s.emitted.data(), s.scratch);
      });
}

/// Block verification of a chain batch from constrained logits: sequence b is
/// verify_block_logits of its rows, tokens, warps[b] (or warps[0]), constraints and
/// streams[b] (its uniforms), bit for bit. Layout, workspace
/// (chain_batch_workspace_size) and errors as verify_chain_batch_logits.
inline void verify_block_batch_logits(const backend::Cpu& cpu,
                                      const ChainBatchLogitsArgs<float>& args,
                                      const ChainBatchConstraints& constraints, Workspace& ws) {
  detail::for_each_constrained_sequence(
      cpu, args, constraints, ws, /*draft_rows=*/true,
      [&](const detail::LogitSequence<float>& s, const detail::LogitRows<float>& target,
          double* weights) {
        const auto tau = detail::block_verify_logits_unchecked<float>(
            s.warp, detail::sequence_chain_rows(args, s, target), s.stream, weights,
            ArgName("draft_tokens", s.slice.index), s.scratch, s.emitted.data());
        return ChainVerdict{tau, tau + 1};
      });
}

/// verify_block_batch_logits with the draft side given as probabilities:
/// `args.draft_logits` holds the G draft probability rows (contiguous, as vLLM's draft_probs),
/// used as given (not warped). Sequence b is verify_block of its transformed target rows warped
/// with warps[b] (or warps[0]) and its draft rows, on streams[b], bit for bit. Every draft token
/// must have draft probability > 0 (else specdec::Error naming "draft_tokens[b][i]"). Layout,
/// workspace (chain_batch_workspace_size) and errors as
/// verify_chain_batch_logits (the draft rows named draft_logits).
inline void verify_block_batch_draft_probs(const backend::Cpu& cpu,
                                           const ChainBatchLogitsArgs<float>& args,
                                           const ChainBatchConstraints& constraints,
                                           Workspace& ws) {
  detail::check_contiguous("draft_logits", args.draft_logits);
  detail::for_each_constrained_sequence(
      cpu, args, constraints, ws, /*draft_rows=*/true,
      [&](const detail::LogitSequence<float>& s, const detail::LogitRows<float>& target,
          double* weights) {
        auto chain = detail::sequence_chain_rows(args, s, target);
        chain.draft_probs = args.draft_logits.row_data(s.slice.first);
        const auto tau = detail::block_verify_logits_unchecked<float>(
            s.warp, chain, s.stream, weights, ArgName("draft_tokens", s.slice.index), s.scratch,
            s.emitted.data());
        return ChainVerdict{tau, tau + 1};
      });
}

/// Greedy matching of a chain batch against constrained target logits (`draft_logits` empty;
/// `warps` and `streams` are checked as the other batches' but not read): sequence b is
/// verify_chain_greedy_logits of its rows, tokens and constraints, bit for bit.
/// Workspace and errors as verify_chain_batch_logits.
inline void verify_chain_batch_greedy_logits(const backend::Cpu& cpu,
                                             const ChainBatchLogitsArgs<float>& args,
                                             const ChainBatchConstraints& constraints,
                                             Workspace& ws) {
  detail::for_each_constrained_target_chain(
      cpu, args, constraints, ws, [](const detail::LogitSequence<float>& s, const auto& chain) {
        return detail::verify_chain_greedy_logits_unchecked<float>(chain, s.emitted.data(),
                                                                   s.scratch);
      });
}

/// Typical acceptance (`rule`) of a chain batch against constrained target logits (`draft_logits`
/// empty): sequence b is verify_chain_typical_logits of its rows, tokens, warps[b]
/// (or warps[0]), streams[b] and constraints, bit for bit. Workspace and errors as
/// verify_chain_batch_logits, and epsilon and delta.
inline void verify_chain_batch_typical_logits(const backend::Cpu& cpu,
                                              const ChainBatchLogitsArgs<float>& args,
                                              const Typical& rule,
                                              const ChainBatchConstraints& constraints,
                                              Workspace& ws) {
  check_typical_parameters(rule.epsilon, rule.delta);
  detail::for_each_constrained_target_chain(
      cpu, args, constraints, ws, [&](const detail::LogitSequence<float>& s, const auto& chain) {
        return detail::verify_chain_typical_logits_unchecked<float>(s.warp, rule, chain, s.stream,
                                                                    s.emitted.data(), s.scratch);
      });
}

/// Bytes of Workspace verify_tree_batch_logits (and its target-only form) takes on
/// `cpu` for `shape` (batch, largest tree, vocab).
inline std::size_t tree_batch_workspace_size(const backend::Cpu& cpu, const TreeBatchShape& shape) {
  return detail::sequence_loop_bytes(
      cpu, shape.batch, detail::constrained_tree_scratch_bytes(shape.vocab, shape.max_nodes));
}

/// Tree verification from logits with constraints for B ragged trees: `args` in TreeBatchArgs'
/// layout with logits in `target_rows` and `draft_rows` (N + B rows each, tree b's from row
/// node_offsets[b] + b, root row first), `warps` one per tree or one shared, `constraints` as
/// for chains over the N + B target rows (a node's row: its ancestors' tokens and its own are its
/// draft prefix). Tree b is verify_tree_logits(rule, warps[b], ...) of its rows and
/// constraints, bit for bit. float logits, host memory, contiguous rows. Size `ws` with
/// tree_batch_workspace_size. Throws specdec::Error naming the bad argument (a tree's
/// as "tokens[b][i]", "penalties.tokens[b][i]", "bitmask[b][i]"); with `status`, a tree whose
/// data or constraints are bad fails alone.
inline void verify_tree_batch_logits(const backend::Cpu& cpu, const Rule& rule,
                                     const TreeBatchArgs& args, std::span<const Warp> warps,
                                     const ChainBatchConstraints& constraints, Workspace& ws) {
  const std::int64_t vocab = args.target_rows.cols;
  detail::for_each_constrained_tree(
      cpu, &rule, args, warps, constraints, ws,
      [&](const Warp& warp, TreeView tree, const RowSpans<float>& logits,
          const detail::LogitRows<float>& target, const TreeBuffers& buffers, std::byte* bytes,
          const RandomStream& stream, const detail::RaggedSlice& seq) {
        const detail::TreeLogitRows<float> view{
            .target = target,
            .draft = {logits.draft.data(), vocab, "draft_rows", seq.first_row()},
            .vocab = vocab};
        return detail::verify_tree_logits_unchecked<float>(
            rule, warp, tree, view, stream, buffers, detail::tree_logits_scratch(bytes, vocab));
      });
}

/// verify_tree_batch_logits without draft rows (`draft_rows` empty): tree b is
/// verify_tree_target_only_logits of its rows and constraints, bit for bit. Workspace
/// and errors as verify_tree_batch_logits.
inline void verify_tree_batch_target_only_logits(const backend::Cpu& cpu, const TreeBatchArgs& args,
                                                 std::span<const Warp> warps,
                                                 const ChainBatchConstraints& constraints,
                                                 Workspace& ws) {
  const std::int64_t vocab = args.target_rows.cols;
  detail::for_each_constrained_tree(
      cpu, nullptr, args, warps, constraints, ws,
      [&](const Warp& warp, TreeView tree, const RowSpans<float>&,
          const detail::LogitRows<float>& target, const TreeBuffers& buffers, std::byte* bytes,
          const RandomStream& stream, const detail::RaggedSlice&) {
        return detail::verify_tree_target_only_logits_unchecked<float>(
            warp, tree, target, vocab, stream, buffers, detail::chain_logits_scratch(bytes, vocab));
      });
}

}  // namespace specdec::constrained
