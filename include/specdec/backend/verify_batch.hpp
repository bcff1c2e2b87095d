// SPDX-License-Identifier: MIT
// Batched verification: chain (standard rejection) and tree verification for B sequences, on any
// backend, and both without draft rows (target-only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "specdec/backend/policy.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/tree/tree_view.hpp"
#include "specdec/verify/rule.hpp"

namespace specdec {

/// The shape a batched chain verification is sized for: `batch` sequences of at most `max_gamma`
/// draft tokens each over `vocab` tokens. `from_logits`: sized for verify_chain_batch_logits.
struct ChainBatchShape {
  std::int64_t batch = 0;
  std::int64_t max_gamma = 0;
  std::int64_t vocab = 0;
  bool from_logits = false;
};

/// The shape a batched tree verification is sized for: `batch` trees of at most `max_nodes` nodes
/// each over `vocab` tokens.
struct TreeBatchShape {
  std::int64_t batch = 0;
  std::int64_t max_nodes = 0;
  std::int64_t vocab = 0;
};

/// The views of a ragged chain batch of B sequences (verify_chain_batch). Sequence b drafted
/// gamma_b = draft_offsets[b + 1] - draft_offsets[b] tokens (0 allowed: it only samples its bonus
/// token); G = draft_offsets[B] tokens in all. Every per-token array is CSR in draft_offsets, and
/// the arrays with one more entry per sequence are shifted by b:
///   draft_offsets: B + 1 entries, draft_offsets[0] = 0, non-decreasing (host memory);
///   target_rows:   G + B warped rows; sequence b's gamma_b + 1 rows start at row
///                  draft_offsets[b] + b (row i = the target after its first i draft tokens;
///                  its last row gives the bonus token);
///   draft_rows:    G warped rows; sequence b's start at row draft_offsets[b] (row i = the row
///                  its draft token i was drawn from);
///   draft_tokens:  G tokens; sequence b's at draft_offsets[b] .. draft_offsets[b + 1];
///   streams:       B RandomStreams (host memory);
///   emitted:       G + B tokens; sequence b's gamma_b + 1 at draft_offsets[b] + b: the accepted
///                  tokens, then the correction or bonus token, then -1 (kNoToken) padding;
///   accepted:      B counts (0..gamma_b); sequence b emitted accepted[b] + 1 tokens.
/// With the same gamma for every sequence (uniform_draft_offsets) the arrays are the familiar
/// B * (gamma + 1) target rows, B x gamma draft tokens and B x (gamma + 1) emitted tokens.
///
/// Graph-safe form (CUDA backend): `device_draft_offsets` (B + 1) and `device_streams` (B) in
/// device memory in place of draft_offsets and streams, which stay empty; B is accepted.size()
/// and G draft_tokens.size(). The call then makes no host copy, allocation or synchronisation, so
/// it can be captured in a CUDA graph and replayed after new offsets, streams and rows are
/// written to the same buffers. The device arrays are not scanned: offsets must be a valid layout
/// of G drafts (non-decreasing from 0 to G). On the CPU backend they are read as host memory.
struct ChainBatchArgs {
  std::span<const std::int32_t> draft_offsets{};
  MatrixView<const float> target_rows{};
  MatrixView<const float> draft_rows{};
  std::span<const Token> draft_tokens{};
  std::span<const RandomStream> streams{};
  std::span<Token> emitted{};
  std::span<std::int32_t> accepted{};
  const std::int32_t* device_draft_offsets = nullptr;
  const RandomStream* device_streams = nullptr;
};

/// ChainBatchArgs with logits in place of warped rows (verify_chain_batch_logits): the same
/// layout, and `warps` holds one Warp per sequence or one for all (host memory).
///
/// Graph-safe form (CUDA backend): `device_draft_offsets` (B + 1) and `device_streams` (B) in
/// device memory in place of draft_offsets and streams, which stay empty; B is accepted.size()
/// and G draft_tokens.size(). The call then makes no host copy, allocation or synchronisation,
/// so it can be captured in a CUDA graph and replayed after new offsets, streams and logits are
/// written to the same buffers. The device arrays are not scanned: offsets must be a valid
/// layout of G drafts (non-decreasing from 0 to G). With one warp for all sequences nothing else
/// is copied; per-sequence warps are copied from host memory (not capturable) unless they are
/// given as `device_warps` (B warps in device memory; `warps` then stays empty). Device warps are
/// not seen by the host: a CUDA call with them takes the statistics path, so each must be a valid
/// warp that path takes: any but a top-k above 1024 and below V; a sequence whose warp is not (or
/// has a bad field) gets accepted = -1 and only -1 tokens. On the CPU backend the device arrays are
/// read as host memory (device warps checked as host warps are, any warp).
template <class T>
struct ChainBatchLogitsArgs {
  std::span<const std::int32_t> draft_offsets{};
  MatrixView<const T> target_logits{};
  MatrixView<const T> draft_logits{};
  std::span<const Warp> warps{};
  std::span<const Token> draft_tokens{};
  std::span<const RandomStream> streams{};
  std::span<Token> emitted{};
  std::span<std::int32_t> accepted{};
  const std::int32_t* device_draft_offsets = nullptr;
  const RandomStream* device_streams = nullptr;
  const Warp* device_warps = nullptr;
};

/// The views of a batch of B ragged trees in CSR layout (verify_tree_batch). N = node_offsets[B]
/// nodes in all, N_b = node_offsets[b + 1] - node_offsets[b] in tree b (0 allowed: the root's
/// row gives a bonus token).
///   node_offsets:  B + 1 entries, node_offsets[0] = 0, non-decreasing (host memory);
///   trees:         N tokens and parents; tree b's nodes at node_offsets[b] .. node_offsets[b + 1]
///                  (trees.subtree(node_offsets[b], N_b)), parents local to the tree (-1 = root,
///                  else an earlier node of the same tree);
///   target_rows, draft_rows: N + B warped rows; tree b owns the N_b + 1 rows from
///                  node_offsets[b] + b, laid out as verify_tree's (root row first);
///   streams:       B RandomStreams (host memory);
///   accepted_nodes: N entries, CSR with node_offsets: tree b's accepted (local) node ids at
///                  node_offsets[b] .. node_offsets[b] + accepted[b] (the rest untouched);
///   accepted:      B counts; final_tokens: B correction or bonus tokens;
///   bonus:         B flags (1 = the walk ended at a leaf), or empty.
/// For a call captured in a CUDA graph, the offsets and streams can live in the backend's memory
/// instead (device_offsets, device_streams): then B is accepted.size().
struct TreeBatchArgs {
  std::span<const std::int32_t> node_offsets{};
  TreeView trees{};
  MatrixView<const float> target_rows{};
  MatrixView<const float> draft_rows{};
  std::span<const RandomStream> streams{};
  std::span<std::int32_t> accepted_nodes{};
  std::span<std::int32_t> accepted{};
  std::span<Token> final_tokens{};
  std::span<std::uint8_t> bonus{};
  /// node_offsets in the backend's memory (B + 1 entries, B = accepted.size()), read where the
  /// backend computes: node_offsets must then be empty. A CUDA call with device_offsets and
  /// device_streams makes no host copy, allocation or synchronisation, so it can be captured in
  /// a CUDA graph and replayed with new contents. Not scanned: the offsets must be what the host
  /// span would hold (starting at 0, non-decreasing, ending at N = trees.tokens.size()).
  const std::int32_t* device_offsets = nullptr;
  /// streams in the backend's memory (B entries), read where the backend computes: streams must
  /// then be empty. Not scanned.
  const RandomStream* device_streams = nullptr;
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
struct ChainBatchImpl {
  static_assert(dependent_false<Backend>,
                "verify_chain_batch: no implementation for this backend; include "
                "specdec/backend/cpu/verify_batch.hpp or specdec/backend/cuda/verify_batch.hpp");
};
template <class Backend>
struct ChainBatchTargetOnlyImpl {
  static_assert(dependent_false<Backend>,
                "verify_chain_batch_target_only: no implementation for this backend; include "
                "specdec/backend/cpu/verify_batch.hpp or specdec/backend/cuda/verify_batch.hpp");
};
template <class Backend>
struct TreeBatchTargetOnlyImpl {
  static_assert(dependent_false<Backend>,
                "verify_tree_batch_target_only: no implementation for this backend; include "
                "specdec/backend/cpu/verify_batch.hpp or specdec/backend/cuda/verify_batch.hpp");
};
template <class Backend>
struct TreeBatchImpl {
  static_assert(dependent_false<Backend>,
                "verify_tree_batch: no implementation for this backend; include "
                "specdec/backend/cpu/verify_batch.hpp or specdec/backend/cuda/verify_batch.hpp");
};

/// Host checks of CSR offsets (B + 1 entries, starting at 0, non-decreasing); returns the largest
/// count of one sequence.
inline std::int64_t check_offsets(std::string_view name, std::span<const std::int32_t> offsets) {
  if (offsets.size() < 2) fail(name, "has {} entries, expected B + 1 >= 2", offsets.size());
  if (offsets[0] != 0) fail(ArgName(name, 0), "is {}, expected 0", offsets[0]);
  std::int64_t largest = 0;
  for (std::size_t b = 1; b < offsets.size(); ++b) {
    if (offsets[b] < offsets[b - 1]) {
      fail(ArgName(name, static_cast<std::int64_t>(b)), "{} is smaller than {}[{}] = {}",
           offsets[b], name, b - 1, offsets[b - 1]);
    }
    largest = std::max<std::int64_t>(largest, offsets[b] - offsets[b - 1]);
  }
  return largest;
}

/// Host checks of a row matrix: `expected_rows` rows of at least one column, stride >= columns.
inline void check_rows(std::string_view name, std::int64_t rows, std::int64_t cols,
                       std::int64_t stride, std::int64_t expected_rows, std::string_view formula) {
  if (cols < 1) fail(name, "has {} columns, expected at least 1", cols);
  if (rows != expected_rows)
    fail(name, "has {} rows, expected {} = {}", rows, formula, expected_rows);
  if (stride < cols) fail(name, "stride {} is smaller than its {} columns", stride, cols);
}

/// The shape checks every backend makes on the host for a chain batch; returns the largest gamma.
template <class T>
std::int64_t check_chain_batch(std::span<const std::int32_t> draft_offsets,
                               MatrixView<const T> target, MatrixView<const T> draft,
                               std::size_t draft_tokens, std::size_t streams, std::size_t emitted,
                               std::size_t accepted, std::string_view target_name,
                               std::string_view draft_name) {
  const std::int64_t largest = check_offsets("draft_offsets", draft_offsets);
  const auto batch = static_cast<std::int64_t>(draft_offsets.size() - 1);
  const std::int64_t drafts = draft_offsets.back();
  check_rows(target_name, target.rows, target.cols, target.stride, drafts + batch, "G + B");
  check_rows(draft_name, draft.rows, draft.cols, draft.stride, drafts, "G");
  if (draft.cols != target.cols) {
    fail(draft_name, "has {} columns, expected {} like {}", draft.cols, target.cols, target_name);
  }
  detail::check_size("draft_tokens", draft_tokens, static_cast<std::size_t>(drafts));
  detail::check_size("streams", streams, static_cast<std::size_t>(batch));
  detail::check_size("emitted", emitted, static_cast<std::size_t>(drafts + batch));
  detail::check_size("accepted", accepted, static_cast<std::size_t>(batch));
  return largest;
}

/// The checks every backend makes on warps given per sequence (one shared, or one per sequence).
inline void check_sequence_warps(std::span<const Warp> warps, std::int64_t batch,
                                 std::int64_t vocab) {
  check_warp_list(warps, batch, vocab, "sequence");
}

/// Target-only verification reads no draft rows: a non-empty `draft_rows` is a mistake (the call
/// meant for drafts with rows is verify_chain_batch / verify_tree_batch).
inline void check_no_draft_rows(MatrixView<const float> draft_rows) {
  if (draft_rows.rows != 0 || draft_rows.data != nullptr) {
    fail("draft_rows", "has {} rows; target-only verification reads none: leave it empty",
         draft_rows.rows);
  }
}

/// The host checks of a chain batch without draft rows (verify_chain_batch_target_only); returns
/// the largest gamma.
inline std::int64_t check_chain_batch_target_only(const ChainBatchArgs& args) {
  const std::int64_t largest = check_offsets("draft_offsets", args.draft_offsets);
  const auto batch = static_cast<std::int64_t>(args.draft_offsets.size() - 1);
  const std::int64_t drafts = args.draft_offsets.back();
  const auto& target = args.target_rows;
  check_rows("target_rows", target.rows, target.cols, target.stride, drafts + batch, "G + B");
  check_no_draft_rows(args.draft_rows);
  detail::check_size("draft_tokens", args.draft_tokens.size(), static_cast<std::size_t>(drafts));
  detail::check_size("streams", args.streams.size(), static_cast<std::size_t>(batch));
  detail::check_size("emitted", args.emitted.size(), static_cast<std::size_t>(drafts + batch));
  detail::check_size("accepted", args.accepted.size(), static_cast<std::size_t>(batch));
  return largest;
}

/// The host checks of a chain batch without draft rows from logits
/// (verify_chain_batch_target_only_logits): shapes, an empty `draft_logits`, the warps.
template <class T>
void check_chain_batch_target_only_logits(const ChainBatchLogitsArgs<T>& args) {
  check_offsets("draft_offsets", args.draft_offsets);
  const auto batch = static_cast<std::int64_t>(args.draft_offsets.size() - 1);
  const std::int64_t drafts = args.draft_offsets.back();
  const auto& target = args.target_logits;
  check_rows("target_logits", target.rows, target.cols, target.stride, drafts + batch, "G + B");
  if (args.draft_logits.rows != 0 || args.draft_logits.data != nullptr) {
    fail("draft_logits", "has {} rows; target-only verification reads none: leave it empty",
         args.draft_logits.rows);
  }
  detail::check_size("draft_tokens", args.draft_tokens.size(), static_cast<std::size_t>(drafts));
  detail::check_size("streams", args.streams.size(), static_cast<std::size_t>(batch));
  detail::check_size("emitted", args.emitted.size(), static_cast<std::size_t>(drafts + batch));
  detail::check_size("accepted", args.accepted.size(), static_cast<std::size_t>(batch));
  check_sequence_warps(args.warps, batch, target.cols);
}

/// The host checks of a device-resident array: when it is set, its host span must be empty.
inline void check_device_resident(std::string_view device_name, const void* device,
                                  std::string_view host_name, std::size_t host_size) {
  if (device != nullptr && host_size != 0) {
    fail(device_name, "is set, so {} must be empty (it has {} entries): give one or the other",
         host_name, host_size);
  }
}

/// The batch and node count of a tree batch: from node_offsets, or with device_offsets from the
/// sizes of accepted (B) and trees.tokens (N); largest is then ceil(N / B), the tree size a
/// workspace sized for the largest tree is laid out for at least.
struct TreeBatchSizes {
  std::int64_t batch = 0;
  std::int64_t total = 0;
  std::int64_t largest = 0;
};

inline TreeBatchSizes tree_batch_sizes(const TreeBatchArgs& args) {
  check_device_resident("device_offsets", args.device_offsets, "node_offsets",
                        args.node_offsets.size());
  check_device_resident("device_streams", args.device_streams, "streams", args.streams.size());
  if (args.device_offsets == nullptr) {
    const std::int64_t largest = check_offsets("node_offsets", args.node_offsets);
    return {static_cast<std::int64_t>(args.node_offsets.size() - 1), args.node_offsets.back(),
            largest};
  }
  const auto batch = static_cast<std::int64_t>(args.accepted.size());
  if (batch < 1)
    fail("accepted", "is empty: with device_offsets, B is the size of accepted (at least 1)");
  const auto total = static_cast<std::int64_t>(args.trees.tokens.size());
  if (total > INT32_MAX)
    fail("trees.tokens", "has {} nodes, at most {} are supported", total, INT32_MAX);
  return {batch, total, (total + batch - 1) / batch};
}

/// On the CPU backend the backend's memory is the host's: device_offsets and device_streams
/// become the host spans over them (B = accepted.size()), checked as host arrays are.
inline TreeBatchArgs host_resident(const TreeBatchArgs& args) {
  TreeBatchArgs out = args;
  const std::size_t batch = args.accepted.size();
  if (args.device_offsets != nullptr) {
    check_device_resident("device_offsets", args.device_offsets, "node_offsets",
                          args.node_offsets.size());
    out.node_offsets = {args.device_offsets, batch + 1};
    out.device_offsets = nullptr;
  }
  if (args.device_streams != nullptr) {
    check_device_resident("device_streams", args.device_streams, "streams", args.streams.size());
    out.streams = {args.device_streams, batch};
    out.device_streams = nullptr;
  }
  return out;
}

/// The args a backend's implementation sees: unchanged, or host_resident on the CPU.
template <class Backend>
TreeBatchArgs resident_args(const TreeBatchArgs& args) {
  if constexpr (std::is_same_v<std::remove_cvref_t<Backend>, backend::Cpu>) {
    return host_resident(args);
  } else {
    return args;
  }
}

/// The chain args a backend's implementation sees (ChainBatchArgs or ChainBatchLogitsArgs<T>):
/// unchanged, or on the CPU, whose memory is the host's, with device_draft_offsets,
/// device_streams and device_warps as the host spans over them (B = accepted.size()), checked as
/// host arrays are.
template <class Backend, class Args>
Args chain_resident_args(const Args& args) {
  check_device_resident("device_draft_offsets", args.device_draft_offsets, "draft_offsets",
                        args.draft_offsets.size());
  check_device_resident("device_streams", args.device_streams, "streams", args.streams.size());
  constexpr bool kWarps = requires { args.device_warps; };
  if constexpr (kWarps) {
    check_device_resident("device_warps", args.device_warps, "warps", args.warps.size());
  }
  if constexpr (!std::is_same_v<std::remove_cvref_t<Backend>, backend::Cpu>) {
    return args;
  } else {
    Args out = args;
    const std::size_t batch = args.accepted.size();
    if constexpr (kWarps) {
      if (args.device_warps != nullptr) {
        out.warps = {args.device_warps, batch};
        out.device_warps = nullptr;
      }
    }
    if (args.device_draft_offsets != nullptr) {
      out.draft_offsets = {args.device_draft_offsets, batch + 1};
      out.device_draft_offsets = nullptr;
    }
    if (args.device_streams != nullptr) {
      out.streams = {args.device_streams, batch};
      out.device_streams = nullptr;
    }
    return out;
  }
}

/// Host checks of a tree batch's CSR offsets and shapes (without draft rows when `draft_rows` is
/// false: target-only verification); returns the largest tree (with device_offsets, ceil(N / B):
/// see TreeBatchSizes).
inline std::int64_t check_tree_batch(const TreeBatchArgs& args, bool draft_rows = true) {
  const TreeBatchSizes sizes = tree_batch_sizes(args);
  const std::int64_t largest = sizes.largest;
  const std::int64_t batch = sizes.batch;
  const auto total = static_cast<std::size_t>(sizes.total);
  detail::check_size("trees.tokens", args.trees.tokens.size(), total);
  detail::check_size("trees.parents", args.trees.parents.size(), total);
  const auto& target = args.target_rows;
  check_rows("target_rows", target.rows, target.cols, target.stride,
             static_cast<std::int64_t>(total) + batch, "N + B");
  const auto& draft = args.draft_rows;
  if (draft_rows) {
    check_rows("draft_rows", draft.rows, draft.cols, draft.stride, target.rows, "N + B");
    if (draft.cols != target.cols)
      fail("draft_rows", "has {} columns, expected {} like target_rows", draft.cols, target.cols);
  } else {
    check_no_draft_rows(draft);
  }
  if (args.device_streams == nullptr)
    detail::check_size("streams", args.streams.size(), static_cast<std::size_t>(batch));
  detail::check_size("accepted_nodes", args.accepted_nodes.size(), total);
  detail::check_size("accepted", args.accepted.size(), static_cast<std::size_t>(batch));
  detail::check_size("final_tokens", args.final_tokens.size(), static_cast<std::size_t>(batch));
  if (!args.bonus.empty())
    detail::check_size("bonus", args.bonus.size(), static_cast<std::size_t>(batch));
  return largest;
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
/// Rows, tokens and outputs live where the backend computes; offsets and streams are host memory.
/// `workspace`: a specdec::Workspace (CPU) or a backend::DeviceWorkspace of at least
/// workspace_size(backend, ChainBatchShape{.batch = B, .max_gamma = largest gamma_b,
/// .vocab = V}) bytes (CUDA).
/// Throws specdec::Error naming the bad argument ("draft_tokens[3][1]" = sequence 3, token 1;
/// the CPU backend checks every row and token, the CUDA backend shapes and parameters only).
/// The CPU backend needs contiguous rows (stride == V); CUDA takes any stride >= V.
template <backend::BackendPolicy Backend, class Scratch>
void verify_chain_batch(const Backend& backend, const ChainBatchArgs& args, Scratch&& workspace) {
  detail::ChainBatchImpl<Backend>::run(backend, detail::chain_resident_args<Backend>(args),
                                       std::forward<Scratch>(workspace));
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
      backend, detail::chain_resident_args<Backend>(args), std::forward<Scratch>(workspace));
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
  detail::ChainBatchTargetOnlyImpl<Backend>::run(
      backend, detail::chain_resident_args<Backend>(args), std::forward<Scratch>(workspace));
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
      backend, detail::chain_resident_args<Backend>(args), std::forward<Scratch>(workspace));
}

/// Tree verification for B ragged trees (layout: TreeBatchArgs): tree b is verify_tree(rule, ...)
/// of its rows, bit for bit on the CPU backend. `rule` is Recursive (RRS, trees drawn without
/// replacement), MultiRound (i.i.d. children), Rejection (one child per node) or any other Rule.
/// The CUDA backend takes Recursive, MultiRound and Rejection (one block per tree).
/// Randomness: verify_tree's per sequence (node n's children use streams[b].at_node(n + 1)).
/// Size the workspace with TreeBatchShape{.batch = B, .max_nodes = largest N_b, .vocab = V}.
/// With device_offsets and device_streams (TreeBatchArgs) a CUDA call copies nothing from the
/// host and can be captured in a CUDA graph; with host spans a capture fails with specdec::Error.
template <backend::BackendPolicy Backend, class Scratch>
void verify_tree_batch(const Backend& backend, const Rule& rule, const TreeBatchArgs& args,
                       Scratch&& workspace) {
  detail::TreeBatchImpl<Backend>::run(backend, rule, detail::resident_args<Backend>(args),
                                      std::forward<Scratch>(workspace));
}

/// Tree verification of candidate trees without draft rows (verify_tree_target_only per tree) for
/// B ragged trees in TreeBatchArgs' layout with `draft_rows` left empty: tree b is
/// verify_tree_target_only of its rows, bit for bit, with streams[b]. Size the workspace as
/// verify_tree_batch's (TreeBatchShape). The CPU backend needs contiguous rows; on CUDA a tree
/// with a token outside the vocabulary gets accepted = -1 and final token -1.
template <backend::BackendPolicy Backend, class Scratch>
void verify_tree_batch_target_only(const Backend& backend, const TreeBatchArgs& args,
                                   Scratch&& workspace) {
  detail::TreeBatchTargetOnlyImpl<Backend>::run(backend, detail::resident_args<Backend>(args),
                                                std::forward<Scratch>(workspace));
}

}  // namespace specdec
