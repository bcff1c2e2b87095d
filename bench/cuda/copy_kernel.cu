// SPDX-License-Identifier: MIT
// The bandwidth references of the CUDA benchmarks: read B x V logits once and write B x V floats,
// or only read them once.
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

template <class T>
__global__ void read_once_kernel(const T* in, float* sums, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  float sum = 0.0f;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    sum += to_float(in[i]);
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  __shared__ float warps[8];
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < 8; ++w) sum += warps[w];
    sums[blockIdx.x] = sum;  // kept, so the reads are not optimised away
  }
}

}  // namespace

cudaError_t read_once(const void* in, bool bf16, float* sums, std::int64_t n, cudaStream_t stream) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const int blocks = sms * 8;
  if (bf16) {
    read_once_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(in), sums, n);
  } else {
    read_once_kernel<<<blocks, 256, 0, stream>>>(static_cast<const float*>(in), sums, n);
  }
  return cudaGetLastError();
}

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
