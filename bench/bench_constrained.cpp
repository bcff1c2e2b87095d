// SPDX-License-Identifier: MIT
// The cost of constraints on the from-logits chain step: one gamma = 5 chain through
// constrained::verify_chain_logits (a grammar bitmask and vLLM's three penalties on 256 tokens)
// against verify_chain_logits on the same logits without them, in the same run.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "reference.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/constrained_logits.hpp"

namespace sb = specdec::bench;

namespace {

constexpr std::int64_t kConstrainedGamma = 5;

struct ConstrainedInputs {
  std::vector<float> target, draft;
  std::vector<specdec::Token> tokens;
  std::vector<std::int32_t> bitmask;
  std::vector<specdec::constrained::PenalisedToken> penalised;
};

// Target logits ~ normal(0, 3); the draft equal to the target (accept = 0: every token passes
// the unconstrained test) or the target + normal(0, 0.5) (accept = 1); drafted tokens drawn from
// the draft. The mask forbids a random 10% of each row but never a drafted token; 256 other
// tokens carry counts (the drafted ones are counted in the rows after them, as the prefix).
ConstrainedInputs make_constrained_inputs(std::int64_t vocab, const specdec::Warp& warp,
                                          bool exact_draft) {
  const auto v = static_cast<std::size_t>(vocab);
  ConstrainedInputs in;
  specdec::toy::ToyRandom rng(5);
  specdec::Workspace ws;
  std::vector<float> warped(v);
  for (std::int64_t i = 0; i <= kConstrainedGamma; ++i) {
    const auto row = sb::random_logits(vocab, static_cast<std::uint64_t>(i + 1));
    in.target.insert(in.target.end(), row.begin(), row.end());
  }
  for (std::size_t x = 0; x < static_cast<std::size_t>(kConstrainedGamma) * v; ++x) {
    in.draft.push_back(in.target[x] + (exact_draft ? 0.0f : static_cast<float>(0.5 * rng.normal())));
  }
  for (std::int64_t i = 0; i < kConstrainedGamma; ++i) {
    const std::span<const float> row(in.draft.data() + static_cast<std::size_t>(i) * v, v);
    specdec::warp_logits<float>(warp, row, warped, ws);
    in.tokens.push_back(
        specdec::detail::sample_row(warped.data(), vocab, static_cast<float>(rng.uniform())));
  }
  const auto words = static_cast<std::size_t>((vocab + 31) / 32);
  in.bitmask.assign(static_cast<std::size_t>(kConstrainedGamma + 1) * words, -1);
  for (std::size_t r = 0; r <= static_cast<std::size_t>(kConstrainedGamma); ++r) {
    for (std::size_t x = 0; x < v; ++x) {
      if (rng.uniform() < 0.1) in.bitmask[r * words + x / 32] &= ~(1 << (x % 32));
    }
    for (const auto t : in.tokens) {
      in.bitmask[r * words + static_cast<std::size_t>(t) / 32] |= 1 << (t % 32);
    }
  }
  while (in.penalised.size() < 256) {
    const auto t = static_cast<specdec::Token>(rng.uniform() * static_cast<double>(vocab));
    bool listed = false;
    for (const auto d : in.tokens) listed = listed || d == t;
    for (const auto& e : in.penalised) listed = listed || e.token == t;
    if (!listed) in.penalised.push_back({t, static_cast<std::int32_t>(in.penalised.size() % 3), false});
  }
  return in;
}

// Arguments: V, warp (0 none, 1 temperature 0.8 + top-p 0.9), draft (0 equal to the target, 1
// near it), constrained (0 none; 1 the mask and penalties; 2 a mask allowing every token, as a
// grammar in free text, and no penalties: rows read in place; 3 a mask allowing 64 runs of 32
// ids and the drafted tokens, as a grammar inside a structure, and the penalties: the tiles it
// forbids whole are not read). Counters: accepted of gamma, ns per element of 2 gamma + 1 rows.
void BM_ConstrainedChainStep(benchmark::State& state) {
  const auto vocab = state.range(0);
  const specdec::Warp warp =
      state.range(1) == 0 ? specdec::Warp{} : specdec::Warp{.temperature = 0.8f, .top_p = 0.9f};
  const bool constrained = state.range(3) != 0;
  auto in = make_constrained_inputs(vocab, warp, state.range(2) == 0);
  specdec::constrained::LogitConstraints c{
      .bitmask = in.bitmask,
      .penalties = {
          .repetition = 1.1f, .frequency = 0.2f, .presence = 0.1f, .tokens = in.penalised}};
  if (state.range(3) == 2) {
    std::fill(in.bitmask.begin(), in.bitmask.end(), -1);
    c.penalties = {};
  }
  if (state.range(3) == 3) {
    const auto words = static_cast<std::size_t>((vocab + 31) / 32);
    std::fill(in.bitmask.begin(), in.bitmask.end(), 0);
    for (std::size_t r = 0; r <= static_cast<std::size_t>(kConstrainedGamma); ++r) {
      for (std::size_t run = 0; run < 64; ++run) in.bitmask[r * words + run * (words / 64)] = -1;
      for (const auto t : in.tokens) {
        in.bitmask[r * words + static_cast<std::size_t>(t) / 32] |= 1 << (t % 32);
      }
    }
  }
  std::vector<specdec::Token> out(kConstrainedGamma + 1);
  specdec::Workspace ws(
      specdec::constrained::verify_chain_logits_workspace_size(vocab, kConstrainedGamma));
  const specdec::RandomStream stream{.seed = 11};
  specdec::ChainVerdict verdict;
  for (auto _ : state) {
    verdict = constrained ? specdec::constrained::verify_chain_logits(
                                warp, in.target, in.draft, in.tokens, vocab, c, stream, out, ws)
                          : specdec::verify_chain_logits<float>(warp, in.target, in.draft,
                                                                in.tokens, vocab, stream, out, ws);
    benchmark::DoNotOptimize(out.data());
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(2 * kConstrainedGamma + 1));
  state.counters["accepted"] = verdict.accepted;
}

void constrained_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"V", "warp", "draft", "constrained"});
  for (std::int64_t warp = 0; warp < 2; ++warp) {
    for (std::int64_t draft = 0; draft < 2; ++draft) {
      for (std::int64_t c = 0; c < 4; ++c) b->Args({128256, warp, draft, c});
    }
  }
}
BENCHMARK(BM_ConstrainedChainStep)->Apply(constrained_args)->UseRealTime();

}  // namespace
