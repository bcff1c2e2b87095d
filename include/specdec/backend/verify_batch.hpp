// SPDX-License-Identifier: MIT
// Batched verification: chain (standard rejection) and tree verification for B sequences, on any
// backend, and both without draft rows (target-only).
#pragma once

#include <string>

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/shapes.hpp"
#include "specdec/backend/status.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/tree/tree_view.hpp"
#include "specdec/verify/rule.hpp"

namespace specdec {

/// The views of a ragged chain batch of B sequences (verify_chain_batch). Sequence b drafted
/// gamma_b = draft_offsets[b + 1] - draft_offsets[b] tokens (0 allowed: it only samples its bonus
/// token); G = draft_offsets[B] tokens in all. Every per-token array is CSR in draft_offsets, and
/// the arrays with one more entry per sequence are shifted by b:
///   draft_offsets: B + 1 entries, draft_offsets[0] = 0, non-decreasing;
///   target_rows:   G + B warped rows; sequence b's gamma_b + 1 rows start at row
///                  draft_offsets[b] + b (row i = the target after its first i draft tokens;
///                  its last row gives the bonus token);
///   draft_rows:    G warped rows; sequence b's start at row draft_offsets[b] (row i = the row
///                  its draft token i was drawn from);
///   draft_tokens:  G tokens; sequence b's at draft_offsets[b] .. draft_offsets[b + 1];
///   streams:       B RandomStreams;
///   emitted:       G + B tokens; sequence b's gamma_b + 1 at draft_offsets[b] + b: the accepted
///                  tokens, then the correction or bonus token, then -1 (kNoToken) padding;
///   accepted:      B counts (0..gamma_b); sequence b emitted accepted[b] + 1 tokens.
/// With the same gamma for every sequence (uniform_draft_offsets) the arrays are the familiar
/// B * (gamma + 1) target rows, B x gamma draft tokens and B x (gamma + 1) emitted tokens.
///
/// Rows, tokens and outputs live where the backend computes. `draft_offsets` and `streams` are
/// Resident arrays: host memory (a span or vector), or `on_device(pointer, size)` in the
/// backend's memory. With both on the device a CUDA call makes no host copy, allocation or
/// synchronisation, so it can be captured in a CUDA graph and replayed after new offsets, streams
/// and rows are written to the same buffers. Device offsets are not scanned: they must be a valid
/// layout of G = draft_tokens.size() drafts (non-decreasing from 0 to G).
///
/// `status` (optional, B + 1 words where the outputs live: backend/status.hpp) asks for errors
/// found in a sequence's data to be reported instead of thrown: status[b] gets sequence b's
/// SequenceStatus (kOk, or the cause, its outputs then accepted = -1 and -1 tokens) and status[B]
/// the number of failed sequences; throw_if_failed turns a host copy into a specdec::Error. The
/// CUDA backend writes it from the kernels (a capturable call: no synchronisation); the CPU backend
/// writes the same codes where it would have thrown for one sequence. Errors of the call itself
/// (shapes, offsets, sizes) are thrown by both. Empty: the CPU throws, CUDA reports nothing.
struct ChainBatchArgs {
  Resident<const std::int32_t> draft_offsets{};
  MatrixView<const float> target_rows{};
  MatrixView<const float> draft_rows{};
  std::span<const Token> draft_tokens{};
  Resident<const RandomStream> streams{};
  std::span<Token> emitted{};
  std::span<std::int32_t> accepted{};
  std::span<std::int32_t> status{};
};

/// ChainBatchArgs with logits in place of warped rows (verify_chain_batch_logits): the same
/// layout, and `warps` holds one Warp per sequence or one for all. Warps on the device
/// (`on_device(warps, B)`) are read in place by the kernels, so a call with offsets, streams and
/// warps on the device can be captured in a CUDA graph; one shared host warp is passed by value,
/// per-sequence host warps are copied (not capturable). Device warps are not seen by the host: a
/// CUDA call with them takes the statistics path, so each must be a valid warp that path takes:
/// any but a top-k above 1024 and below V; a sequence whose warp is not (or has a bad field) gets
/// accepted = -1 and only -1 tokens (with `status`: SequenceStatus::kBadWarp). On the CPU backend
/// every array is read, and checked, as host memory; with `status` a bad warp fails its sequence.
template <class T>
struct ChainBatchLogitsArgs {
  Resident<const std::int32_t> draft_offsets{};
  MatrixView<const T> target_logits{};
  MatrixView<const T> draft_logits{};
  Resident<const Warp> warps{};
  std::span<const Token> draft_tokens{};
  Resident<const RandomStream> streams{};
  std::span<Token> emitted{};
  std::span<std::int32_t> accepted{};
  std::span<std::int32_t> status{};
};

/// The views of a batch of B ragged trees in CSR layout (verify_tree_batch). N = node_offsets[B]
/// nodes in all, N_b = node_offsets[b + 1] - node_offsets[b] in tree b (0 allowed: the root's
/// row gives a bonus token).
///   node_offsets:  B + 1 entries, node_offsets[0] = 0, non-decreasing;
///   trees:         N tokens and parents; tree b's nodes at node_offsets[b] .. node_offsets[b + 1]
///                  (trees.subtree(node_offsets[b], N_b)), parents local to the tree (-1 = root,
///                  else an earlier node of the same tree);
///   target_rows, draft_rows: N + B warped rows; tree b owns the N_b + 1 rows from
///                  node_offsets[b] + b, laid out as verify_tree's (root row first);
///   streams:       B RandomStreams;
///   accepted_nodes: N entries, CSR with node_offsets: tree b's accepted (local) node ids at
///                  node_offsets[b] .. node_offsets[b] + accepted[b] (the rest untouched);
///   accepted:      B counts; final_tokens: B correction or bonus tokens;
///   bonus:         B flags (1 = the walk ended at a leaf), or empty.
/// `node_offsets` and `streams` are Resident arrays, as ChainBatchArgs' are: with both on the
/// device a CUDA call copies nothing from the host and can be captured in a CUDA graph; device
/// offsets are not scanned and must be what the host array would hold (from 0, non-decreasing,
/// ending at N = trees.tokens.size()). `status`: as ChainBatchArgs' (B + 1 words, optional).
struct TreeBatchArgs {
  Resident<const std::int32_t> node_offsets{};
  TreeView trees{};
  MatrixView<const float> target_rows{};
  MatrixView<const float> draft_rows{};
  Resident<const RandomStream> streams{};
  std::span<std::int32_t> accepted_nodes{};
  std::span<std::int32_t> accepted{};
  std::span<Token> final_tokens{};
  std::span<std::uint8_t> bonus{};
  std::span<std::int32_t> status{};
};

/// Fills `offsets` (B + 1 entries) with the draft offsets of B sequences of `gamma` draft tokens
/// each (offsets[b] = b * gamma) and returns them, for a uniform ChainBatchArgs::draft_offsets.
inline std::span<const std::int32_t> uniform_draft_offsets(std::int64_t gamma,
                                                           std::span<std::int32_t> offsets) {
  if (offsets.empty()) detail::fail("offsets", "is empty, expected B + 1 >= 2 entries");
  if (gamma < 0 || gamma * static_cast<std::int64_t>(offsets.size() - 1) > INT32_MAX) {
    detail::fail("gamma", "{} is negative or too large for {} sequences", gamma,
                 offsets.size() - 1);
  }
  for (std::size_t b = 0; b < offsets.size(); ++b)
    offsets[b] = static_cast<std::int32_t>(static_cast<std::int64_t>(b) * gamma);
  return offsets;
}

namespace detail {

/// One specialisation per backend (backend/cpu/verify_batch.hpp, backend/cuda/verify_batch.hpp).
template <class Backend>
struct ChainBatchImpl : NoBackendImpl<Backend> {};
template <class Backend>
struct ChainBatchTargetOnlyImpl : NoBackendImpl<Backend> {};
template <class Backend>
struct TreeBatchTargetOnlyImpl : NoBackendImpl<Backend> {};
template <class Backend>
struct TreeBatchImpl : NoBackendImpl<Backend> {};

/// A chain batch's two row matrices, whichever its args call them.
template <class T>
struct ChainRows {
  MatrixView<const T> target;
  MatrixView<const T> draft;
  std::string_view target_name;
  std::string_view draft_name;
};
inline ChainRows<float> chain_rows(const ChainBatchArgs& args) {
  return {args.target_rows, args.draft_rows, "target_rows", "draft_rows"};
}
template <class T>
ChainRows<T> chain_rows(const ChainBatchLogitsArgs<T>& args) {
  return {args.target_logits, args.draft_logits, "target_logits", "draft_logits"};
}

/// Target-only verification reads no draft rows: a non-empty matrix there is a mistake (the call
/// meant for drafts with rows is verify_chain_batch / verify_tree_batch).
template <class T>
void check_no_draft_rows(std::string_view name, const MatrixView<const T>& draft) {
  if (draft.rows != 0 || draft.data != nullptr) {
    fail(name, "has {} rows; target-only verification reads none: leave it empty", draft.rows);
  }
}

/// The host checks every backend makes on a chain batch (ChainBatchArgs or
/// ChainBatchLogitsArgs<T>; `draft_rows` false: target-only, no draft rows); returns its sizes.
/// Warps are checked unless they are on the device of a backend that does not read host memory.
template <class Backend, class Args>
RaggedSizes check_chain_batch(const Args& args, bool draft_rows = true) {
  const RaggedSizes sizes =
      check_ragged<Backend>("draft_offsets", args.draft_offsets, args.draft_tokens.size());
  const std::int64_t batch = sizes.batch, drafts = sizes.total;
  const auto rows = chain_rows(args);
  check_matrix(rows.target_name, rows.target, {.rows = drafts + batch, .formula = "G + B"});
  if (draft_rows) {
    check_matrix(rows.draft_name, rows.draft,
                 {.rows = drafts, .formula = "G", .cols = rows.target.cols,
                  .cols_of = rows.target_name});
  } else {
    check_no_draft_rows(rows.draft_name, rows.draft);
  }
  check_size("draft_tokens", args.draft_tokens.size(), static_cast<std::size_t>(drafts));
  check_resident("streams", args.streams, static_cast<std::size_t>(batch));
  check_size("emitted", args.emitted.size(), static_cast<std::size_t>(drafts + batch));
  check_size("accepted", args.accepted.size(), static_cast<std::size_t>(batch));
  if (!args.status.empty()) check_size("status", args.status.size(), status_words(batch));
  if constexpr (requires { args.warps; }) {
    if (args.warps.on_device() && !kHostMemory<Backend>) {
      check_resident("warps", args.warps, static_cast<std::size_t>(batch));
    } else if (!args.status.empty() && kHostMemory<Backend>) {
      // Each sequence's warp is checked with it, a bad one failing that sequence only.
      if (args.warps.size() != 1 && args.warps.size() != static_cast<std::size_t>(batch)) {
        fail("warps", "has {} entries, expected 1 (shared) or {} (one per sequence)",
             args.warps.size(), batch);
      }
    } else {
      check_warp_list(args.warps.span(), batch, rows.target.cols, "sequence");
    }
  }
  return sizes;
}

/// The host checks every backend makes on a tree batch (`draft_rows` false: target-only, no draft
/// rows); returns its sizes (with device offsets, largest is ceil(N / B): see check_ragged).
template <class Backend>
RaggedSizes check_tree_batch(const TreeBatchArgs& args, bool draft_rows = true) {
  const RaggedSizes sizes =
      check_ragged<Backend>("node_offsets", args.node_offsets, args.trees.tokens.size());
  const auto batch = static_cast<std::size_t>(sizes.batch);
  const auto total = static_cast<std::size_t>(sizes.total);
  check_size("trees.tokens", args.trees.tokens.size(), total);
  check_size("trees.parents", args.trees.parents.size(), total);
  const auto& target = args.target_rows;
  check_matrix("target_rows", target,
               {.rows = sizes.total + sizes.batch, .formula = "N + B"});
  if (draft_rows) {
    check_matrix("draft_rows", args.draft_rows,
                 {.rows = target.rows, .formula = "N + B", .cols = target.cols,
                  .cols_of = "target_rows"});
  } else {
    check_no_draft_rows("draft_rows", args.draft_rows);
  }
  check_resident("streams", args.streams, batch);
  check_size("accepted_nodes", args.accepted_nodes.size(), total);
  check_size("accepted", args.accepted.size(), batch);
  check_size("final_tokens", args.final_tokens.size(), batch);
  if (!args.bonus.empty()) check_size("bonus", args.bonus.size(), batch);
  if (!args.status.empty()) check_size("status", args.status.size(), status_words(sizes.batch));
  return sizes;
}

}  // namespace detail

/// Bytes of workspace a batched chain verification needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const ChainBatchShape& shape) {
  return detail::ChainBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Bytes of workspace a batched tree verification needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const TreeBatchShape& shape) {
  return detail::TreeBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Chain verification with standard rejection sampling for a ragged batch of B sequences (layout:
/// ChainBatchArgs): sequence b is verify_chain(Rejection{}, ...) of its rows, bit for bit on the
/// CPU backend.
/// Randomness: that of verify_chain per sequence (position i: draw 0 of
/// `streams[b].at_position(streams[b].position + i)` tests, draw 1 corrects; the bonus token is
/// draw 0 at position + gamma_b), so results depend neither on B nor on the backend.
/// Rows, tokens and outputs live where the backend computes; offsets and streams are Resident.
/// `workspace`: a specdec::Workspace (CPU) or a backend::DeviceWorkspace of at least
/// workspace_size(backend, ChainBatchShape{.batch = B, .max_gamma = largest gamma_b,
/// .vocab = V}) bytes (CUDA).
/// Throws specdec::Error naming the bad argument ("draft_tokens[3][1]" = sequence 3, token 1;
/// the CPU backend checks every row and token, the CUDA backend shapes and parameters only).
/// The CPU backend needs contiguous rows (stride == V); CUDA takes any stride >= V.
template <backend::BackendPolicy Backend, class Scratch>
void verify_chain_batch(const Backend& backend, const ChainBatchArgs& args, Scratch&& workspace) {
  detail::ChainBatchImpl<Backend>::run(backend, args, std::forward<Scratch>(workspace));
}

/// As verify_chain_batch, from raw logits (T = float, Eigen::half, Eigen::bfloat16; on CUDA the
/// same bits as __half / __nv_bfloat16) in the same layout: each row is first warped as
/// warp_logits_batch warps it, with warps[b] (or warps[0] for every sequence) applied to both the
/// target and the draft rows of sequence b, then verified. The warped rows are never written back.
/// Size the workspace with ChainBatchShape{..., .from_logits = true}. Same draws.
template <backend::BackendPolicy Backend, class T, class Scratch>
void verify_chain_batch_logits(const Backend& backend, const ChainBatchLogitsArgs<T>& args,
                               Scratch&& workspace) {
  detail::ChainBatchImpl<Backend>::template run_logits<T>(
      backend, args, std::forward<Scratch>(workspace));
}

/// Chain verification of drafts without draft rows (verify_chain_target_only per sequence) for a
/// ragged batch of B sequences in ChainBatchArgs' layout with `draft_rows` left empty (0 draft
/// tokens allowed). Sequence b is verify_chain_target_only of its rows, bit for bit, with
/// streams[b]. Size the workspace as verify_chain_batch's (ChainBatchShape). Throws
/// specdec::Error naming the bad argument ("draft_tokens[3][1]" = sequence 3, token 1; the CUDA
/// backend checks shapes only and gives a sequence with a token outside the vocabulary
/// accepted = -1). The CPU backend needs contiguous rows (stride == V); CUDA takes any stride.
template <backend::BackendPolicy Backend, class Scratch>
void verify_chain_batch_target_only(const Backend& backend, const ChainBatchArgs& args,
                                    Scratch&& workspace) {
  detail::ChainBatchTargetOnlyImpl<Backend>::run(backend, args, std::forward<Scratch>(workspace));
}

/// verify_chain_batch_target_only from raw logits (T = float, Eigen::half, Eigen::bfloat16) in
/// ChainBatchLogitsArgs' layout with `draft_logits` left empty (0 draft tokens allowed): sequence
/// b is verify_chain_target_only_logits of its rows with warps[b] (or warps[0]) and streams[b],
/// bit for bit. Size the workspace with ChainBatchShape{..., .from_logits = true}. Throws
/// specdec::Error naming the bad argument. CPU only for now.
template <backend::BackendPolicy Backend, class T, class Scratch>
void verify_chain_batch_target_only_logits(const Backend& backend,
                                           const ChainBatchLogitsArgs<T>& args,
                                           Scratch&& workspace) {
  detail::ChainBatchTargetOnlyImpl<Backend>::template run_logits<T>(
      backend, args, std::forward<Scratch>(workspace));
}

/// Tree verification for B ragged trees (layout: TreeBatchArgs): tree b is verify_tree(rule, ...)
/// of its rows, bit for bit on the CPU backend. `rule` is Recursive (RRS, trees drawn without
/// replacement), MultiRound (i.i.d. children), Rejection (one child per node) or any other Rule.
/// The CUDA backend takes Recursive, MultiRound and Rejection (one block per tree).
/// Randomness: verify_tree's per sequence (node n's children use streams[b].at_node(n + 1)).
/// Size the workspace with TreeBatchShape{.batch = B, .max_nodes = largest N_b, .vocab = V}.
/// With node_offsets and streams on the device (TreeBatchArgs) a CUDA call copies nothing from
/// the host and can be captured in a CUDA graph; with host arrays a capture fails with
/// specdec::Error.
template <backend::BackendPolicy Backend, class Scratch>
void verify_tree_batch(const Backend& backend, const Rule& rule, const TreeBatchArgs& args,
                       Scratch&& workspace) {
  detail::TreeBatchImpl<Backend>::run(backend, rule, args, std::forward<Scratch>(workspace));
}

/// Tree verification of candidate trees without draft rows (verify_tree_target_only per tree) for
/// B ragged trees in TreeBatchArgs' layout with `draft_rows` left empty: tree b is
/// verify_tree_target_only of its rows, bit for bit, with streams[b]. Size the workspace as
/// verify_tree_batch's (TreeBatchShape). The CPU backend needs contiguous rows; on CUDA a tree
/// with a token outside the vocabulary gets accepted = -1 and final token -1.
template <backend::BackendPolicy Backend, class Scratch>
void verify_tree_batch_target_only(const Backend& backend, const TreeBatchArgs& args,
                                   Scratch&& workspace) {
  detail::TreeBatchTargetOnlyImpl<Backend>::run(backend, args,
                                                std::forward<Scratch>(workspace));
}

}  // namespace specdec
