// SPDX-License-Identifier: MIT
// Launcher of the batched warp: warps without a cut take the statistics path (the rows'
// statistics split over blocks, then one write pass), warps that cut one block per row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/detail/warp_write_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"

namespace specdec::backend::cuda_impl {

namespace {

/// warp_workspace_size's layout: the staged per-row warps, then the rows' statistics.
struct WarpStaged {
  DeviceWarp* warps;
  TileStats* tiles;
  unsigned int* counters;
  RowStats* stats;
};

WarpStaged carve_warp(void* workspace, std::int64_t rows, std::int64_t cols) {
  const auto r = static_cast<std::size_t>(rows);
  auto* base = static_cast<unsigned char*>(workspace);
  WarpStaged out{};
  out.warps = reinterpret_cast<DeviceWarp*>(base);
  base += device_round_up(r * sizeof(DeviceWarp));
  out.tiles = reinterpret_cast<TileStats*>(base);
  base += device_round_up(r * static_cast<std::size_t>(row_split(1, cols, 1).tiles) *
                          sizeof(TileStats));
  out.counters = reinterpret_cast<unsigned int*>(base);
  base += device_round_up(r * sizeof(unsigned int));
  out.stats = reinterpret_cast<RowStats*>(base);
  return out;
}

/// The SMs of the current device (the split of rows over blocks fills them).
int warp_split_sms() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      count < 1) {
    return kH100Sms;
  }
  return count;
}

/// Whether a warp leaves every entry of a row of `cols` positive or makes it one-hot: no top-k,
/// top-p or min-p cut (a top-k of at least the row keeps it whole).
bool warp_cuts_nothing(const DeviceWarp& w, std::int64_t cols) {
  return w.temperature == 0.0f ||
         ((w.top_k <= 0 || w.top_k >= cols) && w.top_p >= 1.0f && w.min_p <= 0.0f);
}

/// The statistics path: counters zeroed, the rows' statistics, then the write pass.
template <class T>
cudaError_t launch_warp_statistics(const WarpBatchParams& p, const WarpStaged& staged,
                                   const DeviceWarp& shared_warp, const DeviceWarp* row_warps,
                                   cudaStream_t stream) {
  const detail::LogitRowSet<T> set{static_cast<const T*>(p.logits), p.logits_stride, p.rows,
                                   nullptr, 0};
  const RowSplit split = row_split(p.rows, p.cols, warp_split_sms());
  cudaError_t status = cudaMemsetAsync(
      staged.counters, 0, static_cast<std::size_t>(p.rows) * sizeof(unsigned int), stream);
  if (status != cudaSuccess) return status;
  // With offsets null row r takes row_warps[r] (or the shared warp when row_warps is null).
  const detail::RowWarps warps{shared_warp, row_warps, nullptr, p.rows, p.rows};
  const dim3 grid(static_cast<unsigned int>(p.rows),
                  static_cast<unsigned int>(split.blocks_per_row));
  status = detail::launch(detail::row_stats_kernel<T>, grid, detail::kStatsThreads, stream, set,
                          p.cols, split, warps, staged.tiles, staged.counters, staged.stats);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::warp_write_kernel<T>, grid, detail::kStatsThreads, stream, set,
                        p.cols, split, static_cast<const RowStats*>(staged.stats), p.warped,
                        p.warped_stride);
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
                          const DeviceWarp& shared_warp, const DeviceWarp* row_warps,
                          cudaStream_t stream) {
  return statistics ? launch_warp_statistics<T>(p, staged, shared_warp, row_warps, stream)
                    : launch_warp<T>(p, shared_warp, row_warps, stream);
}

}  // namespace

cudaError_t warp_logits_batch(const WarpBatchParams& params, void* workspace, cudaStream_t stream) {
  // One shared warp travels as a kernel argument; per-row warps are staged in the workspace.
  const WarpStaged staged = carve_warp(workspace, params.rows, params.cols);
  const DeviceWarp shared_warp = params.host_warps[0];
  bool statistics = true;
  for (std::int64_t k = 0; k < params.warp_count; ++k) {
    statistics = statistics && warp_cuts_nothing(params.host_warps[k], params.cols);
  }
  DeviceWarp* row_warps = nullptr;
  if (params.warp_count > 1) {
    row_warps = staged.warps;
    const cudaError_t status =
        cudaMemcpyAsync(row_warps, params.host_warps,
                        static_cast<std::size_t>(params.warp_count) * sizeof(DeviceWarp),
                        cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
  }
  switch (params.dtype) {
    case DType::kF32:
      return dispatch_warp<float>(params, staged, statistics, shared_warp, row_warps, stream);
    case DType::kF16:
      return dispatch_warp<__half>(params, staged, statistics, shared_warp, row_warps, stream);
    case DType::kBF16:
      return dispatch_warp<__nv_bfloat16>(params, staged, statistics, shared_warp, row_warps,
                                          stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace specdec::backend::cuda_impl
