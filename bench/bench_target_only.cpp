// SPDX-License-Identifier: MIT
// The CPU chain step for drafts without draft rows (verify_chain_batch_target_only, gamma = 5,
// warped rows) against what it must at least cost: a streaming read of its gamma + 1 target rows
// from a buffer larger than the last-level cache, and the step with draft rows on the same rows.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "reference.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/verify_batch.hpp"
#include "specdec/core/warp.hpp"

namespace sb = specdec::bench;

namespace {

constexpr std::int64_t kTargetOnlyGamma = 5;

// Acceptance: 0 every draft accepted (the drafted token holds nearly all of its row's mass),
// 1 rejection at position 0 (the target bans the first drafted token), 2 drafts the target
// rarely takes (random tokens of random rows at temperature 0.8).
struct TargetOnlyInputs {
  std::vector<float> rows;  // gamma + 1 warped rows
  std::vector<specdec::Token> tokens;
};

TargetOnlyInputs make_target_only_inputs(std::int64_t vocab, std::int64_t acceptance) {
  const auto v = static_cast<std::size_t>(vocab);
  TargetOnlyInputs in;
  specdec::Workspace ws;
  std::vector<float> warped(v);
  for (std::int64_t i = 0; i <= kTargetOnlyGamma; ++i) {
    auto logits = sb::random_logits(vocab, static_cast<std::uint64_t>(300 + i));
    const auto token = static_cast<specdec::Token>((7919 * (i + 1)) % vocab);
    if (i < kTargetOnlyGamma) {
      in.tokens.push_back(token);
      if (acceptance == 0) logits[static_cast<std::size_t>(token)] += 60.0f;
      if (acceptance == 1 && i == 0) logits[static_cast<std::size_t>(token)] = -INFINITY;
    }
    specdec::warp_logits<float>(specdec::Warp{.temperature = 0.8f}, logits, warped, ws);
    in.rows.insert(in.rows.end(), warped.begin(), warped.end());
  }
  return in;
}

// Arguments: V, acceptance, draft rows (1: verify_chain_batch with draft rows equal to the
// target rows, the step an engine with draft rows runs; 0: target-only). Counter ns_per_elem is
// per element of the gamma + 1 target rows.
void BM_ChainStepTargetOnly(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto acceptance = state.range(1);
  const bool with_draft_rows = state.range(2) != 0;
  const auto in = make_target_only_inputs(vocab, acceptance);
  const auto cpu = specdec::backend::cpu.with_threads(1);
  std::vector<specdec::Token> emitted(kTargetOnlyGamma + 1);
  std::vector<std::int32_t> accepted(1), offsets(2);
  const auto draft_offsets = specdec::uniform_draft_offsets(kTargetOnlyGamma, offsets);
  specdec::Workspace ws(specdec::workspace_size(
      cpu, specdec::ChainBatchShape{1, kTargetOnlyGamma, vocab, false}));
  const std::vector<specdec::RandomStream> streams = {{.seed = 5}};
  const specdec::MatrixView<const float> t(in.rows.data(), kTargetOnlyGamma + 1, vocab);
  const specdec::MatrixView<const float> d(in.rows.data(), kTargetOnlyGamma, vocab);
  specdec::ChainBatchArgs args{.draft_offsets = draft_offsets,
                               .target_rows = t,
                               .draft_tokens = in.tokens,
                               .streams = streams,
                               .emitted = emitted,
                               .accepted = accepted};
  if (with_draft_rows) args.draft_rows = d;
  for (auto _ : state) {
    if (with_draft_rows) {
      specdec::verify_chain_batch(cpu, args, ws);
    } else {
      specdec::verify_chain_batch_target_only(cpu, args, ws);
    }
    benchmark::DoNotOptimize(emitted.data());
  }
  if (acceptance == 0 && !with_draft_rows && accepted[0] != kTargetOnlyGamma) {
    state.SkipWithError("expected full acceptance");
  }
  if (acceptance == 1 && accepted[0] != 0) state.SkipWithError("expected rejection");
  sb::set_vocab_counters(state, vocab, static_cast<double>(kTargetOnlyGamma + 1));
  state.counters["accepted"] = accepted[0];
}
void target_only_step_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"V", "accept", "draft_rows"});
  for (std::int64_t v : {32000, 128256}) {
    for (std::int64_t accept = 0; accept < 3; ++accept) b->Args({v, accept, 0});
    b->Args({v, 0, 1});  // with draft rows equal to the target rows every draft is accepted
  }
}
BENCHMARK(BM_ChainStepTargetOnly)->Apply(target_only_step_args)->UseRealTime();

// The streaming reference of the target-only step: gamma + 1 rows of V floats summed, taken in
// turn from a 256 MiB buffer so that every read misses the last-level cache.
void BM_StreamTargetOnlyRows(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto span = static_cast<std::size_t>(vocab * (kTargetOnlyGamma + 1));
  const std::size_t total = std::size_t{64} << 20;
  std::vector<float> buffer(total, 1.0f);
  std::size_t offset = 0;
  for (auto _ : state) {
    if (offset + span > total) offset = 0;
    const float* p = buffer.data() + offset;
    float acc[16] = {};
    for (std::size_t i = 0; i + 16 <= span; i += 16) {
      for (std::size_t j = 0; j < 16; ++j) acc[j] += p[i + j];
    }
    benchmark::DoNotOptimize(acc);
    offset += span;
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(kTargetOnlyGamma + 1));
}
BENCHMARK(BM_StreamTargetOnlyRows)->Arg(32000)->Arg(128256)->UseRealTime();

}  // namespace
