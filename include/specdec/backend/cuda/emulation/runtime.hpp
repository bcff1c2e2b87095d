// SPDX-License-Identifier: MIT
// Host emulation (see emulated_cuda.hpp) of the CUDA runtime calls the backend makes: device
// memory is host memory registered in the traffic ledger, copies run at once and are counted
// (pageable or pinned source), launches run the grid's blocks one at a time in a random order
// seeded by ledger.seed (results must not depend on it), and stream capture records launches and
// pinned copies for replay while refusing what a real capture refuses (pageable copies,
// synchronisation).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
using cudaError_t = cudaError;
using cudaStream_t = void*;
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0 };

namespace specdec::emulation {

/// A recorded stream operation: a launch or a copy, replayed in order.
struct Graph {
  std::vector<std::function<void()>> ops;
};

struct Runtime {
  cudaError_t last_error = cudaSuccess;
  int sm_count = 132;  // an H100's: launch configurations depend on it
  std::vector<std::pair<const void*, std::size_t>> pinned;  // cudaMallocHost ranges
  cudaStream_t capturing = nullptr;                         // the stream being captured
  bool capture_valid = true;
  std::unique_ptr<Graph> graph;
  std::vector<std::unique_ptr<int>> streams;

  bool is_pinned(const void* p) const {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return std::any_of(pinned.begin(), pinned.end(), [a](const auto& r) {
      const auto b = reinterpret_cast<std::uintptr_t>(r.first);
      return a >= b && a < b + r.second;
    });
  }
  cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
  }
  /// A call that a capture refuses: it invalidates the capture.
  cudaError_t refuse_in_capture() {
    capture_valid = false;
    return fail(cudaErrorStreamCaptureUnsupported);
  }
};
inline Runtime runtime;

/// Runs every block of `grid` (random order from ledger.seed), `threads` threads each.
inline void run_grid(dim3 grid, unsigned int threads, const std::function<void()>& kernel) {
  ++ledger.counts.launches;
  std::vector<dim3> blocks;
  for (unsigned int z = 0; z < grid.z; ++z)
    for (unsigned int y = 0; y < grid.y; ++y)
      for (unsigned int x = 0; x < grid.x; ++x) blocks.push_back({x, y, z});
  std::mt19937_64 rng(ledger.seed + ledger.counts.launches);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  gridDim = grid;
  if (latency.on) latency.begin_launch(grid.x * grid.y * grid.z, threads, ledger.total().sectors);
  for (const dim3& b : blocks) run_block(threads, b, kernel);
  if (latency.on) latency.end_launch(ledger.total().sectors);
}

inline cudaError_t launch(dim3 grid, unsigned int threads, cudaStream_t stream,
                          std::function<void()> kernel) {
  if (threads == 0 || threads > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535) {
    return runtime.fail(cudaErrorInvalidConfiguration);
  }
  if (runtime.capturing != nullptr && stream == runtime.capturing) {
    ++ledger.counts.captured_launches;
    runtime.graph->ops.push_back([grid, threads, kernel] { run_grid(grid, threads, kernel); });
    return cudaSuccess;
  }
  run_grid(grid, threads, kernel);
  return cudaSuccess;
}

}  // namespace specdec::emulation

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    default:
      return "unknown error";
  }
}
inline cudaError_t cudaGetLastError() {
  return std::exchange(specdec::emulation::runtime.last_error, cudaSuccess);
}
inline cudaError_t cudaPeekAtLastError() { return specdec::emulation::runtime.last_error; }

inline cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  auto& rt = specdec::emulation::runtime;
  if (rt.capturing != nullptr) return rt.refuse_in_capture();
  ++specdec::emulation::ledger.counts.allocations;
  *p = std::aligned_alloc(256, (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256);
  if (*p == nullptr) return rt.fail(cudaErrorMemoryAllocation);
  specdec::emulation::ledger.add("cudaMalloc", *p, bytes, false);
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
  specdec::emulation::ledger.remove(p);
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void** p, std::size_t bytes) {
  *p = std::aligned_alloc(256, (std::max<std::size_t>(bytes, 1) + 255) / 256 * 256);
  specdec::emulation::runtime.pinned.emplace_back(*p, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void* p) {
  std::erase_if(specdec::emulation::runtime.pinned, [p](const auto& r) { return r.first == p; });
  std::free(p);
  return cudaSuccess;
}

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes,
                                   cudaMemcpyKind kind, cudaStream_t stream = nullptr) {
  namespace emu = specdec::emulation;
  auto& rt = emu::runtime;
  const bool from_host = kind == cudaMemcpyHostToDevice;
  const bool pinned = from_host && rt.is_pinned(src);
  const auto copy = [=] {
    emu::latency.stream_op(pinned || !from_host ? emu::latency.k.copy_us
                                                 : emu::latency.k.pageable_copy_us);
    std::memcpy(dst, src, bytes);
    emu::ledger.mark_written(dst, bytes);
  };
  if (rt.capturing != nullptr && stream == rt.capturing) {
    // A pageable source is staged synchronously: capture refuses it.
    if (from_host && !pinned) return rt.refuse_in_capture();
    rt.graph->ops.push_back([=] {
      ++(from_host ? emu::ledger.counts.copies_pinned : emu::ledger.counts.copies_other);
      copy();
    });
    return cudaSuccess;
  }
  ++(from_host ? (pinned ? emu::ledger.counts.copies_pinned : emu::ledger.counts.copies_pageable)
               : emu::ledger.counts.copies_other);
  copy();
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  auto& rt = specdec::emulation::runtime;
  if (rt.capturing != nullptr) return rt.refuse_in_capture();
  ++specdec::emulation::ledger.counts.syncs;
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
inline cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes,
                                   cudaStream_t stream = nullptr) {
  namespace emu = specdec::emulation;
  const auto set = [=] {
    ++emu::ledger.counts.memsets;
    emu::latency.stream_op(emu::latency.k.memset_us);
    std::memset(dst, value, bytes);
    emu::ledger.mark_written(dst, bytes);
  };
  if (emu::runtime.capturing != nullptr && stream == emu::runtime.capturing) {
    emu::runtime.graph->ops.push_back(set);
  } else {
    set();
  }
  return cudaSuccess;
}

inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
  auto& rt = specdec::emulation::runtime;
  if (rt.capturing != nullptr) return rt.refuse_in_capture();
  ++specdec::emulation::ledger.counts.syncs;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaStreamSynchronize(nullptr); }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
  auto& rt = specdec::emulation::runtime;
  rt.streams.push_back(std::make_unique<int>(0));
  *s = rt.streams.back().get();
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }

using cudaGraph_t = specdec::emulation::Graph*;
using cudaGraphExec_t = specdec::emulation::Graph*;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  auto& rt = specdec::emulation::runtime;
  // The legacy default stream cannot be captured.
  if (stream == nullptr || rt.capturing != nullptr)
    return rt.fail(cudaErrorStreamCaptureUnsupported);
  rt.capturing = stream;
  rt.capture_valid = true;
  rt.graph = std::make_unique<specdec::emulation::Graph>();
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  auto& rt = specdec::emulation::runtime;
  if (stream != rt.capturing) return rt.fail(cudaErrorInvalidValue);
  rt.capturing = nullptr;
  *graph = nullptr;
  if (!rt.capture_valid) {
    rt.graph.reset();
    return rt.fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = rt.graph.release();
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                        unsigned long long = 0) {
  *exec = new specdec::emulation::Graph(*graph);
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  for (const auto& op : exec->ops) op();
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
/// The emulated device has runtime.sm_count SMs (an H100's 132 unless a test sets another).
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  if (attr != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
  *value = specdec::emulation::runtime.sm_count;
  return cudaSuccess;
}
