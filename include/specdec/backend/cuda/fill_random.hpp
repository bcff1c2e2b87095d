// SPDX-License-Identifier: MIT
// The CUDA backend of fill_random: one thread per draw, on the backend's stream.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/host_staging.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/fill_random.hpp"

namespace specdec::detail {

template <>
struct FillRandomImpl<backend::Cuda> {
  /// Device bytes: the staged host streams (a call with streams on the device needs none).
  static std::size_t workspace_size(const backend::Cuda&, const FillRandomShape& shape) {
    return backend::cuda_impl::device_round_up(static_cast<std::size_t>(shape.streams) *
                                               sizeof(RandomStream));
  }

  /// Checked by fill_random. Device streams are read in place (no copy, no workspace needed).
  static void run(const backend::Cuda& cuda, const FillRandomArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const MatrixView<float>& out = args.out;
    if (out.cols == 0) return;
    if (out.data == nullptr) fail("out", "is a null device pointer");
    const bool staged = !args.streams.on_device();
    check_device_workspace(ws, staged ? workspace_size(cuda, {out.rows, out.cols}) : 0);
    check_cuda_staged(backend::cuda_impl::fill_random({.streams = args.streams,
                                                       .first = args.first,
                                                       .count = out.cols,
                                                       .out = out.data,
                                                       .out_stride = out.stride,
                                                       .kind = args.kind},
                                                      ws.data, cuda.stream),
                      "fill_random", staged ? "streams" : "");
  }
};

}  // namespace specdec::detail
