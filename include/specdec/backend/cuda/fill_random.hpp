// SPDX-License-Identifier: MIT
// The CUDA backend of fill_random: one thread per draw, on the backend's stream.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/fill_random.hpp"

namespace specdec::detail {

template <>
struct FillRandomImpl<backend::Cuda> {
  /// Device bytes: the streams.
  static std::size_t workspace_size(const backend::Cuda&, const FillRandomShape& shape) {
    return backend::cuda_impl::device_round_up(static_cast<std::size_t>(shape.streams) *
                                               sizeof(RandomStream));
  }

  static void run(const backend::Cuda& cuda, std::span<const RandomStream> streams,
                  std::uint32_t first, MatrixView<float> out, RandomKind kind,
                  const backend::DeviceWorkspace& ws) {
    if (out.cols == 0) return;
    if (out.data == nullptr) fail("out", "is a null device pointer");
    check_device_workspace(ws, workspace_size(cuda, {out.rows, out.cols}));
    check_cuda(backend::cuda_impl::fill_random({.host_streams = streams.data(),
                                                .stream_count = out.rows,
                                                .first = first,
                                                .count = out.cols,
                                                .out = out.data,
                                                .out_stride = out.stride,
                                                .kind = kind},
                                               ws.data, cuda.stream),
               "fill_random");
  }
};

}  // namespace specdec::detail
