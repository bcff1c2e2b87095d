// SPDX-License-Identifier: MIT
// The CPU backend of fill_random: streams in parallel on the thread pool.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/fill_random.hpp"
#include "specdec/core/noise.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec::detail {

template <>
struct FillRandomImpl<backend::Cpu> {
  static std::size_t workspace_size(const backend::Cpu&, const FillRandomShape&) { return 0; }

  static void run(const backend::Cpu& cpu, std::span<const RandomStream> streams,
                  std::uint32_t first, MatrixView<float> out, RandomKind kind, Workspace&) {
    backend::default_thread_pool().run(out.rows, cpu.threads, [&](std::int64_t s, int) {
      const RandomStream& stream = streams[static_cast<std::size_t>(s)];
      const std::span<float> row(out.row_data(s), static_cast<std::size_t>(out.cols));
      if (kind == RandomKind::kGumbel) {
        fill_gumbels(stream, first, row);
      } else {
        fill_uniforms(stream, first, row);
      }
    });
  }
};

}  // namespace specdec::detail
