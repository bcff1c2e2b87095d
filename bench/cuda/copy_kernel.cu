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

/// Launches kernel<float> or kernel<bf16> (as `bf16` says) on `in`, eight blocks of 256 threads
/// an SM of the current device.
template <template <class> class Kernel, class... Args>
cudaError_t launch_by_type(const void* in, bool bf16, cudaStream_t stream, Args... args) {
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (bf16) {
    Kernel<__nv_bfloat16>::launch(sms * 8, stream, static_cast<const __nv_bfloat16*>(in), args...);
  } else {
    Kernel<float>::launch(sms * 8, stream, static_cast<const float*>(in), args...);
  }
  return cudaGetLastError();
}

template <class T>
struct ReadOnce {
  static void launch(int blocks, cudaStream_t stream, const T* in, float* sums, std::int64_t n) {
    read_once_kernel<<<blocks, 256, 0, stream>>>(in, sums, n);
  }
};

template <class T>
struct CopyToFloat {
  static void launch(int blocks, cudaStream_t stream, const T* in, float* out, std::int64_t n) {
    copy_to_float_kernel<<<blocks, 256, 0, stream>>>(in, out, n);
  }
};

}  // namespace

cudaError_t read_once(const void* in, bool bf16, float* sums, std::int64_t n, cudaStream_t stream) {
  return launch_by_type<ReadOnce>(in, bf16, stream, sums, n);
}

cudaError_t copy_to_float(const void* in, bool bf16, float* out, std::int64_t n,
                          cudaStream_t stream) {
  return launch_by_type<CopyToFloat>(in, bf16, stream, out, n);
}

}  // namespace specdec::bench
