// SPDX-License-Identifier: MIT
// How the host compiles the loops over a row: the attributes of a row loop and of the entry
// functions it calls (host only; CUDA code has its own parallel skeleton).
#pragma once

// The row loops are compiled three times when the including code targets less than AVX2 (the
// distributions' default): as is, for AVX2 and for AVX-512 (x86-64-v4), the CPU picking one at
// load time. No clone fuses multiply-adds, so every clone rounds each operation as the default
// code does and matches the entries recomputed alone. A build for AVX-512 gets its full width:
// GCC's tuning for those CPUs prefers 256-bit vectors, and the row loops are bound by their
// arithmetic, not by memory. Define SPECDEC_NO_CPU_CLONES to compile them once, as is.
//
// SPECDEC_BOUND_LOOP: a row loop whose results only bound others (the rough pass of
// core/warp/logit_stats.hpp), never recomputed entry by entry: its clones may fuse multiply-adds.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__x86_64__) && \
    !defined(__AVX2__) && !defined(SPECDEC_NO_CPU_CLONES)
#define SPECDEC_ROW_LOOP \
  __attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), optimize("fp-contract=off")))
#define SPECDEC_BOUND_LOOP \
  __attribute__((target_clones("arch=x86-64-v4", "avx2", "default"), optimize("fp-contract=fast")))
#elif defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && defined(__AVX512F__)
#define SPECDEC_ROW_LOOP __attribute__((target("prefer-vector-width=512")))
#define SPECDEC_BOUND_LOOP __attribute__((target("prefer-vector-width=512")))
#else
#define SPECDEC_ROW_LOOP
#define SPECDEC_BOUND_LOOP
#endif

// Entry functions the row loops call: inlined always, or the loops do not vectorise. nvcc compiles
// them for the device too: the CUDA kernels compute the same entries with the same operations.
#if defined(__CUDACC__)
#define SPECDEC_ENTRY_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define SPECDEC_ENTRY_INLINE [[gnu::always_inline]] inline
#else
#define SPECDEC_ENTRY_INLINE inline
#endif
