// SPDX-License-Identifier: MIT
// The CUDA warp kernel's source, run on the host through emulation/emulated_cuda.hpp (one
// std::thread per CUDA thread), against the CPU row oracle: checks the kernel's threshold
// searches and tie-breaking on machines without a GPU.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the kernel header then sees its built-ins.
#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"
#include "support/warp_edge_cases.hpp"

using namespace specdec;
namespace kernels = specdec::backend::cuda_impl::detail;

namespace {

template <class T>
std::vector<float> run_kernel(const std::vector<T>& logits, const Warp& w, unsigned int threads) {
  const int n = static_cast<int>(logits.size());
  std::vector<float> out(logits.size());
  const backend::cuda_impl::DeviceWarp device_warp{w.temperature, w.top_k, w.top_p, w.min_p};
  run_emulated_block(threads, 0, [&] {
    kernels::warp_logits_batch_kernel<T>(logits.data(), n, out.data(), n, n, device_warp, nullptr);
  });
  return out;
}

template <class T>
void check_against_oracle(const std::vector<T>& logits, const Warp& w, unsigned int threads) {
  std::vector<float> expected(logits.size());
  Workspace ws;
  warp_logits<T>(w, logits, expected, ws);
  const auto got = run_kernel(logits, w, threads);
  int support = 0, values = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    support += (got[i] == 0.0f) != (expected[i] == 0.0f) ? 1 : 0;
    values += std::abs(got[i] - expected[i]) <= 1e-7f + 2e-5f * expected[i] ? 0 : 1;
  }
  CAPTURE(w.temperature, w.top_k, w.top_p, w.min_p, threads, logits.size());
  CHECK(support == 0);
  CHECK(values == 0);
}

const std::vector<Warp> kWarps = {
    {},
    {.temperature = 0.0f},
    {.top_k = 1},
    {.top_k = 17},
    {.top_p = 0.9f},
    {.top_p = 0.3f},
    {.min_p = 0.05f},
    {.temperature = 0.5f, .top_k = 40, .top_p = 0.95f, .min_p = 0.1f},
};

}  // namespace

TEST_CASE("the emulated CUDA warp kernel matches the row oracle on random logits",
          "[backend][cuda_kernel]") {
  toy::ToyRandom rng(31);
  std::vector<float> logits(700);
  for (auto& x : logits) x = static_cast<float>(3.0 * rng.normal());
  for (const Warp& w : kWarps) check_against_oracle(logits, w, 64);
}

TEST_CASE("the emulated CUDA warp kernel breaks ties like the row oracle",
          "[backend][cuda_kernel]") {
  toy::ToyRandom rng(32);
  std::vector<float> logits(300);
  for (auto& x : logits) x = static_cast<float>(rng.below(4));
  for (std::size_t i = 0; i < logits.size(); i += 5) logits[i] = -0.0f;  // -0 ties with +0
  for (std::size_t i = 2; i < logits.size(); i += 11) logits[i] = kNegInf;
  const std::vector<Warp> warps = test::tie_cutting_warps(120);
  for (const Warp& w : warps) check_against_oracle(logits, w, 96);
}

TEST_CASE("the emulated CUDA warp kernel handles rows shorter than the block",
          "[backend][cuda_kernel]") {
  const std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f, kNegInf};
  for (const Warp& w : kWarps) {
    if (w.top_k <= 5) check_against_oracle(logits, w, 64);
  }
  check_against_oracle(logits, {.top_k = 2}, 64);
}

TEST_CASE("the emulated CUDA warp kernel reads bf16 logits like the row oracle",
          "[backend][cuda_kernel]") {
  toy::ToyRandom rng(33);
  std::vector<Eigen::bfloat16> logits(500);
  for (auto& x : logits) x = static_cast<Eigen::bfloat16>(static_cast<float>(2.0 * rng.normal()));
  for (const Warp& w : kWarps) check_against_oracle(logits, w, 64);
}

TEST_CASE("the emulated CUDA warp kernel keeps the documented tokens on signed zeros, -inf, "
          "denormals and ties",
          "[backend][cuda_kernel]") {
  for (const auto& c : test::warp_edge_cases()) {
    CAPTURE(c.name);
    const auto got = run_kernel(c.logits, c.warp, 64);
    CHECK(test::kept_ids(got.data(), static_cast<std::int64_t>(got.size())) == c.kept);
    check_against_oracle(c.logits, c.warp, 64);
  }
}
