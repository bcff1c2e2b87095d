// SPDX-License-Identifier: MIT
// Batched tree attention inputs: packed ancestor masks and position ids of B ragged trees, and
// ReDrafter's prefix match of B rows of beams, on any backend.
#pragma once

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/backend/shapes.hpp"
#include "specdec/core/token.hpp"
#include "specdec/tree/tree_rows.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// The views of one packed_tree_masks_batch call (see there). `node_offsets` is a Resident
/// array: on the device (on_device(offsets, B + 1)) a CUDA call makes no host copy, allocation or
/// synchronisation (and needs no workspace), so it can be captured in a CUDA graph and replayed
/// with new contents. Device offsets are not scanned: they must be what the host array would hold
/// (0, non-decreasing, ending at N, no tree longer than 32 masks.cols nodes).
struct TreeMaskBatchArgs {
  Resident<const std::int32_t> node_offsets{};  // B + 1
  TreeView trees{};
  MatrixView<std::uint32_t> masks{};
};

/// The views of one tree_positions_batch call (see there), with Resident offsets and context
/// lengths as TreeMaskBatchArgs' offsets. Device context lengths are not scanned: each must be
/// >= 1 with context + N_b - 1 within int32.
struct TreePositionsBatchArgs {
  Resident<const std::int32_t> node_offsets{};  // B + 1
  TreeView trees{};
  Resident<const std::int32_t> context_lengths{};  // B
  std::span<std::int32_t> positions{};
};

namespace detail {

template <class Backend>
struct TreeMaskBatchImpl : NoBackendImpl<Backend> {};

/// Host checks of a CSR batch of trees: the offsets, N tokens and N parents, and where the host
/// can read them (host offsets and a backend in host memory), each parent -1 or an earlier node
/// of its own tree. Returns the batch's sizes.
template <class Backend>
RaggedSizes check_tree_csr(const Resident<const std::int32_t>& node_offsets, TreeView trees) {
  const RaggedSizes sizes = check_ragged<Backend>("node_offsets", node_offsets, trees.parents.size());
  const auto total = static_cast<std::size_t>(sizes.total);
  check_size("trees.tokens", trees.tokens.size(), total);
  check_size("trees.parents", trees.parents.size(), total);
  if (!kHostMemory<Backend>) return sizes;
  for (std::int64_t b = 0; b < sizes.batch; ++b) {
    const RaggedSlice tree = RaggedSlice::of(node_offsets.data(), b);
    for (std::int64_t i = 0; i < tree.count; ++i) {
      check_parent(ArgName("trees.parents", b)[i],
                   trees.parents[static_cast<std::size_t>(tree.first + i)], i);
    }
  }
  return sizes;
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

/// Host checks of tree_positions_batch's context lengths and output (sizes against the offsets;
/// the lengths' values where the host can read them and the offsets).
template <class Backend>
void check_positions_batch(const TreePositionsBatchArgs& args, const RaggedSizes& sizes) {
  check_resident("context_lengths", args.context_lengths, static_cast<std::size_t>(sizes.batch));
  check_size("positions", args.positions.size(), static_cast<std::size_t>(sizes.total));
  if (!kHostMemory<Backend> &&
      (args.node_offsets.on_device() || args.context_lengths.on_device())) {
    return;
  }
  for (std::int64_t b = 0; b < sizes.batch; ++b) {
    const auto c = args.context_lengths[static_cast<std::size_t>(b)];
    const auto n = RaggedSlice::of(args.node_offsets.data(), b).count;
    if (c < 1 || static_cast<std::int64_t>(c) + n - 1 > INT32_MAX) {
      fail(ArgName("context_lengths", b),
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

}  // namespace detail

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

/// packed_tree_masks_batch of TreeMaskBatchArgs: host offsets as above, or offsets on the device
/// for a call captured in a CUDA graph. On CUDA, a capture of a call with host offsets fails with
/// specdec::Error naming node_offsets.
template <backend::BackendPolicy Backend, class Scratch>
void packed_tree_masks_batch(const Backend& backend, const TreeMaskBatchArgs& args,
                             Scratch&& workspace) {
  const detail::RaggedSizes sizes = detail::check_tree_csr<Backend>(args.node_offsets, args.trees);
  detail::check_mask_rows(args.masks, sizes.total, static_cast<std::int32_t>(sizes.largest));
  detail::TreeMaskBatchImpl<Backend>::masks(backend, args, sizes,
                                            std::forward<Scratch>(workspace));
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

/// tree_positions_batch of TreePositionsBatchArgs: host arrays as above, or offsets and context
/// lengths on the device for a call captured in a CUDA graph. On CUDA, a capture of a call with
/// host arrays fails with specdec::Error naming the host array.
template <backend::BackendPolicy Backend, class Scratch>
void tree_positions_batch(const Backend& backend, const TreePositionsBatchArgs& args,
                          Scratch&& workspace) {
  const detail::RaggedSizes sizes = detail::check_tree_csr<Backend>(args.node_offsets, args.trees);
  detail::check_positions_batch<Backend>(args, sizes);
  detail::TreeMaskBatchImpl<Backend>::positions(backend, args, sizes,
                                                std::forward<Scratch>(workspace));
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
