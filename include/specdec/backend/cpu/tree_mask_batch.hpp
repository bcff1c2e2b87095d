// SPDX-License-Identifier: MIT
// The CPU backend of batched tree masks, positions and prefix match: trees (rows) in parallel on
// the thread pool, each through tree/'s row kernels.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/tree_mask_batch.hpp"

namespace specdec::detail {

template <>
struct TreeMaskBatchImpl<backend::Cpu> {
  static void masks(const backend::Cpu& cpu, std::span<const std::int32_t> node_offsets,
                    std::span<const std::int32_t> parents, MatrixView<std::uint32_t> masks) {
    const auto largest = check_tree_csr(node_offsets, parents);
    const auto total = static_cast<std::int64_t>(node_offsets.back());
    if (masks.rows != total)
      fail("masks", "has {} rows, expected one per node ({})", masks.rows, total);
    if (masks.cols < packed_mask_words(largest)) {
      fail("masks", "has {} words per row, the largest tree ({} nodes) needs {}", masks.cols,
           largest, packed_mask_words(largest));
    }
    if (masks.stride < masks.cols)
      fail("masks", "stride {} is smaller than its {} columns", masks.stride, masks.cols);
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    auto& pool = backend::default_thread_pool();
    pool.run(batch, pool.resolve(batch, cpu.threads), [&](std::int64_t b, int) {
      const auto begin = node_offsets[static_cast<std::size_t>(b)];
      const auto n = node_offsets[static_cast<std::size_t>(b) + 1] - begin;
      for (std::int32_t i = 0; i < n; ++i) {
        packed_mask_row(parents.data() + begin, static_cast<std::int32_t>(masks.cols), i,
                        masks.row_data(begin + i));
      }
    });
  }

  static void positions(const backend::Cpu& cpu, std::span<const std::int32_t> node_offsets,
                        std::span<const std::int32_t> parents,
                        std::span<const std::int32_t> context_lengths,
                        std::span<std::int32_t> positions) {
    check_tree_csr(node_offsets, parents);
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    check_size("context_lengths", context_lengths.size(), static_cast<std::size_t>(batch));
    check_size("positions", positions.size(), parents.size());
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto c = context_lengths[static_cast<std::size_t>(b)];
      const auto n =
          node_offsets[static_cast<std::size_t>(b) + 1] - node_offsets[static_cast<std::size_t>(b)];
      if (c < 1 || static_cast<std::int64_t>(c) + n - 1 > INT32_MAX) {
        fail(fmt::format("context_lengths[{}]", b),
             "{} must be >= 1 (the root is a committed token) and leave room for {} positions", c,
             n);
      }
    }
    auto& pool = backend::default_thread_pool();
    pool.run(batch, pool.resolve(batch, cpu.threads), [&](std::int64_t b, int) {
      const auto begin = static_cast<std::size_t>(node_offsets[static_cast<std::size_t>(b)]);
      const auto n =
          static_cast<std::size_t>(node_offsets[static_cast<std::size_t>(b) + 1]) - begin;
      const std::int32_t* p = parents.data() + begin;
      std::int32_t* out = positions.data() + begin;
      for (std::size_t i = 0; i < n; ++i) {
        // Parents come first, so a node's position is its parent's plus one.
        out[i] = p[i] < 0 ? node_position(context_lengths[static_cast<std::size_t>(b)], 1)
                          : out[static_cast<std::size_t>(p[i])] + 1;
      }
    });
  }

  static void prefix_match(const backend::Cpu& cpu, MatrixView<const Token> beams,
                           std::int32_t width, std::int64_t vocab, MatrixView<std::int32_t> out) {
    if (beams.rows < 1) fail("beams", "has {} rows, expected at least 1", beams.rows);
    if (beams.stride < beams.cols)
      fail("beams", "stride {} is smaller than its {} columns", beams.stride, beams.cols);
    if (out.rows != beams.rows || out.cols != beams.cols) {
      fail("out", "is {} x {}, expected {} x {} like beams", out.rows, out.cols, beams.rows,
           beams.cols);
    }
    if (out.stride < out.cols)
      fail("out", "stride {} is smaller than its {} columns", out.stride, out.cols);
    std::int32_t length = 0;
    for (std::int64_t b = 0; b < beams.rows; ++b) {
      try {
        length = check_beams(beams.row(b), width, vocab);
      } catch (const Error& e) {
        rethrow_for_sequence(e, b);
      }
    }
    auto& pool = backend::default_thread_pool();
    pool.run(beams.rows, pool.resolve(beams.rows, cpu.threads), [&](std::int64_t b, int) {
      prefix_match_kernel(beams.row_data(b), width, length, out.row_data(b));
    });
  }
};

}  // namespace specdec::detail
