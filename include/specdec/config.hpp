// SPDX-License-Identifier: MIT
// Version, the host/device function macro and feature switches.
#pragma once

#define SPECDEC_VERSION_MAJOR 0
#define SPECDEC_VERSION_MINOR 1
#define SPECDEC_VERSION_PATCH 0

// Row functions are written once and compiled for the host by g++ and for the device by nvcc.
#if defined(__CUDACC__)
#define SPECDEC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SPECDEC_HOST_DEVICE inline
#endif

#ifndef SPECDEC_ENABLE_ASSERTS
#ifdef NDEBUG
#define SPECDEC_ENABLE_ASSERTS 0
#else
#define SPECDEC_ENABLE_ASSERTS 1
#endif
#endif

#if SPECDEC_ENABLE_ASSERTS && !defined(__CUDA_ARCH__)
#include <cassert>
#define SPECDEC_ASSERT(cond) assert(cond)
#else
#define SPECDEC_ASSERT(cond) ((void)0)
#endif
