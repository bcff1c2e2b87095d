// SPDX-License-Identifier: MIT
// The CUDA backend of warp_logits_batch: device logits in, device warped probabilities out, on the
// backend's stream.
#pragma once

#include <Eigen/Core>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/warp_batch.hpp"

namespace specdec::detail {

static_assert(std::is_standard_layout_v<Warp> &&
                  sizeof(Warp) == sizeof(backend::cuda_impl::DeviceWarp) &&
                  offsetof(Warp, temperature) ==
                      offsetof(backend::cuda_impl::DeviceWarp, temperature) &&
                  offsetof(Warp, top_k) == offsetof(backend::cuda_impl::DeviceWarp, top_k) &&
                  offsetof(Warp, top_p) == offsetof(backend::cuda_impl::DeviceWarp, top_p) &&
                  offsetof(Warp, min_p) == offsetof(backend::cuda_impl::DeviceWarp, min_p),
              "specdec::Warp and its device copy must share one layout");

template <class T>
constexpr backend::cuda_impl::DType device_dtype() {
  if constexpr (std::is_same_v<T, float>) {
    return backend::cuda_impl::DType::kF32;
  } else if constexpr (std::is_same_v<T, Eigen::half>) {
    return backend::cuda_impl::DType::kF16;
  } else if constexpr (std::is_same_v<T, Eigen::bfloat16>) {
    return backend::cuda_impl::DType::kBF16;
  } else {
    static_assert(dependent_false<T>,
                  "warp_logits_batch: logits must be float, Eigen::half or Eigen::bfloat16");
  }
}

/// The warps as the launchers take them (the same bytes as DeviceWarp), where they are.
inline Resident<const backend::cuda_impl::DeviceWarp> device_warps(
    const Resident<const Warp>& warps) {
  const auto* data = reinterpret_cast<const backend::cuda_impl::DeviceWarp*>(warps.data());
  if (warps.on_device()) return on_device(data, warps.size());
  return std::span<const backend::cuda_impl::DeviceWarp>(data, warps.size());
}

/// Checks a device workspace against the bytes an operation needs.
inline void check_device_workspace(const backend::DeviceWorkspace& ws, std::size_t needed) {
  if (needed > 0 && ws.data == nullptr)
    fail("workspace", "is null but {} bytes are needed", needed);
  if (ws.bytes < needed) {
    fail("workspace", "holds {} bytes, {} are needed ({} missing)", ws.bytes, needed,
         needed - ws.bytes);
  }
}

/// The caller's zeroed counters a call counts in (DeviceWorkspace::counters), checked against the
/// `needed` words; null when the caller gave none (the call then zeroes counters of its own).
inline unsigned int* device_counters(const backend::DeviceWorkspace& ws, std::size_t needed) {
  if (ws.counters.empty()) return nullptr;
  if (ws.counters.data() == nullptr) fail("workspace.counters", "is a null device pointer");
  if (ws.counters.size() < needed) {
    fail("workspace.counters", "holds {} words, {} are needed (workspace_counters)",
         ws.counters.size(), needed);
  }
  return ws.counters.data();
}

template <>
struct WarpBatchImpl<backend::Cuda> {
  /// Device bytes: room for per-row warp parameters (unused when one warp is shared or the warps
  /// are in device memory) and the rows' statistics (a TileStats per 1024 entries; per row 64
  /// bytes and a list of candidates for top-p and top-k).
  /// Needs no initialisation: each call zeroes the counters it uses, unless the caller gives
  /// its own zeroed ones (DeviceWorkspace::counters).
  static std::size_t workspace_size(const backend::Cuda&, const WarpBatchShape& shape) {
    return backend::cuda_impl::warp_workspace_size(shape.rows, shape.vocab);
  }

  /// The device logits are not scanned: rows must hold no NaN or +inf and at least one finite
  /// value (what the CPU backend checks), or the output row is unspecified.
  /// Warps on the device are read in place by the kernels (not checked here).
  template <class T>
  static void run(const backend::Cuda& cuda, const WarpBatchArgs<T>& args,
                  const backend::DeviceWorkspace& ws) {
    check_warp_batch<backend::Cuda>(args);
    const MatrixView<const T> logits = args.logits;
    const MatrixView<float> warped = args.warped;
    if (logits.cols > INT_MAX)
      fail("logits", "has {} columns, at most {} are supported", logits.cols, INT_MAX);
    if (logits.data == nullptr) fail("logits", "is a null device pointer");
    if (warped.data == nullptr) fail("warped", "is a null device pointer");
    check_device_workspace(ws, workspace_size(cuda, {logits.rows, logits.cols}));
    unsigned int* counters = device_counters(ws, backend::cuda_impl::row_counters(logits.rows));
    check_cuda(backend::cuda_impl::warp_logits_batch({.logits = logits.data,
                                                      .dtype = device_dtype<T>(),
                                                      .rows = logits.rows,
                                                      .cols = logits.cols,
                                                      .logits_stride = logits.stride,
                                                      .warped = warped.data,
                                                      .warped_stride = warped.stride,
                                                      .warps = device_warps(args.warps),
                                                      .counters = counters},
                                                     ws.data, cuda.stream),
               "warp_logits_batch");
  }
};

}  // namespace specdec::detail

namespace specdec {

/// Zeroed counter words a CUDA warp of `shape` counts in when the caller gives them
/// (DeviceWorkspace::counters): two a row.
inline std::size_t workspace_counters(const backend::Cuda&, const WarpBatchShape& shape) {
  return backend::cuda_impl::row_counters(shape.rows);
}

}  // namespace specdec
