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

  /// node_offsets are host memory and checked; the device trees are not scanned (they must be
  /// what the CPU backend accepts): a parent that is not an earlier node of its tree ends the
  /// ancestor walk there, so bad data gives wrong rows, never a fault or a hang. device_offsets
  /// are read in place (no copy, no workspace needed) and not scanned.
  static void masks(const backend::Cuda& cuda, const TreeMaskBatchArgs& args,
                    const backend::DeviceWorkspace& ws) {
    const bool staged = args.device_offsets == nullptr;
    std::int64_t batch = args.batch;
    if (staged) {
      const auto largest = check_tree_csr_sizes(args.node_offsets, args.trees);
      check_mask_rows(args.masks, args.node_offsets.back(), largest);
      batch = static_cast<std::int64_t>(args.node_offsets.size() - 1);
    } else {
      check_device_mask_args(args);
    }
    if (args.masks.rows > 0) {
      if (args.trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
      if (args.masks.data == nullptr) fail("masks", "is a null device pointer");
    }
    check_device_workspace(ws, staged ? workspace_size(cuda, {batch}) : 0);
    check_cuda_staged(
        backend::cuda_impl::packed_tree_masks_batch({.host_node_offsets = args.node_offsets.data(),
                                                     .batch = batch,
                                                     .parents = args.trees.parents.data(),
                                                     .masks = args.masks.data,
                                                     .words = args.masks.cols,
                                                     .mask_stride = args.masks.stride,
                                                     .device_node_offsets = args.device_offsets},
                                                    ws.data, cuda.stream),
        "packed_tree_masks_batch", staged, "node_offsets", "device_offsets");
  }

  /// node_offsets and context_lengths are host memory and checked; trees as for masks(); device
  /// offsets and context lengths are read in place and not scanned.
  static void positions(const backend::Cuda& cuda, const TreePositionsBatchArgs& args,
                        const backend::DeviceWorkspace& ws) {
    const bool offsets_staged = args.device_offsets == nullptr;
    const bool contexts_staged = args.device_context_lengths == nullptr;
    std::int64_t batch = args.batch;
    if (offsets_staged) {
      check_tree_csr_sizes(args.node_offsets, args.trees);
      batch = static_cast<std::int64_t>(args.node_offsets.size() - 1);
      if (contexts_staged) {
        check_positions_batch(args.node_offsets, args.context_lengths, args.positions.size());
      } else {
        check_device_batch("device_context_lengths", args.device_context_lengths, "context_lengths",
                           args.context_lengths.size(), batch);
        if (args.batch != batch)
          fail("batch", "is {}, but node_offsets holds {} trees", args.batch, batch);
        check_size("positions", args.positions.size(),
                   static_cast<std::size_t>(args.node_offsets.back()));
      }
    } else {
      check_device_batch("device_offsets", args.device_offsets, "node_offsets",
                         args.node_offsets.size(), batch);
      check_size("trees.tokens", args.trees.tokens.size(), args.trees.parents.size());
      check_size("positions", args.positions.size(), args.trees.parents.size());
      if (contexts_staged) {
        check_size("context_lengths", args.context_lengths.size(), static_cast<std::size_t>(batch));
      } else {
        check_device_batch("device_context_lengths", args.device_context_lengths, "context_lengths",
                           args.context_lengths.size(), batch);
      }
    }
    if (!args.positions.empty()) {
      if (args.trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
      if (args.positions.data() == nullptr) fail("positions", "is a null device pointer");
    }
    const bool staged = offsets_staged || contexts_staged;
    check_device_workspace(ws, staged ? workspace_size(cuda, {batch}) : 0);
    check_cuda_staged(backend::cuda_impl::tree_positions_batch(
                          {.host_node_offsets = args.node_offsets.data(),
                           .batch = batch,
                           .parents = args.trees.parents.data(),
                           .host_context_lengths = args.context_lengths.data(),
                           .positions = args.positions.data(),
                           .device_node_offsets = args.device_offsets,
                           .device_context_lengths = args.device_context_lengths},
                          ws.data, cuda.stream),
                      "tree_positions_batch", staged,
                      offsets_staged ? "node_offsets" : "context_lengths",
                      "device_offsets and device_context_lengths");
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
