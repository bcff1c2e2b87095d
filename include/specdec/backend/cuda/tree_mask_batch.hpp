// SPDX-License-Identifier: MIT
// The CUDA backend of batched tree masks, positions and prefix match: device parents and beams
// in, device masks, positions and matches out, on the backend's stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/tree_mask_batch.hpp"

namespace specdec::detail {

template <>
struct TreeMaskBatchImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and context lengths.
  static std::size_t workspace_size(const backend::Cuda&, const TreeMaskBatchShape& shape) {
    return backend::cuda_impl::tree_mask_workspace_size(shape.batch);
  }

  /// node_offsets are host memory and checked; the device trees are not scanned (they must be
  /// what the CPU backend accepts): a parent that is not an earlier node of its tree ends the
  /// ancestor walk there, so bad data gives wrong rows, never a fault or a hang.
  static void masks(const backend::Cuda& cuda, std::span<const std::int32_t> node_offsets,
                    TreeView trees, MatrixView<std::uint32_t> masks,
                    const backend::DeviceWorkspace& ws) {
    const auto largest = check_tree_csr_sizes(node_offsets, trees);
    check_mask_rows(masks, node_offsets.back(), largest);
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    if (node_offsets.back() > 0) {
      if (trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
      if (masks.data == nullptr) fail("masks", "is a null device pointer");
    }
    check_device_workspace(ws, workspace_size(cuda, {batch}));
    check_cuda(backend::cuda_impl::packed_tree_masks_batch(
                   {.host_node_offsets = node_offsets.data(),
                    .batch = batch,
                    .parents = trees.parents.data(),
                    .masks = masks.data,
                    .words = masks.cols,
                    .mask_stride = masks.stride},
                   ws.data, cuda.stream),
               "packed_tree_masks_batch");
  }

  /// node_offsets and context_lengths are host memory and checked; trees as for masks().
  static void positions(const backend::Cuda& cuda, std::span<const std::int32_t> node_offsets,
                        TreeView trees, std::span<const std::int32_t> context_lengths,
                        std::span<std::int32_t> positions, const backend::DeviceWorkspace& ws) {
    check_tree_csr_sizes(node_offsets, trees);
    check_positions_batch(node_offsets, context_lengths, positions.size());
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    if (node_offsets.back() > 0) {
      if (trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
      if (positions.data() == nullptr) fail("positions", "is a null device pointer");
    }
    check_device_workspace(ws, workspace_size(cuda, {batch}));
    check_cuda(backend::cuda_impl::tree_positions_batch(
                   {.host_node_offsets = node_offsets.data(),
                    .batch = batch,
                    .parents = trees.parents.data(),
                    .host_context_lengths = context_lengths.data(),
                    .positions = positions.data()},
                   ws.data, cuda.stream),
               "tree_positions_batch");
  }

  /// Shapes are checked; the device tokens are not scanned against `vocab` (a token outside it
  /// only compares unequal to the others).
  static void prefix_match(const backend::Cuda& cuda, MatrixView<const Token> beams,
                           std::int32_t width, std::int64_t vocab, MatrixView<std::int32_t> out) {
    const auto length = check_prefix_match_shape(beams, width, out);
    if (vocab <= 0) fail("vocab", "{} must be > 0", vocab);
    if (beams.rows > INT32_MAX)
      fail("beams", "has {} rows, at most {} are supported", beams.rows, INT32_MAX);
    if (beams.data == nullptr) fail("beams", "is a null device pointer");
    if (out.data == nullptr) fail("out", "is a null device pointer");
    check_cuda(backend::cuda_impl::prefix_match_batch(beams.data, beams.rows, beams.stride, width,
                                                      length, out.data, out.stride, cuda.stream),
               "prefix_match_batch");
  }
};

}  // namespace specdec::detail
