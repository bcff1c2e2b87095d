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
#include "specdec/backend/tree_mask_batch.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/tree/dynamic_tree.hpp"

namespace specdec::detail {

template <>
struct TreeMaskBatchImpl<backend::Cpu> {
  /// No scratch: every tree is walked in place.
  static std::size_t workspace_size(const backend::Cpu&, const TreeMaskBatchShape&) { return 0; }

  static void masks(const backend::Cpu& cpu, std::span<const std::int32_t> node_offsets,
                    TreeView trees, MatrixView<std::uint32_t> masks, const Workspace&) {
    const auto largest = check_tree_csr(node_offsets, trees);
    check_mask_rows(masks, node_offsets.back(), largest);
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    auto& pool = backend::default_thread_pool();
    pool.run(batch, pool.resolve(batch, cpu.threads), [&](std::int64_t b, int) {
      const auto begin = node_offsets[static_cast<std::size_t>(b)];
      const auto n = node_offsets[static_cast<std::size_t>(b) + 1] - begin;
      const std::int32_t* p = trees.parents.data() + begin;
      for (std::int32_t i = 0; i < n; ++i) {
        packed_mask_row_from_parent(p[i] < 0 ? nullptr : masks.row_data(begin + p[i]), i,
                                    masks.row_data(begin + i),
                                    static_cast<std::int32_t>(masks.cols));
      }
    });
  }

  static void positions(const backend::Cpu& cpu, std::span<const std::int32_t> node_offsets,
                        TreeView trees, std::span<const std::int32_t> context_lengths,
                        std::span<std::int32_t> positions, const Workspace&) {
    check_tree_csr(node_offsets, trees);
    check_positions_batch(node_offsets, context_lengths, positions.size());
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    auto& pool = backend::default_thread_pool();
    pool.run(batch, pool.resolve(batch, cpu.threads), [&](std::int64_t b, int) {
      const auto begin = node_offsets[static_cast<std::size_t>(b)];
      const auto n = node_offsets[static_cast<std::size_t>(b) + 1] - begin;
      tree_positions_row(trees.parents.data() + begin, n,
                         context_lengths[static_cast<std::size_t>(b)], positions.data() + begin);
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
