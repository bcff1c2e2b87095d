// SPDX-License-Identifier: MIT
// A host emulation of the CUDA built-ins the backend's kernels use, so the kernel source itself
// runs (slowly) under g++ on machines without a GPU: every CUDA thread of one block is a
// std::thread, __syncthreads is a barrier, __shared__ variables are statics shared by the block,
// and warp shuffles exchange values through shared slots between two barriers.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(threads)
#define __shared__ static

struct EmulatedDim {
  unsigned int x = 0, y = 0, z = 0;
};
inline thread_local EmulatedDim threadIdx;
inline thread_local EmulatedDim blockIdx;
inline EmulatedDim blockDim{32, 1, 1};
inline std::barrier<>* emulated_block_barrier = nullptr;

inline void __syncthreads() { emulated_block_barrier->arrive_and_wait(); }
inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline float __fmul_rn(float a, float b) { return a * b; }
template <class T>
T __shfl_xor_sync(unsigned int, T value, int lane_mask) {
  static T slots[1024];
  emulated_block_barrier->arrive_and_wait();
  slots[threadIdx.x] = value;
  emulated_block_barrier->arrive_and_wait();
  return slots[threadIdx.x ^ static_cast<unsigned int>(lane_mask)];
}

/// Runs `kernel()` as one block of `threads` threads (a multiple of 32), block index `block`.
inline void run_emulated_block(unsigned int threads, unsigned int block,
                               const std::function<void()>& kernel) {
  std::barrier<> barrier(threads);
  emulated_block_barrier = &barrier;
  blockDim = {threads, 1, 1};
  std::vector<std::thread> pool;
  for (unsigned int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      threadIdx = {t, 0, 0};
      blockIdx = {block, 0, 0};
      kernel();
    });
  }
  for (auto& thread : pool) thread.join();
  emulated_block_barrier = nullptr;
}
