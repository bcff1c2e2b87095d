// SPDX-License-Identifier: MIT
// The CPU backend of warp_logits_batch: rows in parallel on the thread pool, each row through
// core/warp.hpp's row functions.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/cpu/batch_loop.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/backend/warp_batch.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec::detail {

/// Workspace: one index buffer of `vocab` entries per thread that takes part.
template <>
struct WarpBatchImpl<backend::Cpu> : RowLoopWorkspace<warp_workspace_size> {
  /// Warps on the device are read as host memory (the CPU's memory is the host's).
  template <class T>
  static void run(const backend::Cpu& cpu, const WarpBatchArgs<T>& args, Workspace& ws);
};

// Defined out of the class, not inline, so that the extern templates of
// backend/cpu/compiled_batch.hpp keep a caller from instantiating it.
template <class T>
void WarpBatchImpl<backend::Cpu>::run(const backend::Cpu& cpu, const WarpBatchArgs<T>& args,
                                      Workspace& ws) {
  check_warp_batch<backend::Cpu>(args);
  const MatrixView<const T> logits = args.logits;
  for (std::int64_t r = 0; r < logits.rows; ++r) {
    check_logits_row<T>(ArgName("logits", r), logits.row(r));
  }
  const SequenceLoop loop{.batch = logits.rows,
                          .scratch_bytes = warp_workspace_size(logits.cols),
                          .name_sequence = false};
  for_each_sequence(cpu, ws, loop, [&](std::int64_t r, std::byte* scratch) {
    const Warp& w = args.warps[static_cast<std::size_t>(warp_of(args.warps.size(), r))];
    warp_logits_unchecked<T>(w, logits.row(r), args.warped.row(r),
                             reinterpret_cast<std::int32_t*>(scratch));
  });
}

}  // namespace specdec::detail
