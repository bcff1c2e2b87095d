// SPDX-License-Identifier: MIT
// Launchers of the copy and read kernels the CUDA benchmarks compare against.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace specdec::bench {

/// out[i] = float(in[i]) for i < n; `in` holds fp32 or (bf16 = true) bf16 values.
cudaError_t copy_to_float(const void* in, bool bf16, float* out, std::int64_t n,
                          cudaStream_t stream);

/// Reads in[0, n) once (fp32 or, bf16 = true, bf16 values) and writes one float a block to
/// `sums` (8 x the SMs floats): the floor of a call that reads its rows once.
cudaError_t read_once(const void* in, bool bf16, float* sums, std::int64_t n, cudaStream_t stream);

}  // namespace specdec::bench
