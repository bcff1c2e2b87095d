// SPDX-License-Identifier: MIT
// The statistics launches every call on the statistics path starts with (row_stats_launch.cuh),
// compiled here once for each row type: the chain step from logits and the warp share them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/row_stats_launch.cuh"

namespace specdec::backend::cuda_impl::detail {

template <class T>
cudaError_t launch_row_statistics(const RowStatsLaunch<T>& r, const RowStatsBuffers& b,
                                  cudaStream_t stream) {
  const auto& [set, rows, n, split, warps, cut, keep_nucleus, failures] = r;
  // The kernels leave their block counters at 0: only counters nothing has zeroed need it.
  cudaError_t status =
      b.counters_zero
          ? cudaSuccess
          : cudaMemsetAsync(b.counters, 0, row_counters(rows) * sizeof(unsigned int), stream);
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned int>(rows), static_cast<unsigned int>(split.blocks_per_row));
  status = launch(row_stats_kernel<T>, grid, kStatsThreads, stream, set, n, split, warps,
                  RowStatsOutputs{.tiles = b.tiles,
                                  .counters = b.counters,
                                  .list_counts = b.list_counts,
                                  .failures = failures,
                                  .stats = b.stats,
                                  .gates = cut ? b.gates : nullptr,
                                  .lists = b.lists,
                                  .histograms = b.histograms});
  if (status != cudaSuccess || !cut) return status;
  return launch(nucleus_kernel<T>, grid, kStatsThreads, stream, set, n, split, warps, b.tiles,
                static_cast<const float*>(b.gates), b.list_counts, b.lists, b.histograms,
                b.counters + rows, b.stats, keep_nucleus);
}

#define SPECDEC_ROW_STATISTICS(T)                                                                 \
  template cudaError_t launch_row_statistics<T>(const RowStatsLaunch<T>&, const RowStatsBuffers&, \
                                                cudaStream_t);
SPECDEC_ROW_STATISTICS(float)
SPECDEC_ROW_STATISTICS(__half)
SPECDEC_ROW_STATISTICS(__nv_bfloat16)
#undef SPECDEC_ROW_STATISTICS

}  // namespace specdec::backend::cuda_impl::detail
