// SPDX-License-Identifier: MIT
// The first launches of every call on the statistics path (the chain step from logits, the warp):
// the counters zeroed, the rows' statistics, and the cuts of the rows whose warp has top-p, top-k
// or min-p; and where their buffers lie in a workspace of row_stats_workspace_size bytes.
// IWYU pragma: private
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/backend/cuda/detail/nucleus_kernels.cuh"
#include "specdec/backend/cuda/detail/row_stats_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"

namespace specdec::backend::cuda_impl::detail {

/// The statistics' buffers of `rows` rows (row_stats_workspace_size's layout).
struct RowStatsBuffers {
  TileStats* tiles;
  unsigned int* counters;     // per row the statistics' block counter, then the cut's
  bool counters_zero;         // the caller's zeroed counters (no memset)
  unsigned int* list_counts;  // per row the listed candidates (zeroed by the statistics)
  RowStats* stats;
  float* gates;
  std::uint64_t* lists;
  CandidateHistograms histograms;
};

/// The buffers at `base`, which moves past them; the block counters the caller's `counters`
/// (zeroed words) when not null.
inline RowStatsBuffers carve_row_stats(unsigned char*& base, std::int64_t rows, std::int64_t vocab,
                                       unsigned int* counters = nullptr) {
  const auto r = static_cast<std::size_t>(rows);
  RowStatsBuffers out{};
  out.tiles = reinterpret_cast<TileStats*>(base);
  base += device_round_up(r * static_cast<std::size_t>(row_split(1, vocab, 1).tiles) *
                          sizeof(TileStats));
  out.counters = counters != nullptr ? counters : reinterpret_cast<unsigned int*>(base);
  out.counters_zero = counters != nullptr;
  out.list_counts = reinterpret_cast<unsigned int*>(base) + 2 * r;
  base += device_round_up(3 * r * sizeof(unsigned int));
  out.stats = reinterpret_cast<RowStats*>(base);
  base += device_round_up(r * sizeof(RowStats));
  out.gates = reinterpret_cast<float*>(base);
  base += device_round_up(r * sizeof(float));
  out.lists = reinterpret_cast<std::uint64_t*>(base);
  base += device_round_up(r * static_cast<std::size_t>(kNucleusListSize) * sizeof(std::uint64_t));
  const auto buckets = r * static_cast<std::size_t>(kNucleusBuckets);
  out.histograms.units = reinterpret_cast<unsigned long long*>(base);
  base += device_round_up(buckets * sizeof(unsigned long long));
  out.histograms.counts = reinterpret_cast<unsigned int*>(base);
  base += device_round_up(buckets * sizeof(unsigned int));
  return out;
}

/// The SMs of the current device (the split of rows over blocks fills them).
inline int device_sm_count() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      count < 1) {
    return kH100Sms;
  }
  return count;
}

/// Whether a warp cuts rows of n after their statistics, by top-p, top-k or min-p (the cut launch
/// is needed).
inline bool cuts_rows(const DeviceWarp& w, std::int64_t n) {
  return w.temperature > 0.0f && (w.top_p < 1.0f || w.min_p > 0.0f || cuts_by_top_k(w, n));
}

/// The rows launch_row_statistics reduces: `rows` rows of `n` entries of `set`, on the split
/// `split`, with their warps; `cut` when a warp cuts (the cut launch is needed); with
/// `keep_nucleus` each cut row is left listed for draws (nucleus_kernel); without it (the warp)
/// a row with min-p alone is left to the warp's write pass.
template <class T>
struct RowStatsLaunch {
  LogitRowSet<T> set;
  std::int64_t rows = 0;
  std::int64_t n = 0;
  RowSplit split;
  RowWarps warps;
  bool cut = false;
  bool keep_nucleus = false;
  std::int32_t* failures = nullptr;  // a status buffer's failure count, zeroed by the statistics
};

/// The counters zeroed (a memset, capturable; none when they are the caller's zeroed words),
/// the statistics of every row of `r.set`, then
/// (with `r.cut`) the cuts of the rows whose warp has one. Compiled once, in row_statistics.cu,
/// for fp32, fp16 and bf16 rows: the chain step and the warp share its kernels.
template <class T>
cudaError_t launch_row_statistics(const RowStatsLaunch<T>& r, const RowStatsBuffers& b,
                                  cudaStream_t stream);

}  // namespace specdec::backend::cuda_impl::detail
