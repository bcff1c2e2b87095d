// SPDX-License-Identifier: MIT
// Launchers of the batched chain verification kernel (stage offsets, streams and warps, dispatch
// on the row type, one block per sequence).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/chain_kernels.cuh"
#include "specdec/backend/cuda/detail/chain_logits_kernels.cuh"
#include "specdec/backend/cuda/detail/row_stats_launch.cuh"
#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

namespace {

/// The staged copies in a chain workspace (chain_workspace_size's layout, then the logits part:
/// warps, the rows' statistics, warped rows), and the offsets and streams the kernels read.
struct Staged {
  const std::int32_t* offsets;
  const RandomStream* streams;
  DeviceWarp* warps;  // logits only
  detail::RowStatsBuffers statistics;  // logits only
  float* rows;                         // logits with a top-k above kStatisticsTopK only
};

Staged carve(void* workspace, std::int64_t batch, std::int64_t rows = 0, std::int64_t vocab = 0,
             unsigned int* counters = nullptr) {
  const auto b = static_cast<std::size_t>(batch);
  auto* base = static_cast<unsigned char*>(workspace);
  Staged out{};
  base += chain_workspace_size(batch);  // the staged offsets and streams (staging.cuh)
  out.warps = reinterpret_cast<DeviceWarp*>(base);
  base += device_round_up(b * sizeof(DeviceWarp));
  out.statistics = detail::carve_row_stats(base, rows, vocab, counters);
  out.rows = reinterpret_cast<float*>(base);
  return out;
}

/// The offsets and streams the kernels read: the caller's device arrays, or the host ones staged
/// at the front of the workspace.
cudaError_t stage_or_take(const ChainVerifyParams& p, Staged& staged, void* workspace,
                          cudaStream_t stream) {
  return detail::offsets_and_streams(p.draft_offsets, p.streams, workspace, stream, &staged.offsets,
                                     &staged.streams);
}

template <bool kLogits, class T>
cudaError_t launch_chain(const ChainVerifyParams& p, const Staged& staged,
                         const DeviceWarp& shared_warp, const DeviceWarp* warps,
                         cudaStream_t stream) {
  return detail::launch(
      detail::verify_chain_kernel<kLogits, T>, static_cast<unsigned int>(p.batch), kWarpThreads,
      stream,
      detail::ChainKernelArgs<T>{.target = static_cast<const T*>(p.target),
                                 .target_stride = p.target_stride,
                                 .draft = static_cast<const T*>(p.draft),
                                 .draft_stride = p.draft_stride,
                                 .offsets = static_cast<const std::int32_t*>(staged.offsets),
                                 .tokens = p.draft_tokens,
                                 .vocab = p.vocab,
                                 .streams = static_cast<const RandomStream*>(staged.streams),
                                 .shared_warp = shared_warp,
                                 .warps = warps,
                                 .rows_ws = staged.rows,
                                 .emitted = p.emitted,
                                 .accepted = p.accepted,
                                 .status = p.status});
}

/// The launches of a chain step from logits with warps the statistics path takes: the
/// statistics of every target and draft row, the cuts of the rows that have one (when a warp
/// cuts by top-p or top-k), then one block per sequence.
template <class T>
cudaError_t launch_chain_statistics(const ChainVerifyParams& p, const Staged& staged,
                                    const DeviceWarp& shared_warp, const DeviceWarp* warps,
                                    bool cut, std::int64_t drafts, cudaStream_t stream) {
  const std::int64_t target_rows = drafts + p.batch, rows = target_rows + drafts;
  const detail::RowStatsLaunch<T> r{
      .set = {static_cast<const T*>(p.target), p.target_stride, target_rows,
              static_cast<const T*>(p.draft), p.draft_stride},
      .rows = rows,
      .n = p.vocab,
      .split = statistics_row_split(rows, p.vocab, detail::device_sm_count()),
      .warps = {shared_warp, warps, staged.offsets, p.batch, target_rows},
      .cut = cut,
      .keep_nucleus = true,
      .failures = p.status != nullptr ? p.status + p.batch : nullptr};
  const cudaError_t status = detail::launch_row_statistics(r, staged.statistics, stream);
  if (status != cudaSuccess) return status;
  // A draw from a whole row is split over blocks (draw_split); its block sums go where the
  // tiles' statistics were (read by then), its counters are the statistics' (0 again by then).
  static_assert(sizeof(TileStats) >= sizeof(float));
  const RowSplit draw = detail::draw_split(p.batch, p.vocab, detail::device_sm_count());
  const dim3 grid(static_cast<unsigned int>(p.batch),
                  static_cast<unsigned int>(draw.blocks_per_row));
  return detail::launch(
      detail::chain_finish_kernel<T>, grid, detail::kDrawThreads, stream, r.set, p.vocab,
      static_cast<const RowStats*>(staged.statistics.stats), staged.statistics.lists,
      static_cast<const unsigned int*>(staged.statistics.list_counts),
      static_cast<const std::int32_t*>(staged.offsets), p.draft_tokens,
      static_cast<const RandomStream*>(staged.streams), p.emitted, p.accepted,
      reinterpret_cast<float*>(staged.statistics.tiles), staged.statistics.counters, p.status);
}

}  // namespace

cudaError_t verify_chain_batch(const ChainVerifyParams& params, void* workspace,
                               cudaStream_t stream) {
  if (params.dtype != DType::kF32) return cudaErrorInvalidValue;
  Staged staged = carve(workspace, params.batch);
  cudaError_t status = detail::clear_failures(params.status, params.batch, stream);
  if (status == cudaSuccess) status = stage_or_take(params, staged, workspace, stream);
  if (status != cudaSuccess) return status;
  const detail::LogitRowSet<float> set{static_cast<const float*>(params.target),
                                       params.target_stride, params.drafts + params.batch,
                                       static_cast<const float*>(params.draft),
                                       params.draft_stride};
  // Warped rows: the accept tests read two entries, the draws the CPU's sums of the rows.
  return detail::launch(
      detail::chain_finish_kernel<float, false>, static_cast<unsigned int>(params.batch),
      detail::kDrawThreads, stream, set, params.vocab, nullptr, nullptr, nullptr, staged.offsets,
      params.draft_tokens, staged.streams, params.emitted, params.accepted, nullptr, nullptr,
      params.status);
}

cudaError_t verify_chain_batch_logits(const ChainVerifyParams& params, void* workspace,
                                      cudaStream_t stream) {
  const std::int64_t drafts = params.drafts;
  Staged staged =
      carve(workspace, params.batch, 2 * drafts + params.batch, params.vocab, params.counters);
  cudaError_t status = stage_or_take(params, staged, workspace, stream);
  if (status != cudaSuccess) return status;
  // One host warp travels as a kernel argument; per-sequence host warps are staged; warps on the
  // device are not read here (the statistics path and its nucleus launch, whatever they hold).
  const Resident<const DeviceWarp>& warps = params.warps;
  const bool device_warps = warps.on_device();
  const DeviceWarp shared_warp = device_warps ? DeviceWarp{} : warps[0];
  const DeviceWarp* row_warps = nullptr;
  bool statistics = true, cut = device_warps;  // the nucleus launch may be needed
  for (std::size_t k = 0; !device_warps && k < warps.size(); ++k) {
    statistics = statistics && detail::statistics_warp(warps[k], params.vocab);
    cut = cut || detail::cuts_rows(warps[k], params.vocab);
  }
  if (device_warps || warps.size() > 1) {
    status = detail::stage(warps, staged.warps, stream, &row_warps);
    if (status != cudaSuccess) return status;
  }
  // The statistics launch zeroes the failure count; the one-launch path needs it zeroed here.
  if (!statistics) status = detail::clear_failures(params.status, params.batch, stream);
  if (status != cudaSuccess) return status;
  switch (params.dtype) {
    case DType::kF32:
      return statistics
                 ? launch_chain_statistics<float>(params, staged, shared_warp, row_warps, cut,
                                                  drafts, stream)
                 : launch_chain<true, float>(params, staged, shared_warp, row_warps, stream);
    case DType::kF16:
      return statistics
                 ? launch_chain_statistics<__half>(params, staged, shared_warp, row_warps, cut,
                                                   drafts, stream)
                 : launch_chain<true, __half>(params, staged, shared_warp, row_warps, stream);
    case DType::kBF16:
      return statistics ? launch_chain_statistics<__nv_bfloat16>(params, staged, shared_warp,
                                                                 row_warps, cut, drafts, stream)
                        : launch_chain<true, __nv_bfloat16>(params, staged, shared_warp,
                                                            row_warps, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace specdec::backend::cuda_impl
