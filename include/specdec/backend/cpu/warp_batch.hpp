// SPDX-License-Identifier: MIT
// The CPU backend of warp_logits_batch: rows in parallel on the thread pool, each row through
// core/warp.hpp's row functions.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/warp_batch.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec::detail {

template <>
struct WarpBatchImpl<backend::Cpu> {
  /// One index buffer of `vocab` entries per thread that takes part.
  static std::size_t workspace_size(const backend::Cpu& cpu, const WarpBatchShape& shape) {
    const int threads = backend::default_thread_pool().resolve(shape.rows, cpu.threads);
    return static_cast<std::size_t>(threads) * warp_workspace_size(shape.vocab);
  }

  /// device_warps is read as host memory (the CPU's memory is the host's).
  template <class T>
  static void run(const backend::Cpu& cpu, const WarpBatchArgs<T>& args, Workspace& ws) {
    const MatrixView<const T> logits = args.logits;
    const MatrixView<float> warped = args.warped;
    const std::span<const Warp> warps = host_warps_of(args);
    check_warp_batch(logits.rows, logits.cols, logits.stride, warped.rows, warped.cols,
                     warped.stride, warps);
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      check_logits_row<T>(ArgName("logits", r), logits.row(r));
    }
    auto& pool = backend::default_thread_pool();
    const int threads = pool.resolve(logits.rows, cpu.threads);
    const std::size_t per_thread = warp_workspace_size(logits.cols) / sizeof(std::int32_t);
    auto scope = ws.scope();
    auto idx = ws.take<std::int32_t>(per_thread * static_cast<std::size_t>(threads));
    pool.run(logits.rows, threads, [&](std::int64_t r, int slot) {
      const Warp& w = warps[warps.size() == 1 ? 0 : static_cast<std::size_t>(r)];
      warp_logits_unchecked<T>(w, logits.row(r), warped.row(r),
                               idx.data() + static_cast<std::size_t>(slot) * per_thread);
    });
  }
};

}  // namespace specdec::detail
