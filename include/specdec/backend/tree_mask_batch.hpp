// SPDX-License-Identifier: MIT
// Batched tree attention inputs: packed ancestor masks and position ids of B ragged trees, and
// ReDrafter's prefix match of B rows of beams, on any backend.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "specdec/backend/policy.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/tree/tree_rows.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// The views of one packed_tree_masks_batch call (see there). For a call captured in a CUDA graph
/// the offsets can live in the backend's memory instead: device_offsets, B = batch.
struct TreeMaskBatchArgs {
  std::span<const std::int32_t> node_offsets{};  // B + 1, host memory
  TreeView trees{};
  MatrixView<std::uint32_t> masks{};
  /// node_offsets in the backend's memory (batch + 1 entries), read where the backend computes:
  /// node_offsets must then be empty and `batch` the number of trees. A CUDA call with
  /// device_offsets makes no host copy, allocation or synchronisation (and needs no workspace),
  /// so it can be captured in a CUDA graph and replayed with new contents. Not scanned: they must
  /// be what the host span would hold (0, non-decreasing, ending at N, no tree longer than
  /// 32 masks.cols nodes).
  const std::int32_t* device_offsets = nullptr;
  std::int64_t batch = 0;  // B, read only with device_offsets
};

/// The views of one tree_positions_batch call (see there), with device-resident offsets and
/// context lengths as TreeMaskBatchArgs' (B = batch).
struct TreePositionsBatchArgs {
  std::span<const std::int32_t> node_offsets{};  // B + 1, host memory
  TreeView trees{};
  std::span<const std::int32_t> context_lengths{};  // B, host memory
  std::span<std::int32_t> positions{};
  /// As TreeMaskBatchArgs::device_offsets (batch + 1 entries); node_offsets must then be empty.
  const std::int32_t* device_offsets = nullptr;
  /// context_lengths in the backend's memory (batch entries); context_lengths must then be
  /// empty. Not scanned: each must be >= 1 with context + N_b - 1 within int32.
  const std::int32_t* device_context_lengths = nullptr;
  std::int64_t batch = 0;  // B, read only with a device array
};

namespace detail {

template <class Backend>
struct TreeMaskBatchImpl {
  static_assert(
      dependent_false<Backend>,
      "packed_tree_masks_batch / tree_positions_batch / prefix_match_batch: no "
      "implementation for this backend; include "
      "specdec/backend/cpu/tree_mask_batch.hpp or specdec/backend/cuda/tree_mask_batch.hpp");
};

/// Host checks of the sizes of a CSR batch of trees: the offsets, N tokens and N parents. Returns
/// the largest tree.
inline std::int32_t check_tree_csr_sizes(std::span<const std::int32_t> node_offsets,
                                         TreeView trees) {
  const auto largest = check_tree_offsets(node_offsets);
  const auto total = static_cast<std::size_t>(node_offsets.back());
  detail::check_size("trees.tokens", trees.tokens.size(), total);
  detail::check_size("trees.parents", trees.parents.size(), total);
  return largest;
}

/// Host checks of a CSR batch of trees: the sizes and each parent -1 or an earlier node of its own
/// tree. Returns the largest tree.
inline std::int32_t check_tree_csr(std::span<const std::int32_t> node_offsets, TreeView trees) {
  const auto largest = check_tree_csr_sizes(node_offsets, trees);
  const auto parents = trees.parents;
  for (std::size_t b = 0; b + 1 < node_offsets.size(); ++b) {
    const auto begin = static_cast<std::size_t>(node_offsets[b]);
    const auto n = static_cast<std::int32_t>(node_offsets[b + 1] - node_offsets[b]);
    for (std::int32_t i = 0; i < n; ++i) {
      check_parent(ArgName("trees.parents", static_cast<std::int64_t>(b))[i],
                   parents[begin + static_cast<std::size_t>(i)], i);
    }
  }
  return largest;
}

/// Host checks of packed_tree_masks_batch's output: one row per node, enough words for the
/// largest tree.
inline void check_mask_rows(MatrixView<std::uint32_t> masks, std::int64_t total,
                            std::int32_t largest) {
  if (masks.rows != total)
    fail("masks", "has {} rows, expected one per node ({})", masks.rows, total);
  if (masks.cols < packed_mask_words(largest)) {
    fail("masks", "has {} words per row, the largest tree ({} nodes) needs {}", masks.cols, largest,
         packed_mask_words(largest));
  }
  if (masks.cols > INT32_MAX)
    fail("masks", "has {} words per row, at most {}", masks.cols, INT32_MAX);
  if (masks.stride < masks.cols)
    fail("masks", "stride {} is smaller than its {} columns", masks.stride, masks.cols);
}

/// Host checks of tree_positions_batch's context lengths and output (sizes against the offsets).
inline void check_positions_batch(std::span<const std::int32_t> node_offsets,
                                  std::span<const std::int32_t> context_lengths,
                                  std::size_t positions) {
  const auto batch = node_offsets.size() - 1;
  detail::check_size("context_lengths", context_lengths.size(), batch);
  detail::check_size("positions", positions, static_cast<std::size_t>(node_offsets.back()));
  for (std::size_t b = 0; b < batch; ++b) {
    const auto c = context_lengths[b];
    const auto n = node_offsets[b + 1] - node_offsets[b];
    if (c < 1 || static_cast<std::int64_t>(c) + n - 1 > INT32_MAX) {
      fail(fmt::format("context_lengths[{}]", b),
           "{} must be >= 1 (the root is a committed token) and leave room for {} positions", c, n);
    }
  }
}

/// Host checks of prefix_match_batch's shapes: B rows of W beams of L >= 1 tokens each. Returns L.
inline std::int32_t check_prefix_match_shape(MatrixView<const Token> beams, std::int32_t width,
                                             MatrixView<std::int32_t> out) {
  if (beams.rows < 1) fail("beams", "has {} rows, expected at least 1", beams.rows);
  if (width <= 0) fail("width", "{} must be > 0 (at least one beam)", width);
  if (beams.cols < 1 || beams.cols % width != 0 || beams.cols > INT32_MAX) {
    fail("beams", "{} tokens per row do not split into {} beams of equal length", beams.cols,
         width);
  }
  if (beams.stride < beams.cols)
    fail("beams", "stride {} is smaller than its {} columns", beams.stride, beams.cols);
  if (out.rows != beams.rows || out.cols != beams.cols) {
    fail("out", "is {} x {}, expected {} x {} like beams", out.rows, out.cols, beams.rows,
         beams.cols);
  }
  if (out.stride < out.cols)
    fail("out", "stride {} is smaller than its {} columns", out.stride, out.cols);
  return static_cast<std::int32_t>(beams.cols / width);
}

/// With a device array set, its host span must be empty and `batch` (B) at least 1.
inline void check_device_batch(std::string_view device_name, const void* device,
                               std::string_view host_name, std::size_t host_size,
                               std::int64_t batch) {
  if (device == nullptr) return;
  if (host_size != 0) {
    fail(device_name, "is set, so {} must be empty (it has {} entries): give one or the other",
         host_name, host_size);
  }
  if (batch < 1 || batch > INT32_MAX)
    fail("batch", "is {}; with {} it must be the number of trees (at least 1)", batch, device_name);
}

/// The host checks of a TreeMaskBatchArgs whose offsets are device_offsets: sizes only (N is
/// trees.parents.size()).
inline void check_device_mask_args(const TreeMaskBatchArgs& args) {
  check_device_batch("device_offsets", args.device_offsets, "node_offsets",
                     args.node_offsets.size(), args.batch);
  const auto total = args.trees.parents.size();
  detail::check_size("trees.tokens", args.trees.tokens.size(), total);
  if (args.masks.rows != static_cast<std::int64_t>(total))
    fail("masks", "has {} rows, expected one per node ({})", args.masks.rows, total);
  check_mask_rows(args.masks, args.masks.rows, 1);
}

/// On the CPU backend the backend's memory is the host's: device arrays are the host spans over
/// them (B = batch), checked as host arrays are.
inline std::span<const std::int32_t> host_resident_offsets(
    std::span<const std::int32_t> node_offsets, const std::int32_t* device_offsets,
    std::int64_t batch) {
  if (device_offsets == nullptr) return node_offsets;
  check_device_batch("device_offsets", device_offsets, "node_offsets", node_offsets.size(), batch);
  return {device_offsets, static_cast<std::size_t>(batch) + 1};
}

template <class Backend>
inline constexpr bool kHostMemoryBackend =
    std::is_same_v<std::remove_cvref_t<Backend>, backend::Cpu>;

}  // namespace detail

/// The workspace of packed_tree_masks_batch and tree_positions_batch: B trees.
struct TreeMaskBatchShape {
  std::int64_t batch = 0;
};

/// Bytes of workspace packed_tree_masks_batch / tree_positions_batch need on `backend` (0 on the
/// CPU; on CUDA the staged offsets and context lengths).
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const TreeMaskBatchShape& shape) {
  return detail::TreeMaskBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Packed ancestor masks of B ragged trees (CSR: `node_offsets` B + 1 entries, host memory;
/// `trees` N nodes, parents local to each tree, -1 = root, in the backend's memory; only the
/// parents are read): row
/// node_offsets[b] + i of `masks` is packed_mask_row of node i of tree b, column j = bit j % 32 of
/// word j / 32, over the tree's own nodes; `masks` has N rows of at least packed_mask_words(largest
/// tree) words, bits past a tree's size 0. Equal to build_packed_mask per tree (padded with zero
/// words). `workspace`: a specdec::Workspace (CPU, may be empty) or a backend::DeviceWorkspace of
/// workspace_size(backend, TreeMaskBatchShape{B}) bytes. Takes no random draws.
template <backend::BackendPolicy Backend, class Scratch>
void packed_tree_masks_batch(const Backend& backend, std::span<const std::int32_t> node_offsets,
                             TreeView trees, MatrixView<std::uint32_t> masks, Scratch&& workspace) {
  packed_tree_masks_batch(
      backend, TreeMaskBatchArgs{.node_offsets = node_offsets, .trees = trees, .masks = masks},
      std::forward<Scratch>(workspace));
}

/// packed_tree_masks_batch of TreeMaskBatchArgs: host offsets as above, or device_offsets (B =
/// args.batch) for a call captured in a CUDA graph. On CUDA, a capture of a call with host offsets
/// fails with specdec::Error naming node_offsets.
template <backend::BackendPolicy Backend, class Scratch>
void packed_tree_masks_batch(const Backend& backend, const TreeMaskBatchArgs& args,
                             Scratch&& workspace) {
  if constexpr (detail::kHostMemoryBackend<Backend>) {
    detail::TreeMaskBatchImpl<Backend>::masks(
        backend, detail::host_resident_offsets(args.node_offsets, args.device_offsets, args.batch),
        args.trees, args.masks, std::forward<Scratch>(workspace));
  } else {
    detail::TreeMaskBatchImpl<Backend>::masks(backend, args, std::forward<Scratch>(workspace));
  }
}

/// Position ids of B ragged trees (CSR as packed_tree_masks_batch): positions[node_offsets[b] + i]
/// = context_lengths[b] + depth(i) - 1, detail::tree_positions_row per tree as tree_positions
/// (context_lengths[b] >= 1, host memory, counts tree b's committed tokens, its root included;
/// context_lengths[b] + N_b - 1 must fit in int32). `positions` lives in the
/// backend's memory; the workspace is as for packed_tree_masks_batch.
template <backend::BackendPolicy Backend, class Scratch>
void tree_positions_batch(const Backend& backend, std::span<const std::int32_t> node_offsets,
                          TreeView trees, std::span<const std::int32_t> context_lengths,
                          std::span<std::int32_t> positions, Scratch&& workspace) {
  tree_positions_batch(backend,
                       TreePositionsBatchArgs{.node_offsets = node_offsets,
                                              .trees = trees,
                                              .context_lengths = context_lengths,
                                              .positions = positions},
                       std::forward<Scratch>(workspace));
}

/// tree_positions_batch of TreePositionsBatchArgs: host arrays as above, or device_offsets /
/// device_context_lengths (B = args.batch) for a call captured in a CUDA graph. On CUDA, a
/// capture of a call with host arrays fails with specdec::Error naming the host array.
template <backend::BackendPolicy Backend, class Scratch>
void tree_positions_batch(const Backend& backend, const TreePositionsBatchArgs& args,
                          Scratch&& workspace) {
  if constexpr (detail::kHostMemoryBackend<Backend>) {
    std::span<const std::int32_t> contexts = args.context_lengths;
    if (args.device_context_lengths != nullptr) {
      detail::check_device_batch("device_context_lengths", args.device_context_lengths,
                                 "context_lengths", contexts.size(), args.batch);
      contexts = {args.device_context_lengths, static_cast<std::size_t>(args.batch)};
    }
    detail::TreeMaskBatchImpl<Backend>::positions(
        backend, detail::host_resident_offsets(args.node_offsets, args.device_offsets, args.batch),
        args.trees, contexts, args.positions, std::forward<Scratch>(workspace));
  } else {
    detail::TreeMaskBatchImpl<Backend>::positions(backend, args, std::forward<Scratch>(workspace));
  }
}

/// ReDrafter's prefix match for B rows of `width` beams: row b of `beams` holds W beams of L
/// tokens (W * L columns, row-major [W, L]); row b of `out` receives prefix_match of that row
/// (out(b, i * L + k) = the smallest beam sharing beam i's first k + 1 tokens). Both matrices live
/// in the backend's memory; tokens must lie in [0, vocab) (checked on the CPU). Needs no workspace.
template <backend::BackendPolicy Backend>
void prefix_match_batch(const Backend& backend, MatrixView<const Token> beams, std::int32_t width,
                        std::int64_t vocab, MatrixView<std::int32_t> out) {
  detail::TreeMaskBatchImpl<Backend>::prefix_match(backend, beams, width, vocab, out);
}

}  // namespace specdec
