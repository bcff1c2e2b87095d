// SPDX-License-Identifier: MIT
// The bandwidth reference of the CUDA benchmarks: read B x V logits once, write B x V floats.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "copy_kernel.hpp"

namespace specdec::bench {
namespace {

template <class T>
__device__ __forceinline__ float to_float(T x) {
  return static_cast<float>(x);
}
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <class T>
__global__ void copy_to_float_kernel(const T* in, float* out, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = to_float(in[i]);
  }
}

}  // namespace

cudaError_t copy_to_float(const void* in, bool bf16, float* out, std::int64_t n,
                          cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int blocks = sms * 8;
  if (bf16) {
    copy_to_float_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(in), out, n);
  } else {
    copy_to_float_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float*>(in), out, n);
  }
  return cudaGetLastError();
}

}  // namespace specdec::bench
