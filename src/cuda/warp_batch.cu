// SPDX-License-Identifier: MIT
// Launcher of the batched warp: every warp but a top-k above kStatisticsTopK takes the statistics
// path (the rows' statistics split over blocks, the cuts by top-p or top-k, then one write pass,
// which also cuts min-p alone); a larger top-k, one block per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/row_stats_launch.cuh"
#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/detail/warp_write_kernels.cuh"
#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"

namespace specdec::backend::cuda_impl {

namespace {

/// warp_workspace_size's layout: the staged per-row warps, then the rows' statistics.
struct WarpStaged {
  DeviceWarp* warps;
  detail::RowStatsBuffers statistics;
};

WarpStaged carve_warp(void* workspace, std::int64_t rows, std::int64_t cols,
                      unsigned int* counters) {
  auto* base = static_cast<unsigned char*>(workspace);
  WarpStaged out{};
  out.warps = reinterpret_cast<DeviceWarp*>(base);
  base += device_round_up(static_cast<std::size_t>(rows) * sizeof(DeviceWarp));
  out.statistics = detail::carve_row_stats(base, rows, cols, counters);
  return out;
}

/// The statistics path: the rows' statistics (and nucleus, with top-p), then the write pass.
template <class T>
cudaError_t launch_warp_statistics(const WarpBatchParams& p, const WarpStaged& staged,
                                   const DeviceWarp& shared_warp, const DeviceWarp* row_warps,
                                   bool cut, cudaStream_t stream) {
  const detail::RowStatsLaunch<T> r{
      .set = {static_cast<const T*>(p.logits), p.logits_stride, p.rows, nullptr, 0},
      .rows = p.rows,
      .n = p.cols,
      .split = row_split(p.rows, p.cols, detail::device_sm_count()),
      // With offsets null row r takes row_warps[r] (or the shared warp when row_warps is null).
      .warps = {shared_warp, row_warps, nullptr, p.rows, p.rows},
      .cut = cut};
  const cudaError_t status = detail::launch_row_statistics(r, staged.statistics, stream);
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned int>(p.rows),
                  static_cast<unsigned int>(r.split.blocks_per_row));
  // The nucleus launch left the row counters after the statistics' (counters + rows) at 0: a row
  // with min-p alone, which it skips, counts its write pass's blocks there.
  return detail::launch(
      detail::warp_write_kernel<T>, grid, detail::kStatsThreads, stream, r.set, p.cols, r.split,
      r.warps, static_cast<const RowStats*>(staged.statistics.stats),
      static_cast<const TileStats*>(staged.statistics.tiles), staged.statistics.lists,
      staged.statistics.counters + p.rows, p.warped, p.warped_stride);
}

template <class T>
cudaError_t launch_warp(const WarpBatchParams& p, const DeviceWarp& shared_warp,
                        const DeviceWarp* row_warps, cudaStream_t stream) {
  // gridDim.x allows 2^31 - 1 blocks: more rows than that cannot be addressed anyway.
  return detail::launch(detail::warp_logits_batch_kernel<T>, static_cast<unsigned int>(p.rows),
                        kWarpThreads, stream, static_cast<const T*>(p.logits), p.logits_stride,
                        p.warped, p.warped_stride, static_cast<int>(p.cols), shared_warp,
                        static_cast<const DeviceWarp*>(row_warps));
}

template <class T>
cudaError_t dispatch_warp(const WarpBatchParams& p, const WarpStaged& staged, bool statistics,
                          bool cut, const DeviceWarp& shared_warp, const DeviceWarp* row_warps,
                          cudaStream_t stream) {
  return statistics ? launch_warp_statistics<T>(p, staged, shared_warp, row_warps, cut, stream)
                    : launch_warp<T>(p, shared_warp, row_warps, stream);
}

}  // namespace

cudaError_t warp_logits_batch(const WarpBatchParams& params, void* workspace, cudaStream_t stream) {
  // One shared warp travels as a kernel argument; per-row warps are staged in the workspace.
  const WarpStaged staged = carve_warp(workspace, params.rows, params.cols, params.counters);
  const Resident<const DeviceWarp>& warps = params.warps;
  const bool device_warps = warps.on_device();  // rows warps on the device: not read here
  const DeviceWarp shared_warp = device_warps ? DeviceWarp{} : warps[0];
  bool statistics = true, cut = device_warps;  // the cut launch may be needed
  for (std::size_t k = 0; !device_warps && k < warps.size(); ++k) {
    statistics = statistics && detail::statistics_warp(warps[k], params.cols);
    // Min-p alone is cut by the write pass: the nucleus launch is for top-p and top-k.
    cut = cut || (detail::cuts_rows(warps[k], params.cols) &&
                  !detail::min_p_alone(warps[k], params.cols));
  }
  const DeviceWarp* row_warps = nullptr;
  if (device_warps || warps.size() > 1) {
    const cudaError_t status = detail::stage(warps, staged.warps, stream, &row_warps);
    if (status != cudaSuccess) return status;
  }
  switch (params.dtype) {
    case DType::kF32:
      return dispatch_warp<float>(params, staged, statistics, cut, shared_warp, row_warps,
                                  stream);
    case DType::kF16:
      return dispatch_warp<__half>(params, staged, statistics, cut, shared_warp, row_warps,
                                   stream);
    case DType::kBF16:
      return dispatch_warp<__nv_bfloat16>(params, staged, statistics, cut, shared_warp,
                                          row_warps, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace specdec::backend::cuda_impl
