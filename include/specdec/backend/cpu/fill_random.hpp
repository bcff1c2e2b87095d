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

  /// Checked by fill_random; streams on the device are read as host memory.
  static void run(const backend::Cpu& cpu, const FillRandomArgs& args, Workspace&) {
    backend::default_thread_pool().run(args.out.rows, cpu.threads, [&](std::int64_t s, int) {
      const RandomStream& stream = args.streams[static_cast<std::size_t>(s)];
      const std::span<float> row(args.out.row_data(s), static_cast<std::size_t>(args.out.cols));
      if (args.kind == RandomKind::kGumbel) {
        fill_gumbels(stream, args.first, row);
      } else {
        fill_uniforms(stream, args.first, row);
      }
    });
  }
};

}  // namespace specdec::detail
