// SPDX-License-Identifier: MIT
// The CPU hot path measured as an engine calls it: one gamma = 5 chain step through the public
// verify_chain_batch_logits / verify_chain_batch on backend::cpu, against two references in the
// same run: a streaming read of the same number of rows from a buffer larger than the last-level
// cache, and a plain transcription of the step a simple engine writes (full softmax per row,
// linear scans), which is the comparison and not part of the library.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "reference.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/verify_batch.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"

namespace sb = specdec::bench;

namespace {

constexpr std::int64_t kGamma = 5;
constexpr std::int64_t kHotVocab[] = {32000, 128256, 151936, 256000};

// Warps: 0 none, 1 temperature 0.8, 2 temperature 0.8 + top-p 0.9, 3 temperature 0.8 + top-k 50.
specdec::Warp hot_warp(std::int64_t kind) {
  switch (kind) {
    case 0: return {};
    case 1: return {.temperature = 0.8f};
    case 2: return {.temperature = 0.8f, .top_p = 0.9f};
    default: return {.temperature = 0.8f, .top_k = 50};
  }
}

// Acceptance: 0 every draft token accepted (draft rows equal the target rows), 1 rejection at
// position 0 (the first drafted token is banned by the target), 2 realistic (draft logits =
// target + normal(0, 0.5), tokens drawn from the warped draft rows).
enum Acceptance : std::int64_t { kAll = 0, kRejectFirst = 1, kRealistic = 2 };

struct ChainInputs {
  std::vector<float> target, draft;  // logits, or warped rows when !from_logits
  std::vector<specdec::Token> tokens;
  std::vector<specdec::RandomStream> streams;
};

ChainInputs make_chain_inputs(std::int64_t batch, std::int64_t vocab, const specdec::Warp& warp,
                              Acceptance acceptance, bool from_logits) {
  const auto v = static_cast<std::size_t>(vocab);
  ChainInputs in;
  specdec::toy::ToyRandom rng(7);
  specdec::Workspace ws;
  std::vector<float> warped(v);
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<float> target, draft;
    for (std::int64_t i = 0; i <= kGamma; ++i) {
      const auto row = sb::random_logits(vocab, static_cast<std::uint64_t>(100 * b + i + 1));
      target.insert(target.end(), row.begin(), row.end());
    }
    for (std::int64_t i = 0; i < kGamma; ++i) {
      for (std::size_t x = 0; x < v; ++x) {
        const float t = target[static_cast<std::size_t>(i) * v + x];
        draft.push_back(acceptance == kAll ? t : t + static_cast<float>(0.5 * rng.normal()));
      }
    }
    for (std::int64_t i = 0; i < kGamma; ++i) {
      // Draw the drafted token from the warped draft row (drafting, untimed).
      const std::span<const float> row(draft.data() + static_cast<std::size_t>(i) * v, v);
      specdec::warp_logits<float>(warp, row, warped, ws);
      const double u = rng.uniform();
      double run = 0.0;
      specdec::Token token = 0;
      for (std::size_t x = 0; x < v; ++x) {
        if (warped[x] > 0.0f) token = static_cast<specdec::Token>(x);
        run += warped[x];
        if (run > u) break;
      }
      in.tokens.push_back(token);
    }
    if (acceptance == kRejectFirst) {
      target[static_cast<std::size_t>(in.tokens[static_cast<std::size_t>(b * kGamma)])] =
          -INFINITY;
    }
    if (!from_logits) {
      for (std::vector<float>* rows : {&target, &draft}) {
        for (std::size_t r = 0; r * v < rows->size(); ++r) {
          const std::span<float> row(rows->data() + r * v, v);
          specdec::warp_logits<float>(warp, std::span<const float>(row), warped, ws);
          std::copy(warped.begin(), warped.end(), row.begin());
        }
      }
    }
    in.target.insert(in.target.end(), target.begin(), target.end());
    in.draft.insert(in.draft.end(), draft.begin(), draft.end());
    in.streams.push_back({.seed = 11, .sequence = static_cast<std::uint32_t>(b)});
  }
  return in;
}

// Arguments: V, warp kind, acceptance, from logits (1) or probabilities (0), B, threads.
// Counters: accepted (of gamma, sequence 0) and ns per element of the 2 gamma + 1 rows.
void BM_ChainStep(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto warp = hot_warp(state.range(1));
  const auto acceptance = static_cast<Acceptance>(state.range(2));
  const bool from_logits = state.range(3) != 0;
  const auto batch = state.range(4);
  const auto cpu = specdec::backend::cpu.with_threads(static_cast<int>(state.range(5)));
  const auto in = make_chain_inputs(batch, vocab, warp, acceptance, from_logits);
  std::vector<specdec::Token> emitted(static_cast<std::size_t>(batch * (kGamma + 1)));
  std::vector<std::int32_t> accepted(static_cast<std::size_t>(batch));
  specdec::Workspace ws(specdec::workspace_size(
      cpu, specdec::ChainBatchShape{batch, kGamma, vocab, from_logits}));
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1));
  const auto draft_offsets = specdec::uniform_draft_offsets(kGamma, offsets);
  const specdec::MatrixView<const float> t(in.target.data(), batch * (kGamma + 1), vocab);
  const specdec::MatrixView<const float> d(in.draft.data(), batch * kGamma, vocab);
  const specdec::ChainBatchLogitsArgs<float> logits_args{
      .draft_offsets = draft_offsets,
      .target_logits = t,
      .draft_logits = d,
      .warps = std::span<const specdec::Warp>(&warp, 1),
      .draft_tokens = in.tokens,
      .streams = in.streams,
      .emitted = emitted,
      .accepted = accepted};
  const specdec::ChainBatchArgs rows_args{.draft_offsets = draft_offsets,
                                          .target_rows = t,
                                          .draft_rows = d,
                                          .draft_tokens = in.tokens,
                                          .streams = in.streams,
                                          .emitted = emitted,
                                          .accepted = accepted};
  for (auto _ : state) {
    if (from_logits) {
      specdec::verify_chain_batch_logits(cpu, logits_args, ws);
    } else {
      specdec::verify_chain_batch(cpu, rows_args, ws);
    }
    benchmark::DoNotOptimize(emitted.data());
  }
  if (acceptance == kAll && accepted[0] != kGamma) state.SkipWithError("expected full acceptance");
  if (acceptance == kRejectFirst && accepted[0] != 0) state.SkipWithError("expected rejection");
  sb::set_vocab_counters(state, vocab, static_cast<double>(batch * (2 * kGamma + 1)));
  state.counters["accepted"] = accepted[0];
}

void chain_step_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"V", "warp", "accept", "logits", "B", "threads"});
  for (auto v : kHotVocab) {
    for (std::int64_t warp = 0; warp < 4; ++warp) {
      for (std::int64_t accept = 0; accept < 3; ++accept) b->Args({v, warp, accept, 1, 1, 1});
    }
    for (std::int64_t accept = 0; accept < 3; ++accept) b->Args({v, 2, accept, 0, 1, 1});
  }
  for (std::int64_t threads = 1; threads <= 2; ++threads) {
    b->Args({128256, 2, kRealistic, 1, 64, threads});
    b->Args({128256, 2, kRealistic, 0, 64, threads});
  }
}
BENCHMARK(BM_ChainStep)->Apply(chain_step_args)->UseRealTime();

// The DRAM reference: read `rows` rows of V floats (sum them with 16 independent accumulators),
// taken in turn from a 512 MiB buffer so every read misses the last-level cache; with `threads`
// readers, each takes an equal share of the rows (what the memory system gives B = 64 on two
// threads).
float sum_floats(const float* p, std::size_t count) {
  float acc[16] = {};
  std::size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    for (int j = 0; j < 16; ++j) acc[j] += p[i + static_cast<std::size_t>(j)];
  }
  float s = 0.0f;
  for (; i < count; ++i) s += p[i];
  for (float a : acc) s += a;
  return s;
}

void BM_StreamRows(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto rows = state.range(1);
  const auto threads = static_cast<std::size_t>(state.range(2));
  const std::size_t span = static_cast<std::size_t>(vocab * rows);
  const std::size_t total = std::max<std::size_t>(std::size_t{128} << 20, 2 * span);
  std::vector<float> buffer(total, 1.0f);
  std::size_t offset = 0;
  std::vector<float> sums(threads);
  for (auto _ : state) {
    if (offset + span > total) offset = 0;
    const float* p = buffer.data() + offset;
    if (threads == 1) {
      sums[0] = sum_floats(p, span);
    } else {
      std::vector<std::thread> readers;
      for (std::size_t t = 0; t < threads; ++t) {
        readers.emplace_back([&, t] {
          sums[t] = sum_floats(p + span / threads * t, span / threads);
        });
      }
      for (auto& reader : readers) reader.join();
    }
    benchmark::DoNotOptimize(sums.data());
    offset += span;
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(rows));
}
BENCHMARK(BM_StreamRows)
    ->ArgNames({"V", "rows", "threads"})
    ->ArgsProduct({{32000, 128256, 151936, 256000}, {2, 11}, {1}})
    ->Args({128256, 11 * 64, 1})
    ->Args({128256, 11 * 64, 2})
    ->UseRealTime();

// A plain transcription of the step a simple engine performs: full softmax (with temperature) of
// every target and draft row, accept x_i iff u < p(x_i) / q(x_i), at the first rejection the
// normalised residual max(0, p - q) sampled by a linear scan, after full acceptance the bonus
// token from the last target row. No top-p (it would add a sort).
void plain_softmax(const float* logits, float* out, std::size_t n, float temperature) {
  float m = -INFINITY;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, logits[i] / temperature);
  float s = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = std::exp(logits[i] / temperature - m);
    s += out[i];
  }
  for (std::size_t i = 0; i < n; ++i) out[i] /= s;
}

std::int32_t plain_step(const float* target, const float* draft, const specdec::Token* tokens,
                        std::size_t v, float temperature, specdec::toy::ToyRandom& rng,
                        std::vector<float>& p, std::vector<float>& q) {
  for (std::int64_t i = 0; i <= kGamma; ++i) {
    plain_softmax(target + static_cast<std::size_t>(i) * v, p.data() + static_cast<std::size_t>(i) * v, v,
                  temperature);
  }
  for (std::int64_t i = 0; i < kGamma; ++i) {
    plain_softmax(draft + static_cast<std::size_t>(i) * v, q.data() + static_cast<std::size_t>(i) * v, v,
                  temperature);
  }
  for (std::int64_t i = 0; i < kGamma; ++i) {
    const float* pi = p.data() + static_cast<std::size_t>(i) * v;
    const float* qi = q.data() + static_cast<std::size_t>(i) * v;
    const auto x = static_cast<std::size_t>(tokens[i]);
    if (rng.uniform() < pi[x] / qi[x]) continue;
    std::vector<float>& residual = q;  // reuse: the draft rows are no longer needed
    float* r = residual.data() + static_cast<std::size_t>(kGamma) * v;
    float sum = 0.0f;
    for (std::size_t y = 0; y < v; ++y) {
      r[y] = std::max(0.0f, pi[y] - qi[y]);
      sum += r[y];
    }
    for (std::size_t y = 0; y < v; ++y) r[y] /= sum;
    const double u = rng.uniform();
    double run = 0.0;
    for (std::size_t y = 0; y < v; ++y) {
      run += r[y];
      if (run > u) return static_cast<std::int32_t>(i);
    }
    return static_cast<std::int32_t>(i);
  }
  const float* bonus = p.data() + static_cast<std::size_t>(kGamma) * v;
  const double u = rng.uniform();
  double run = 0.0;
  for (std::size_t y = 0; y < v; ++y) {
    run += bonus[y];
    if (run > u) break;
  }
  return static_cast<std::int32_t>(kGamma);
}

// Arguments: V, acceptance (as BM_ChainStep; warp temperature 0.8, no truncation).
void BM_PlainStep(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto acceptance = static_cast<Acceptance>(state.range(1));
  const specdec::Warp warp{.temperature = 0.8f};
  const auto in = make_chain_inputs(1, vocab, warp, acceptance, true);
  const auto v = static_cast<std::size_t>(vocab);
  std::vector<float> p((kGamma + 1) * v), q((kGamma + 1) * v);
  specdec::toy::ToyRandom rng(3);
  std::int32_t accepted = 0;
  for (auto _ : state) {
    accepted = plain_step(in.target.data(), in.draft.data(), in.tokens.data(), v, 0.8f, rng, p, q);
    benchmark::DoNotOptimize(accepted);
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(2 * kGamma + 1));
  state.counters["accepted"] = accepted;
}
BENCHMARK(BM_PlainStep)
    ->ArgNames({"V", "accept"})
    ->ArgsProduct({{32000, 128256, 151936, 256000}, {0, 1, 2}})
    ->UseRealTime();

// One warp of one row (temperature 0.8, top-p 0.9) through the public warp_logits.
void BM_WarpRowTopP(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto logits = sb::random_logits(vocab);
  std::vector<float> warped(logits.size());
  specdec::Workspace ws(specdec::warp_workspace_size(vocab));
  const specdec::Warp warp{.temperature = 0.8f, .top_p = 0.9f};
  for (auto _ : state) {
    specdec::warp_logits<float>(warp, logits, warped, ws);
    benchmark::DoNotOptimize(warped.data());
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_WarpRowTopP)->Arg(32000)->Arg(128256)->Arg(256000);

}  // namespace
