// SPDX-License-Identifier: MIT
// The CPU backend of batched tree masks, positions and prefix match: trees (rows) in parallel on
// the thread pool; a node's mask row and position follow from its parent's, through tree/'s row
// functions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/backend/tree_mask_batch.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/tree/dynamic_tree.hpp"

namespace specdec::detail {

template <>
struct TreeMaskBatchImpl<backend::Cpu> {
  /// No scratch: every tree is walked in place.
  static std::size_t workspace_size(const backend::Cpu&, const TreeMaskBatchShape&) { return 0; }

  /// Checked by packed_tree_masks_batch (every array read as host memory).
  static void masks(const backend::Cpu& cpu, const TreeMaskBatchArgs& args,
                    const RaggedSizes& sizes, const Workspace&) {
    const MatrixView<std::uint32_t> masks = args.masks;
    auto& pool = backend::default_thread_pool();
    pool.run(sizes.batch, pool.resolve(sizes.batch, cpu.threads), [&](std::int64_t b, int) {
      const RaggedSlice tree = RaggedSlice::of(args.node_offsets.data(), b);
      const std::int32_t* p = args.trees.parents.data() + tree.first;
      for (std::int32_t i = 0; i < tree.count; ++i) {
        packed_mask_row_from_parent(p[i] < 0 ? nullptr : masks.row_data(tree.first + p[i]), i,
                                    masks.row_data(tree.first + i),
                                    static_cast<std::int32_t>(masks.cols));
      }
    });
  }

  /// Checked by tree_positions_batch (every array read as host memory).
  static void positions(const backend::Cpu& cpu, const TreePositionsBatchArgs& args,
                        const RaggedSizes& sizes, const Workspace&) {
    auto& pool = backend::default_thread_pool();
    pool.run(sizes.batch, pool.resolve(sizes.batch, cpu.threads), [&](std::int64_t b, int) {
      const RaggedSlice tree = RaggedSlice::of(args.node_offsets.data(), b);
      tree_positions_row(args.trees.parents.data() + tree.first,
                         static_cast<std::int32_t>(tree.count),
                         args.context_lengths[static_cast<std::size_t>(b)],
                         args.positions.data() + tree.first);
    });
  }

  static void prefix_match(const backend::Cpu& cpu, MatrixView<const Token> beams,
                           std::int32_t width, std::int64_t vocab, MatrixView<std::int32_t> out) {
    const auto length = check_prefix_match_shape(beams, width, out);
    for (std::int64_t b = 0; b < beams.rows; ++b) {
      try {
        check_beams(beams.row(b), width, vocab);
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
    }
    auto& pool = backend::default_thread_pool();
    pool.run(beams.rows, pool.resolve(beams.rows, cpu.threads), [&](std::int64_t b, int) {
      beam_prefix_match(beams.row_data(b), width, length, out.row_data(b));
    });
  }
};

}  // namespace specdec::detail
