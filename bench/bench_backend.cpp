// SPDX-License-Identifier: MIT
// Batched warps on the CPU backend: B rows at once, 1 thread against 2 (thread-pool scaling).
#include <benchmark/benchmark.h>

#include <vector>

#include "reference.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/backend/warp_batch.hpp"

namespace sb = specdec::bench;

// Arguments: rows B, vocabulary V, threads. Temperature 0.8 and top-p 0.9 over the whole row
// (validation of every logit included, as an engine would call it).
static void BM_WarpBatchCpu(benchmark::State& state) {
  const auto rows = state.range(0);
  const auto vocab = state.range(1);
  const auto cpu = specdec::backend::cpu.with_threads(static_cast<int>(state.range(2)));
  std::vector<float> logits;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = sb::random_logits(vocab, static_cast<std::uint64_t>(r + 1));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::vector<float> warped(logits.size());
  specdec::Workspace ws(specdec::workspace_size(cpu, specdec::WarpBatchShape{rows, vocab}));
  const std::vector<specdec::Warp> warps = {{.temperature = 0.8f, .top_p = 0.9f}};
  for (auto _ : state) {
    specdec::warp_logits_batch(cpu, specdec::MatrixView<const float>(logits.data(), rows, vocab),
                               warps, specdec::MatrixView<float>(warped.data(), rows, vocab), ws);
    benchmark::DoNotOptimize(warped.data());
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(rows));
  state.counters["B"] = static_cast<double>(rows);
  state.counters["threads"] = static_cast<double>(state.range(2));
}
BENCHMARK(BM_WarpBatchCpu)
    ->ArgNames({"B", "V", "threads"})
    ->ArgsProduct({{1, 16, 64}, {32000, 128256}, {1, 2}})
    ->UseRealTime();
