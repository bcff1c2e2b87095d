// SPDX-License-Identifier: MIT
// Batched warps and chain verification on the CPU backend: B rows (sequences) at once, 1 thread
// against 2 (thread-pool scaling).
#include <benchmark/benchmark.h>

#include <vector>

#include "chain_step.hpp"
#include "reference.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
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

// Batched chain verification on the CPU backend, gamma = 5. Arguments: sequences B, vocabulary V,
// threads, and whether rows arrive as logits (1: warped first with temperature 0.8 and top-p 0.9,
// warps included) or as warped probabilities (0). Draft rows equal the target rows and token 0
// leads every row, so every draft token is accepted: the worst case, in which all 2 gamma + 1 rows
// of a sequence are read (validation included). Counters per element of those B (2 gamma + 1)
// rows, so the ratio to BM_MemoryRead is the cost of reading them once.
static void BM_ChainBatchCpu(benchmark::State& state) {
  constexpr std::int64_t gamma = 5;
  const auto batch = state.range(0);
  const auto vocab = state.range(1);
  const auto cpu = specdec::backend::cpu.with_threads(static_cast<int>(state.range(2)));
  const bool from_logits = state.range(3) != 0;
  const specdec::Warp warp{.temperature = 0.8f, .top_p = 0.9f};
  const auto v = static_cast<std::size_t>(vocab);
  // gamma + 1 distinct rows, repeated for every sequence.
  std::vector<float> rows;
  specdec::Workspace ws0;
  for (std::int64_t i = 0; i <= gamma; ++i) {
    auto row = sb::random_logits(vocab, static_cast<std::uint64_t>(i + 1));
    row[0] = 12.0f;
    if (!from_logits) {
      std::vector<float> warped(v);
      specdec::warp_logits<float>(warp, row, warped, ws0);
      row = warped;
    }
    rows.insert(rows.end(), row.begin(), row.end());
  }
  std::vector<float> target, draft;
  for (std::int64_t b = 0; b < batch; ++b) {
    target.insert(target.end(), rows.begin(), rows.end());
    draft.insert(draft.end(), rows.begin(), rows.end() - static_cast<std::ptrdiff_t>(v));
  }
  const std::vector<specdec::Token> tokens(static_cast<std::size_t>(batch * gamma), 0);
  std::vector<specdec::RandomStream> streams(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < streams.size(); ++b)
    streams[b].sequence = static_cast<std::uint32_t>(b);
  std::vector<specdec::Token> emitted(static_cast<std::size_t>(batch * (gamma + 1)));
  std::vector<std::int32_t> accepted(static_cast<std::size_t>(batch));
  specdec::Workspace ws(
      specdec::workspace_size(cpu, specdec::ChainBatchShape{.batch = batch,
                                                            .max_gamma = gamma,
                                                            .vocab = vocab,
                                                            .from_logits = from_logits}));
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1));
  const auto draft_offsets = specdec::uniform_draft_offsets(gamma, offsets);
  const specdec::MatrixView<const float> t(target.data(), batch * (gamma + 1), vocab);
  const specdec::MatrixView<const float> d(draft.data(), batch * gamma, vocab);
  const specdec::ChainBatchArgs row_args{draft_offsets, t, d, tokens, streams, emitted, accepted};
  const specdec::ChainBatchLogitsArgs<float> logit_args{
      draft_offsets, t, d, std::span<const specdec::Warp>(&warp, 1), tokens, streams, emitted,
      accepted};
  sb::time_chain_step(state, cpu, from_logits, logit_args, row_args, ws);
  if (accepted[0] != gamma) state.SkipWithError("expected every draft token to be accepted");
  sb::set_vocab_counters(state, vocab, static_cast<double>(batch * (2 * gamma + 1)));
  state.counters["B"] = static_cast<double>(batch);
  state.counters["threads"] = static_cast<double>(state.range(2));
}
BENCHMARK(BM_ChainBatchCpu)
    ->ArgNames({"B", "V", "threads", "logits"})
    ->ArgsProduct({{1, 16, 64}, {32000, 128256}, {1, 2}, {0, 1}})
    ->UseRealTime();
