// SPDX-License-Identifier: MIT
// Shared helpers for the benchmark cases: vocabulary sizes, inputs, and the per-element counter.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"

namespace specdec::bench {

/// Vocabulary sizes of the usual model families (Llama 2, Llama 3, Gemma).
inline constexpr std::int64_t kVocabSizes[] = {32000, 128256, 256000};

/// Logits ~ normal(0, 3), a fixed seed per vocabulary size.
inline std::vector<float> random_logits(std::int64_t vocab, std::uint64_t seed = 1) {
  toy::ToyRandom rng(seed);
  std::vector<float> logits(static_cast<std::size_t>(vocab));
  for (auto& x : logits) x = static_cast<float>(3.0 * rng.normal());
  return logits;
}

/// Records the vocabulary and reports ns per vocabulary element ("ns_per_elem").
inline void set_vocab_counters(benchmark::State& state, std::int64_t vocab,
                               double rows_per_iteration = 1.0) {
  state.counters["V"] = static_cast<double>(vocab);
  state.counters["ns_per_elem"] = benchmark::Counter(
      static_cast<double>(vocab) * rows_per_iteration * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// warp_logits of one row of random_logits(state.range(0)) under `warp`, once per iteration.
inline void time_warp_row(benchmark::State& state, const Warp& warp) {
  const auto vocab = state.range(0);
  const auto logits = random_logits(vocab);
  std::vector<float> warped(logits.size());
  Workspace ws(warp_workspace_size(vocab));
  for (auto _ : state) {
    warp_logits<float>(warp, logits, warped, ws);
    benchmark::DoNotOptimize(warped.data());
  }
  set_vocab_counters(state, vocab);
}

inline void vocab_args(benchmark::internal::Benchmark* b) {
  for (auto v : kVocabSizes) b->Arg(v);
}

}  // namespace specdec::bench
