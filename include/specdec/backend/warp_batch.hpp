// SPDX-License-Identifier: MIT
// Batched warps: B rows of raw logits -> B rows of warped fp32 probabilities, on any backend.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "specdec/backend/policy.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"

namespace specdec {

/// The shape a batched warp is sized for: `rows` rows of `vocab` logits.
struct WarpBatchShape {
  std::int64_t rows = 0;
  std::int64_t vocab = 0;
};

namespace detail {

/// One specialisation per backend (backend/cpu/warp_batch.hpp, backend/cuda/warp_batch.hpp).
template <class Backend>
struct WarpBatchImpl {
  static_assert(dependent_false<Backend>,
                "warp_logits_batch: no implementation for this backend; include "
                "specdec/backend/cpu/warp_batch.hpp or specdec/backend/cuda/warp_batch.hpp");
};

/// Checks what every backend checks on the host: shapes and strides.
inline void check_warp_shapes(std::int64_t rows, std::int64_t cols, std::int64_t logits_stride,
                              std::int64_t warped_rows, std::int64_t warped_cols,
                              std::int64_t warped_stride) {
  if (rows <= 0) fail("logits", "has {} rows, expected at least 1", rows);
  if (cols <= 0) fail("logits", "has {} columns, expected at least 1", cols);
  if (logits_stride < cols)
    fail("logits", "stride {} is smaller than its {} columns", logits_stride, cols);
  if (warped_rows != rows || warped_cols != cols) {
    fail("warped", "is {} x {}, expected {} x {} like logits", warped_rows, warped_cols, rows,
         cols);
  }
  if (warped_stride < cols)
    fail("warped", "stride {} is smaller than its {} columns", warped_stride, cols);
}

/// check_warp_shapes, and the warp parameters: `warps` holds one Warp shared by every row, or one
/// per row.
inline void check_warp_batch(std::int64_t rows, std::int64_t cols, std::int64_t logits_stride,
                             std::int64_t warped_rows, std::int64_t warped_cols,
                             std::int64_t warped_stride, std::span<const Warp> warps) {
  check_warp_shapes(rows, cols, logits_stride, warped_rows, warped_cols, warped_stride);
  check_warp_list(warps, rows, cols, "row");
}

}  // namespace detail

/// One batched warp's arguments (designated initializers): `logits` and `warped` as for the
/// positional warp_logits_batch; the warps either in host memory (`warps`: one for every row, or
/// one per row) or, for per-row warps an engine keeps on the device, `device_warps`: logits.rows
/// Warps in device memory (`warps` left empty), read in place by the kernels, so the call copies
/// nothing from the host and can be captured in a CUDA graph. The host does not see device
/// warps: on CUDA each must be one the statistics path takes (any but a top-k above 1024 and below
/// the vocabulary), and a row whose warp is not, or has a bad field, is written as NaN, the other
/// rows unaffected. On the CPU backend device_warps is read as host memory and checked as `warps`
/// is.
template <class T>
struct WarpBatchArgs {
  MatrixView<const T> logits;
  std::span<const Warp> warps = {};  // left out (empty) when device_warps gives them
  MatrixView<float> warped;
  const Warp* device_warps = nullptr;
};

namespace detail {

/// The warps of `args` as a host span: `warps`, or on a backend whose memory is the host's,
/// `device_warps` (logits.rows of them); checked as host warps.
template <class T>
std::span<const Warp> host_warps_of(const WarpBatchArgs<T>& args) {
  if (args.device_warps == nullptr) return args.warps;
  return {args.device_warps, static_cast<std::size_t>(args.logits.rows < 0 ? 0 : args.logits.rows)};
}

/// Refuses device_warps given together with host warps.
template <class T>
void check_warp_sources(const WarpBatchArgs<T>& args) {
  if (args.device_warps != nullptr && !args.warps.empty()) {
    fail("device_warps", "is set, so warps must be empty (it has {} entries): give one or the "
         "other", args.warps.size());
  }
}

}  // namespace detail

/// Bytes of workspace `warp_logits_batch` needs on `backend` for `shape` (host memory for the CPU
/// backend, device memory for CUDA).
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const WarpBatchShape& shape) {
  return detail::WarpBatchImpl<Backend>::workspace_size(backend, shape);
}

/// warped[r] = S_r(softmax(logits[r])) for every row r, with S_r = warps[r] (or warps[0] for all
/// rows when one Warp is given): exactly the per-row semantics of specdec::warp_logits
/// (temperature, then top-k, then top-p, then min-p; temperature 0 = greedy; ties to the lowest
/// id).
///
/// `logits` is rows x vocab raw logits, T = float, Eigen::half or Eigen::bfloat16 (on CUDA the
/// same bits as __half / __nv_bfloat16); `warped` receives rows x vocab warped fp32
/// probabilities. Both live where the backend computes (host for Cpu, device for Cuda); `warps`
/// is always host memory. `workspace` is a specdec::Workspace for the CPU backend and a
/// backend::DeviceWorkspace of at least workspace_size(backend, shape) bytes for CUDA.
/// Takes no random draws. Throws specdec::Error naming the bad argument (shapes, warps, the
/// workspace, and on the CPU backend every logit, e.g. "logits[2][7]").
template <backend::BackendPolicy Backend, class T, class Scratch>
void warp_logits_batch(const Backend& backend, MatrixView<T> logits, std::span<const Warp> warps,
                       MatrixView<float> warped, Scratch&& workspace) {
  using Value = std::remove_const_t<T>;
  detail::WarpBatchImpl<Backend>::template run<Value>(
      backend,
      WarpBatchArgs<Value>{
          .logits = MatrixView<const Value>(logits.data, logits.rows, logits.cols, logits.stride),
          .warps = warps,
          .warped = warped},
      std::forward<Scratch>(workspace));
}

/// warp_logits_batch with its arguments in a WarpBatchArgs: the same rows, and the one form that
/// takes device_warps.
template <backend::BackendPolicy Backend, class T, class Scratch>
void warp_logits_batch(const Backend& backend, const WarpBatchArgs<T>& args, Scratch&& workspace) {
  detail::check_warp_sources(args);
  detail::WarpBatchImpl<Backend>::template run<T>(backend, args, std::forward<Scratch>(workspace));
}

}  // namespace specdec
