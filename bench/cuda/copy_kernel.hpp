// SPDX-License-Identifier: MIT
// Launcher of the copy kernel the CUDA benchmarks compare against.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace specdec::bench {

/// out[i] = float(in[i]) for i < n; `in` holds fp32 or (bf16 = true) bf16 values.
cudaError_t copy_to_float(const void* in, bool bf16, float* out, std::int64_t n,
                          cudaStream_t stream);

}  // namespace specdec::bench
