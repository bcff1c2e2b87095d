// SPDX-License-Identifier: MIT
// launch(kernel, grid, threads, stream, args...): how launchers start a kernel. With nvcc it is
// cudaLaunchKernelEx, which returns this launch's own status (not an earlier, unrelated error);
// under the host emulation (backend/cuda/emulation) the emulated runtime runs the grid, so the
// launch path itself compiles and runs under g++.
// IWYU pragma: private
#pragma once

#include <cuda_runtime.h>

#include <utility>

/// `#pragma unroll n` for nvcc (a loop's loads issued ahead of their uses); nothing elsewhere.
#if defined(__CUDACC__)
#define SPECDEC_PRAGMA(text) _Pragma(#text)
#define SPECDEC_UNROLL(n) SPECDEC_PRAGMA(unroll n)
#else
#define SPECDEC_UNROLL(n)
#endif

/// A device function compiled once, not inlined at each call: for the draws' steps, whose
/// unrolled loads and warped entries would otherwise be copied into every call site (and the
/// kernels made several times larger, and slower to compile). Under the emulation too: g++ then
/// compiles the emulated kernels a quarter faster. (`__noinline__` is also a GCC attribute's name,
/// which is why a macro of that name is left alone.)
#if defined(__CUDACC__)
#define SPECDEC_NOINLINE __noinline__
#else
#define SPECDEC_NOINLINE __attribute__((noinline))
#endif

namespace specdec::backend::cuda_impl::detail {

/// Launches kernel on `grid` blocks of `threads` threads on `stream`; returns the launch status.
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, unsigned int threads, cudaStream_t stream,
                   Args&&... args) {
#if defined(__CUDACC__)
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
#elif defined(SPECDEC_CUDA_EMULATION)
  // The arguments convert to the kernel's parameters here, as they would at a real launch.
  return specdec::emulation::launch(
      grid, threads, stream, [kernel, ... p = Params(std::forward<Args>(args))] { kernel(p...); });
#else
#error "CUDA kernels compile with nvcc or under the host emulation (specdec::cuda_emulation)"
#endif
}

/// The block size a kernel is declared for (its __launch_bounds__): under the emulation a
/// launch with another block size is reported; on the device it costs nothing.
__device__ __forceinline__ void expect_block_threads(unsigned int threads) {
#if !defined(__CUDACC__) && defined(SPECDEC_CUDA_EMULATION)
  specdec::emulation::expect_block_threads(threads);
#else
  (void)threads;
#endif
}

}  // namespace specdec::backend::cuda_impl::detail
