// SPDX-License-Identifier: MIT
// The memory-read reference and the core row operations: softmax, top-p, Gumbel noise.
#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include <numeric>
#include <vector>

#include "reference.hpp"
#include "specdec/core/noise.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/warp.hpp"

namespace sb = specdec::bench;

// The bandwidth reference: sum one row of V floats (what any O(V) row operation must at least do).
static void BM_MemoryRead(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto row = sb::random_logits(vocab);
  for (auto _ : state) {
    const auto m = Eigen::Map<const Eigen::ArrayXf>(row.data(), vocab);
    benchmark::DoNotOptimize(m.sum());
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_MemoryRead)->Apply(sb::vocab_args);

static void BM_Softmax(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto logits = sb::random_logits(vocab);
  std::vector<float> probs(logits.size());
  for (auto _ : state) {
    specdec::softmax<float>(logits, probs);
    benchmark::DoNotOptimize(probs.data());
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_Softmax)->Apply(sb::vocab_args);

static void BM_WarpTopP(benchmark::State& state) { sb::time_warp_row(state, {.top_p = 0.9f}); }
BENCHMARK(BM_WarpTopP)->Apply(sb::vocab_args);

static void BM_WarpTopK50(benchmark::State& state) {
  sb::time_warp_row(state, {.temperature = 0.8f, .top_k = 50});
}
BENCHMARK(BM_WarpTopK50)->Apply(sb::vocab_args);

namespace {

// fill(stream, 0, noise) over a row of state.range(0) draws, once per iteration.
template <class Fill>
void time_noise(benchmark::State& state, Fill fill) {
  const auto vocab = state.range(0);
  std::vector<float> noise(static_cast<std::size_t>(vocab));
  const specdec::RandomStream stream{1, 0, 0, 0, specdec::Domain::kDraft};
  for (auto _ : state) {
    fill(stream, 0, noise);
    benchmark::DoNotOptimize(noise.data());
  }
  sb::set_vocab_counters(state, vocab);
}

}  // namespace

static void BM_GumbelNoise(benchmark::State& state) {
  time_noise(state, [](const auto& stream, auto offset, auto& noise) {
    specdec::fill_gumbels(stream, offset, noise);
  });
}
BENCHMARK(BM_GumbelNoise)->Apply(sb::vocab_args);

// The Philox stream alone: uniforms, no logarithms.
static void BM_UniformNoise(benchmark::State& state) {
  time_noise(state, [](const auto& stream, auto offset, auto& noise) {
    specdec::fill_uniforms(stream, offset, noise);
  });
}
BENCHMARK(BM_UniformNoise)->Apply(sb::vocab_args);
