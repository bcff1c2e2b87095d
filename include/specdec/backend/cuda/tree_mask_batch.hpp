// SPDX-License-Identifier: MIT
// The CUDA backend of batched tree masks, positions and prefix match: device parents and beams
// in, device masks, positions and matches out, on the backend's stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/host_staging.hpp"
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

  /// Checked by packed_tree_masks_batch; the device trees are not scanned (they must be what
  /// the CPU backend accepts): a parent that is not an earlier node of its tree ends the ancestor
  /// walk there, so bad data gives wrong rows, never a fault or a hang. Offsets on the device are
  /// read in place (no copy, no workspace needed) and not scanned.
  static void masks(const backend::Cuda& cuda, const TreeMaskBatchArgs& args,
                    const RaggedSizes& sizes, const backend::DeviceWorkspace& ws) {
    if (args.masks.rows > 0) {
      if (args.trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
      if (args.masks.data == nullptr) fail("masks", "is a null device pointer");
    }
    const std::string_view host_array = first_host_array({{"node_offsets", args.node_offsets}});
    check_device_workspace(ws, host_array.empty() ? 0 : workspace_size(cuda, {sizes.batch}));
    check_cuda_staged(backend::cuda_impl::packed_tree_masks_batch(
                          {.node_offsets = args.node_offsets,
                           .batch = sizes.batch,
                           .parents = args.trees.parents.data(),
                           .masks = args.masks.data,
                           .words = args.masks.cols,
                           .mask_stride = args.masks.stride},
                          ws.data, cuda.stream),
                      "packed_tree_masks_batch", host_array);
  }

  /// Checked by tree_positions_batch; trees as for masks(); offsets and context lengths on the
  /// device are read in place and not scanned.
  static void positions(const backend::Cuda& cuda, const TreePositionsBatchArgs& args,
                        const RaggedSizes& sizes, const backend::DeviceWorkspace& ws) {
    if (!args.positions.empty()) {
      if (args.trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
      if (args.positions.data() == nullptr) fail("positions", "is a null device pointer");
    }
    const std::string_view host_array = first_host_array(
        {{"node_offsets", args.node_offsets}, {"context_lengths", args.context_lengths}});
    check_device_workspace(ws, host_array.empty() ? 0 : workspace_size(cuda, {sizes.batch}));
    check_cuda_staged(backend::cuda_impl::tree_positions_batch(
                          {.node_offsets = args.node_offsets,
                           .batch = sizes.batch,
                           .parents = args.trees.parents.data(),
                           .context_lengths = args.context_lengths,
                           .positions = args.positions.data()},
                          ws.data, cuda.stream),
                      "tree_positions_batch", host_array);
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
