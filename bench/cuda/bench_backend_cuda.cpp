// SPDX-License-Identifier: MIT
// Batched warps and batched chain verification on the CUDA backend against a copy kernel moving the
// same bytes, in one run: B = 1, 16, 64, 256 rows (sequences), V = 32000 and 128256, fp32 and bf16
// logits; chain verification with gamma = 5, warps included.
#include <cuda_runtime_api.h>

#include <Eigen/Core>
#include <cstdio>
#include <vector>

#include "copy_kernel.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
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

/// Batched chain verification from logits (warps included) of `batch` sequences, gamma = 5. The
/// draft logits equal the target logits and token 0 leads every row, so every draft token is
/// accepted: the worst case, where all 2 gamma + 1 rows of every sequence are warped. The copy
/// kernel reads the same logits once.
template <class T>
void run_chain_case(cudaStream_t stream, std::int64_t batch, std::int64_t vocab, const char* dtype,
                    const specdec::Warp& warp, const char* warp_name) {
  constexpr std::int64_t gamma = 5;
  specdec::toy::ToyRandom rng(11);
  std::vector<T> host_target(static_cast<std::size_t>(batch * (gamma + 1) * vocab));
  for (std::size_t i = 0; i < host_target.size(); ++i) {
    const bool lead = i % static_cast<std::size_t>(vocab) == 0;
    host_target[i] = static_cast<T>(lead ? 12.0f : static_cast<float>(3.0 * rng.normal()));
  }
  std::vector<T> host_draft(host_target.begin(), host_target.begin() + static_cast<std::ptrdiff_t>(
                                                                           batch * gamma * vocab));
  std::vector<specdec::Token> host_tokens(static_cast<std::size_t>(batch * gamma), 0);
  std::vector<specdec::RandomStream> streams(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < streams.size(); ++b)
    streams[b].sequence = static_cast<std::uint32_t>(b);
  T *target = nullptr, *draft = nullptr;
  specdec::Token *tokens = nullptr, *emitted = nullptr;
  std::int32_t* accepted = nullptr;
  float* copied = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const std::size_t bytes =
      specdec::workspace_size(backend, specdec::ChainBatchShape{batch, gamma, vocab, true});
  const std::size_t elements = host_target.size() + host_draft.size();
  check(cudaMalloc(reinterpret_cast<void**>(&target), host_target.size() * sizeof(T)),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&draft), host_draft.size() * sizeof(T)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&tokens), host_tokens.size() * sizeof(specdec::Token)),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&emitted),
                   static_cast<std::size_t>(batch * (gamma + 1)) * sizeof(specdec::Token)),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&accepted), static_cast<std::size_t>(batch) * 4),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&copied), host_target.size() * sizeof(float)),
        "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(target, host_target.data(), host_target.size() * sizeof(T),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(draft, host_draft.data(), host_draft.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(tokens, host_tokens.data(), host_tokens.size() * sizeof(specdec::Token),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  const std::vector<specdec::Warp> warps = {warp};
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const int iterations = batch * vocab > 1'000'000 ? 10 : 50;
  const float chain_ms = time_ms(stream, iterations, [&] {
    specdec::verify_chain_batch_logits(
        backend, specdec::MatrixView<const T>(target, batch * (gamma + 1), vocab),
        specdec::MatrixView<const T>(draft, batch * gamma, vocab), warps,
        specdec::MatrixView<const specdec::Token>(tokens, batch, gamma), streams,
        specdec::MatrixView<specdec::Token>(emitted, batch, gamma + 1),
        std::span<std::int32_t>(accepted, static_cast<std::size_t>(batch)), ws);
  });
  // The copy reads the target logits and then the draft logits once (same element count).
  const float copy_ms = time_ms(stream, iterations, [&] {
    check(specdec::bench::copy_to_float(target, sizeof(T) == 2, copied,
                                        static_cast<std::int64_t>(host_target.size()), stream),
          "copy_to_float");
    check(specdec::bench::copy_to_float(draft, sizeof(T) == 2, copied,
                                        static_cast<std::int64_t>(host_draft.size()), stream),
          "copy_to_float");
  });
  std::printf("%-10s %-5s %5lld %7lld %12.1f %12.1f %10.2f   (%zu logits)\n", warp_name, dtype,
              static_cast<long long>(batch), static_cast<long long>(vocab), chain_ms * 1e3,
              copy_ms * 1e3, chain_ms / copy_ms, elements);
  cudaFree(target);
  cudaFree(draft);
  cudaFree(tokens);
  cudaFree(emitted);
  cudaFree(accepted);
  cudaFree(copied);
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
  std::printf("\nbatched chain verification, gamma = 5, from logits, every token accepted\n");
  std::printf("%-10s %-5s %5s %7s %12s %12s %10s\n", "warp", "dtype", "B", "V", "chain(us)",
              "copy(us)", "x copy");
  for (std::int64_t vocab : {32000, 128256}) {
    for (std::int64_t batch : {1, 16, 64, 256}) {
      run_chain_case<float>(stream, batch, vocab, "fp32", top_p, "top-p 0.9");
      run_chain_case<Eigen::bfloat16>(stream, batch, vocab, "bf16", top_p, "top-p 0.9");
      run_chain_case<Eigen::bfloat16>(stream, batch, vocab, "bf16", {}, "none");
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}
