// SPDX-License-Identifier: MIT
// Batched warps: B rows of raw logits -> B rows of warped fp32 probabilities, on any backend.
#pragma once

#include <string>

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/shapes.hpp"
#include "specdec/core/warp.hpp"

namespace specdec {

namespace detail {

/// One specialisation per backend (backend/cpu/warp_batch.hpp, backend/cuda/warp_batch.hpp).
template <class Backend>
struct WarpBatchImpl : NoBackendImpl<Backend> {};

}  // namespace detail

/// One batched warp's arguments (designated initializers): `logits` and `warped` as for the
/// positional warp_logits_batch, and the warps (one for every row, or one per row) as a Resident
/// array: host memory, or for per-row warps an engine keeps on the device,
/// `on_device(warps, logits.rows)`, read in place by the kernels, so the call copies nothing from
/// the host and can be captured in a CUDA graph. The host does not see device warps: on CUDA each
/// must be one the statistics path takes (any but a top-k above 1024 and below the vocabulary),
/// and a row whose warp is not, or has a bad field, is written as NaN, the other rows unaffected.
/// On the CPU backend device warps are read, and checked, as host warps are.
template <class T>
struct WarpBatchArgs {
  MatrixView<const T> logits;
  Resident<const Warp> warps = {};
  MatrixView<float> warped;
};

namespace detail {

/// The host checks every backend makes: shapes, strides and (unless they are on the device of a
/// backend that does not read host memory) the warps.
template <class Backend, class T>
void check_warp_batch(const WarpBatchArgs<T>& args) {
  const auto& logits = args.logits;
  check_matrix("logits", logits, {.min_rows = 1});
  check_matrix("warped", args.warped, {.rows = logits.rows, .cols = logits.cols,
                                      .cols_of = "logits"});
  if (args.warps.on_device() && !kHostMemory<Backend>) {
    check_resident("warps", args.warps, static_cast<std::size_t>(logits.rows));
  } else {
    check_warp_list(args.warps.span(), logits.rows, logits.cols, "row");
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
/// takes warps on the device.
template <backend::BackendPolicy Backend, class T, class Scratch>
void warp_logits_batch(const Backend& backend, const WarpBatchArgs<T>& args, Scratch&& workspace) {
  detail::WarpBatchImpl<Backend>::template run<T>(backend, args, std::forward<Scratch>(workspace));
}

}  // namespace specdec
