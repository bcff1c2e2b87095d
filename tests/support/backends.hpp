// SPDX-License-Identifier: MIT
// The backends a test runs on, and memory that lives where each backend computes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "specdec/backend/cpu/fill_random.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/core/workspace.hpp"

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
#include <cuda_runtime_api.h>

#include "specdec/backend/cuda/fill_random.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#endif

namespace specdec::test {

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
using Backends = std::tuple<backend::Cpu, backend::Cuda>;
#else
using Backends = std::tuple<backend::Cpu>;
#endif

/// `count` values of T in the backend's memory, filled from and read back to host vectors.
template <class Backend, class T>
class Buffer;

template <class T>
class Buffer<backend::Cpu, T> {
 public:
  explicit Buffer(const std::vector<T>& host) : values_(host) {}
  explicit Buffer(std::size_t count) : values_(count) {}
  T* data() { return values_.data(); }
  std::vector<T> to_host() const { return values_; }

 private:
  std::vector<T> values_;
};

/// Scratch memory of `bytes` for the backend: a Workspace, or device memory.
template <class Backend>
class Scratch;

template <>
class Scratch<backend::Cpu> {
 public:
  explicit Scratch(std::size_t bytes) : ws_(bytes) {}
  Workspace& get() { return ws_; }

 private:
  Workspace ws_;
};

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
inline void cuda_require(cudaError_t code) {
  if (code != cudaSuccess) throw std::runtime_error(cudaGetErrorString(code));
}

template <class T>
class Buffer<backend::Cuda, T> {
 public:
  explicit Buffer(const std::vector<T>& host) : Buffer(host.size()) {
    cuda_require(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  explicit Buffer(std::size_t count) : count_(count) {
    cuda_require(cudaMalloc(reinterpret_cast<void**>(&data_), std::max<std::size_t>(bytes(), 1)));
  }
  ~Buffer() { cudaFree(data_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* data() { return data_; }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    cuda_require(cudaDeviceSynchronize());
    cuda_require(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  std::size_t bytes() const { return count_ * sizeof(T); }
  std::size_t count_ = 0;
  T* data_ = nullptr;
};

template <>
class Scratch<backend::Cuda> {
 public:
  /// With `counters` > 0, that many zeroed counter words beside it (DeviceWorkspace::counters).
  explicit Scratch(std::size_t bytes, std::size_t counters = 0)
      : buffer_(bytes),
        bytes_(bytes),
        counters_(std::vector<unsigned int>(counters, 0u)),
        words_(counters) {}
  backend::DeviceWorkspace get() { return {buffer_.data(), bytes_, {counters_.data(), words_}}; }
  std::vector<unsigned int> counters() const { return counters_.to_host(); }

 private:
  Buffer<backend::Cuda, std::byte> buffer_;
  std::size_t bytes_;
  Buffer<backend::Cuda, unsigned int> counters_;
  std::size_t words_;
};
#endif

}  // namespace specdec::test
