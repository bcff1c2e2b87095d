// SPDX-License-Identifier: MIT
// The CUDA backend policy: kernels are enqueued on the stream it holds. Needs the CUDA runtime
// headers and the specdec::cuda library (CMake option SPECDEC_WITH_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#include "specdec/backend/policy.hpp"

namespace specdec::backend {

/// Device backend. Entry points take device pointers, enqueue work on `stream`, allocate nothing
/// and return without synchronising.
struct Cuda {
  cudaStream_t stream = nullptr;  // nullptr = the legacy default stream

  /// The same backend on another stream: `backend::cuda.on(stream)`.
  constexpr Cuda on(cudaStream_t s) const { return Cuda{s}; }
};
inline constexpr Cuda cuda{};

template <>
struct IsBackend<Cuda> : std::true_type {};

}  // namespace specdec::backend
