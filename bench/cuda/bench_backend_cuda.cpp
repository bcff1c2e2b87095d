// SPDX-License-Identifier: MIT
// Batched warps on the CUDA backend against a copy kernel moving the same bytes, in one run:
// B = 1, 16, 64, 256 rows, V = 32000 and 128256, fp32 and bf16 logits.
#include <cuda_runtime_api.h>

#include <Eigen/Core>
#include <cstdio>
#include <vector>

#include "copy_kernel.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/toy/random.hpp"

namespace {

void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(code));
    std::exit(1);
  }
}

/// Mean milliseconds per call of `fn` over `iterations` calls after a warm-up, on `stream`.
template <class F>
float time_ms(cudaStream_t stream, int iterations, F&& fn) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) fn();
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iterations; ++i) fn();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / static_cast<float>(iterations);
}

template <class T>
void run_case(cudaStream_t stream, std::int64_t rows, std::int64_t vocab, const char* dtype,
              const specdec::Warp& warp, const char* warp_name) {
  specdec::toy::ToyRandom rng(7);
  std::vector<T> host(static_cast<std::size_t>(rows * vocab));
  for (auto& x : host) x = static_cast<T>(static_cast<float>(3.0 * rng.normal()));
  T* logits = nullptr;
  float* warped = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const std::size_t bytes = specdec::workspace_size(backend, specdec::WarpBatchShape{rows, vocab});
  check(cudaMalloc(reinterpret_cast<void**>(&logits), host.size() * sizeof(T)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&warped), host.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(logits, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  const std::vector<specdec::Warp> warps = {warp};
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const int iterations = rows * vocab > 4'000'000 ? 20 : 100;
  const float warp_ms = time_ms(stream, iterations, [&] {
    specdec::warp_logits_batch(backend, specdec::MatrixView<const T>(logits, rows, vocab), warps,
                               specdec::MatrixView<float>(warped, rows, vocab), ws);
  });
  const float copy_ms = time_ms(stream, iterations, [&] {
    check(specdec::bench::copy_to_float(logits, sizeof(T) == 2, warped, rows * vocab, stream),
          "copy_to_float");
  });
  std::printf("%-10s %-5s %5lld %7lld %12.1f %12.1f %10.2f\n", warp_name, dtype,
              static_cast<long long>(rows), static_cast<long long>(vocab), warp_ms * 1e3,
              copy_ms * 1e3, warp_ms / copy_ms);
  cudaFree(logits);
  cudaFree(warped);
  cudaFree(scratch);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: nothing to benchmark");
    return 0;
  }
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::printf("%-10s %-5s %5s %7s %12s %12s %10s\n", "warp", "dtype", "B", "V", "warp(us)",
              "copy(us)", "x copy");
  const specdec::Warp top_p{.temperature = 0.8f, .top_p = 0.9f};
  const specdec::Warp top_k{.temperature = 0.8f, .top_k = 50};
  for (std::int64_t vocab : {32000, 128256}) {
    for (std::int64_t rows : {1, 16, 64, 256}) {
      run_case<float>(stream, rows, vocab, "fp32", top_p, "top-p 0.9");
      run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", top_p, "top-p 0.9");
      run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", top_k, "top-k 50");
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}
