// SPDX-License-Identifier: MIT
// Node verifiers at V = 32000, 128256, 256000 and K = 1, 4, 8: the accept case (identical rows,
// the first candidate passes: O(K) for rejection, multi-round and RRS) and the reject case
// (disjoint supports: every candidate fails and the residual is formed), plus chain and block
// verification. The unchecked tier (the hot path); one validated entry for contrast.
#include <benchmark/benchmark.h>

#include <vector>

#include "reference.hpp"
#include "specdec/unchecked.hpp"
#include "specdec/verify/verify.hpp"

namespace sb = specdec::bench;
using namespace specdec;

namespace {

struct Inputs {
  std::vector<float> target, draft;
  std::vector<Token> candidates;
};

/// accept: target == draft (softmax of random logits); reject: draft on the lower half of the
/// vocabulary, target on the upper half. Candidates are the K distinct most likely draft tokens.
Inputs make_inputs(std::int64_t vocab, std::int32_t k, bool accept) {
  const auto logits = sb::random_logits(vocab, 3);
  Inputs in;
  in.target.resize(static_cast<std::size_t>(vocab));
  softmax<float>(logits, in.target);
  in.draft = in.target;
  if (!accept) {
    double low = 0.0, high = 0.0;
    for (std::int64_t i = 0; i < vocab; ++i) (i < vocab / 2 ? low : high) += in.target[i];
    for (std::int64_t i = 0; i < vocab; ++i) {
      const auto s = static_cast<std::size_t>(i);
      in.draft[s] = i < vocab / 2 ? static_cast<float>(in.target[s] / low) : 0.0f;
      in.target[s] = i < vocab / 2 ? 0.0f : static_cast<float>(in.target[s] / high);
    }
  }
  std::vector<float> d = in.draft;
  for (std::int32_t j = 0; j < k; ++j) {
    const auto best = static_cast<Token>(detail::row_argmax(d.data(), vocab));
    in.candidates.push_back(best);
    d[static_cast<std::size_t>(best)] = -1.0f;
  }
  return in;
}

void run_rule(benchmark::State& state, const Rule& rule, bool accept, bool single = false) {
  const auto vocab = state.range(0);
  const auto k = single ? 1 : static_cast<std::int32_t>(state.range(1));
  const auto in = make_inputs(vocab, k, accept);
  std::vector<float> scratch(static_cast<std::size_t>(vocab));
  const NodeRows<float> rows{in.target.data(), in.draft.data(), vocab};
  std::uint32_t step = 0;
  for (auto _ : state) {
    const RandomStream stream{1, 0, step++};
    benchmark::DoNotOptimize(
        unchecked::verify_node(rule, rows, in.candidates.data(), k, stream, scratch.data()));
  }
  sb::set_vocab_counters(state, vocab);
  state.counters["K"] = k;
}

void vocab_k_args(benchmark::internal::Benchmark* b) {
  for (auto v : sb::kVocabSizes) {
    for (int k : {1, 4, 8}) b->Args({v, k});
  }
}
void vocab_only_args(benchmark::internal::Benchmark* b) {
  for (auto v : sb::kVocabSizes) b->Args({v, 1});
}

}  // namespace

static void BM_VerifyRejection_Accept(benchmark::State& s) { run_rule(s, Rejection{}, true, true); }
static void BM_VerifyRejection_Reject(benchmark::State& s) {
  run_rule(s, Rejection{}, false, true);
}
static void BM_VerifyMultiRound_Accept(benchmark::State& s) { run_rule(s, MultiRound{}, true); }
static void BM_VerifyMultiRound_Reject(benchmark::State& s) { run_rule(s, MultiRound{}, false); }
static void BM_VerifyRecursive_Accept(benchmark::State& s) { run_rule(s, Recursive{}, true); }
static void BM_VerifyRecursive_Reject(benchmark::State& s) { run_rule(s, Recursive{}, false); }
static void BM_VerifySpecTrGamma1_Accept(benchmark::State& s) { run_rule(s, SpecTr{1.0}, true); }
static void BM_VerifySpecTrAuto_Reject(benchmark::State& s) { run_rule(s, SpecTr{}, false); }
static void BM_VerifyLossy_Reject(benchmark::State& s) { run_rule(s, Lossy{0.3f}, false, true); }
static void BM_VerifyCascadeOpt(benchmark::State& s) {
  run_rule(s, Cascade{Deferral::kOpt, 0.5f}, false, true);
}
static void BM_VerifyCascadeTokenV1(benchmark::State& s) {
  run_rule(s, Cascade{Deferral::kTokenV1, 0.1f}, false, true);
}
static void BM_VerifyTypical(benchmark::State& s) { run_rule(s, Typical{}, false); }
static void BM_VerifyGreedy(benchmark::State& s) { run_rule(s, Greedy{}, false); }

BENCHMARK(BM_VerifyRejection_Accept)->Apply(vocab_only_args);
BENCHMARK(BM_VerifyRejection_Reject)->Apply(vocab_only_args);
BENCHMARK(BM_VerifyMultiRound_Accept)->Apply(vocab_k_args);
BENCHMARK(BM_VerifyMultiRound_Reject)->Apply(vocab_k_args);
BENCHMARK(BM_VerifyRecursive_Accept)->Apply(vocab_k_args);
BENCHMARK(BM_VerifyRecursive_Reject)->Apply(vocab_k_args);
BENCHMARK(BM_VerifySpecTrGamma1_Accept)->Apply(vocab_k_args);
BENCHMARK(BM_VerifySpecTrAuto_Reject)->Apply(vocab_k_args);
BENCHMARK(BM_VerifyLossy_Reject)->Apply(vocab_only_args);
BENCHMARK(BM_VerifyCascadeOpt)->Apply(vocab_only_args);
BENCHMARK(BM_VerifyCascadeTokenV1)->Apply(vocab_only_args);
BENCHMARK(BM_VerifyTypical)->Apply(vocab_k_args);
BENCHMARK(BM_VerifyGreedy)->Apply(vocab_k_args);

// The validated host entry (checks both rows: O(V) even when the first candidate passes).
static void BM_VerifyNodeValidated_Accept(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto k = static_cast<std::int32_t>(state.range(1));
  const auto in = make_inputs(vocab, k, true);
  Workspace ws(verify_workspace_size(vocab));
  std::uint32_t step = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(verify_node(Recursive{}, in.target, in.draft, in.candidates,
                                         RandomStream{1, 0, step++}, ws));
  }
  sb::set_vocab_counters(state, vocab);
  state.counters["K"] = k;
}
BENCHMARK(BM_VerifyNodeValidated_Accept)->Apply(vocab_only_args);

// Block verification of L = 4 positions with disagreeing rows (O(L V): one residual mass per
// position), next to chain verification of the same rows.
static void run_sequence(benchmark::State& state, bool block) {
  const auto vocab = state.range(0);
  constexpr std::size_t kLength = 4;
  const auto a = make_inputs(vocab, 1, true);
  const auto logits = sb::random_logits(vocab, 9);
  std::vector<float> other(static_cast<std::size_t>(vocab));
  softmax<float>(logits, other);
  std::vector<float> target_rows, draft_rows;
  for (std::size_t i = 0; i <= kLength; ++i) {
    target_rows.insert(target_rows.end(), a.target.begin(), a.target.end());
    if (i < kLength) draft_rows.insert(draft_rows.end(), other.begin(), other.end());
  }
  std::vector<Token> tokens(kLength, static_cast<Token>(detail::row_argmax(other.data(), vocab)));
  std::vector<Token> out(kLength + 1);
  std::vector<double> weights(kLength + 1);
  std::vector<float> scratch(static_cast<std::size_t>(vocab));
  std::uint32_t step = 0;
  for (auto _ : state) {
    const RandomStream stream{1, 0, step++};
    if (block) {
      benchmark::DoNotOptimize(
          detail::block_verify_row(ChainRows<float>{.target = target_rows.data(),
                                                    .draft = draft_rows.data(),
                                                    .draft_tokens = tokens.data(),
                                                    .length = kLength,
                                                    .vocab = vocab},
                                   stream, weights.data(), scratch.data(), out.data()));
    } else {
      std::int32_t i = 0;
      for (; i < static_cast<std::int32_t>(kLength); ++i) {
        const auto v =
            detail::rejection_row(target_rows.data() + i * vocab, draft_rows.data() + i * vocab,
                                  vocab, tokens[i], stream.at_position(i), scratch.data());
        if (v.accepted < 0) break;
      }
      benchmark::DoNotOptimize(i);
    }
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(kLength));
}
static void BM_VerifyChainL4(benchmark::State& s) { run_sequence(s, false); }
static void BM_VerifyBlockL4(benchmark::State& s) { run_sequence(s, true); }
BENCHMARK(BM_VerifyChainL4)->Apply(vocab_only_args);
BENCHMARK(BM_VerifyBlockL4)->Apply(vocab_only_args);
