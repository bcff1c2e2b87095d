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

#include "chain_step.hpp"
#include "reference.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/verify_batch.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/tree_logits.hpp"

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
  sb::time_chain_step(state, cpu, from_logits, logits_args, rows_args, ws);
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
    ->Args({128256, 5, 1})
    ->Args({32000, 6, 1})
    ->Args({128256, 6, 1})
    ->Args({32000, 1, 1})
    ->Args({128256, 1, 1})
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
  sb::time_warp_row(state, {.temperature = 0.8f, .top_p = 0.9f});
}
BENCHMARK(BM_WarpRowTopP)->Arg(32000)->Arg(128256)->Arg(256000);

// A provider answering every call with fixed rows of logits: batch row r gets rows[min(r, last)]
// (a copy, as a model's output buffer is written), whatever the context.
class FixedRowsProvider {
 public:
  FixedRowsProvider(const std::vector<float>& rows, std::int64_t vocab)
      : rows_(&rows), vocab_(vocab) {}
  std::int64_t vocab_size() const { return vocab_; }
  std::span<const specdec::Token> context() const { return context_; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(context_.size()); }
  void reset(std::span<const specdec::Token> prompt) {
    context_.reserve(1 << 22);
    context_.assign(prompt.begin(), prompt.end());
  }
  void evaluate(const specdec::TreeBatch&, specdec::MatrixView<float> logits) {
    const auto v = static_cast<std::size_t>(vocab_);
    const auto last = static_cast<std::int64_t>(rows_->size() / v) - 1;
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      const float* row = rows_->data() + static_cast<std::size_t>(std::min(r, last)) * v;
      std::copy(row, row + v, logits.row_data(r));
    }
  }
  void commit(const specdec::TreeBatch& batch, std::span<const std::int32_t> kept,
              specdec::Token next) {
    for (const auto node : kept) context_.push_back(batch.tokens[static_cast<std::size_t>(node)]);
    context_.push_back(next);
  }

 private:
  const std::vector<float>* rows_;
  std::int64_t vocab_;
  std::vector<specdec::Token> context_;
};

// SD through the Decoder on warped target rows (declares no needs_target_rows()).
class RowsSd {
 public:
  explicit RowsSd(specdec::MethodStrategy<FixedRowsProvider> inner) : inner_(std::move(inner)) {}
  void prepare(std::int64_t vocab, specdec::Workspace& ws) { inner_.prepare(vocab, ws); }
  void reset(std::span<const specdec::Token> prompt) { inner_.reset(prompt); }
  const specdec::DraftTree& draft(const specdec::StepContext& c) { return inner_.draft(c); }
  specdec::StepVerdict verify(const specdec::StepContext& c, const specdec::TargetScores& s) {
    return inner_.verify(c, s);
  }
  void commit(const specdec::TreeBatch& b, std::span<const std::int32_t> a, specdec::Token n) {
    inner_.commit(b, a, n);
  }

 private:
  specdec::MethodStrategy<FixedRowsProvider> inner_;
};

// SD's drafting and both provider calls through the Decoder, without verification (every step
// emits token 0): the part of a step that is not verification.
class DraftOnlySd {
 public:
  explicit DraftOnlySd(specdec::MethodStrategy<FixedRowsProvider> inner)
      : inner_(std::move(inner)) {}
  void prepare(std::int64_t vocab, specdec::Workspace& ws) { inner_.prepare(vocab, ws); }
  void reset(std::span<const specdec::Token> prompt) { inner_.reset(prompt); }
  bool needs_target_rows() const { return false; }
  const specdec::DraftTree& draft(const specdec::StepContext& c) { return inner_.draft(c); }
  specdec::StepVerdict verify(const specdec::StepContext&, const specdec::TargetScores&) {
    return {{}, 0, 0};
  }
  void commit(const specdec::TreeBatch& b, std::span<const std::int32_t> a, specdec::Token n) {
    inner_.commit(b, a, n);
  }

 private:
  specdec::MethodStrategy<FixedRowsProvider> inner_;
};

template <class D>
void run_decoder_steps(benchmark::State& state, D& decoder) {
  const std::vector<specdec::Token> prompt{1};
  decoder.reset(prompt);
  std::int64_t steps = 0, tokens = 0;
  for (auto _ : state) {
    if (decoder.finished()) decoder.reset(prompt);
    tokens += static_cast<std::int64_t>(decoder.step().size());
    ++steps;
  }
  state.counters["tokens_per_step"] = static_cast<double>(tokens) / static_cast<double>(steps);
}

// One Decoder step of SD (gamma = 5, T 0.8 + top-p 0.9, realistic drafts) over fixed-row
// providers: drafting (five draft calls, their rows warped and sampled), one target call, the
// provider checks and verification, from logits (path 1) or on warped rows (path 0); path 2 is
// the same step without verification, so path 1 - path 2 is the Decoder's verification, to set
// against the batch entry on the same rows (BM_ChainStep/V/2/2/1/1/1).
void BM_DecoderStep(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto path = state.range(1);
  const auto warp = hot_warp(2);
  const auto in = make_chain_inputs(1, vocab, warp, kRealistic, true);
  FixedRowsProvider target(in.target, vocab), draft(in.draft, vocab);
  specdec::DecodeOptions options;
  options.method = specdec::Method::kSd;
  options.warp = warp;
  options.depth = static_cast<std::int32_t>(kGamma);
  options.max_new_tokens = 1 << 20;
  if (path == 1) {
    specdec::Decoder decoder(target, draft, options);
    run_decoder_steps(state, decoder);
  } else if (path == 2) {
    specdec::Decoder<FixedRowsProvider, DraftOnlySd> decoder(
        target, DraftOnlySd(specdec::MethodStrategy<FixedRowsProvider>(draft, options)),
        options.loop());
    run_decoder_steps(state, decoder);
  } else {
    specdec::Decoder<FixedRowsProvider, RowsSd> decoder(
        target, RowsSd(specdec::MethodStrategy<FixedRowsProvider>(draft, options)),
        options.loop());
    run_decoder_steps(state, decoder);
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(2 * kGamma + 1));
}
BENCHMARK(BM_DecoderStep)->ArgNames({"V", "path"})->ArgsProduct({{128256}, {0, 1, 2}})->UseRealTime();

// A gamma = 5 chain of drafts without draft rows (n-gram copies, top-1 heads), T 0.8 + top-p 0.9:
// verify_chain_target_only_logits (logits 1) against warping the 6 target rows and calling
// verify_chain_target_only (logits 0). accept 0: each drafted token's logit raised by 12, so it
// holds the nucleus alone, as a confident target's copied token does (every position accepted: 5
// rows read for p(x), the bonus row drawn from; BM_StreamRows/V/6 is their read); accept 2:
// tokens drawn from draft logits = target + normal(0, 0.5) (on these flat rows p(x) is small: a
// rejection at position 0, BM_StreamRows/V/1 its read).
void BM_ChainTargetOnly(benchmark::State& state) {
  const auto vocab = state.range(0);
  const bool from_logits = state.range(1) != 0;
  const auto acceptance = static_cast<Acceptance>(state.range(2));
  const auto warp = hot_warp(2);
  const auto v = static_cast<std::size_t>(vocab);
  auto in = make_chain_inputs(1, vocab, warp, kRealistic, true);
  if (acceptance == kAll) {
    for (std::size_t i = 0; i < in.tokens.size(); ++i) {
      in.target[i * v + static_cast<std::size_t>(in.tokens[i])] += 12.0f;
    }
  }
  specdec::Workspace ws;
  std::vector<float> target_rows(in.target.size());
  std::vector<specdec::Token> out(kGamma + 1);
  specdec::ChainVerdict verdict;
  for (auto _ : state) {
    if (from_logits) {
      verdict = specdec::verify_chain_target_only_logits<float>(warp, in.target, in.tokens, vocab,
                                                                in.streams[0], out, ws);
    } else {
      for (std::size_t r = 0; r * v < in.target.size(); ++r) {
        specdec::warp_logits<float>(warp, std::span<const float>(in.target).subspan(r * v, v),
                                    std::span<float>(target_rows).subspan(r * v, v), ws);
      }
      verdict = specdec::verify_chain_target_only<float>(target_rows, in.tokens, vocab,
                                                         in.streams[0], out, ws);
    }
    benchmark::DoNotOptimize(verdict);
  }
  if (acceptance == kAll && verdict.accepted != kGamma) {
    state.SkipWithError("expected full acceptance");
  }
  state.counters["accepted"] = verdict.accepted;
}
BENCHMARK(BM_ChainTargetOnly)
    ->ArgNames({"V", "logits", "accept"})
    ->ArgsProduct({{32000, 128256}, {0, 1}, {0, 2}})
    ->UseRealTime();

// RRS on a 16-node tree (4 children of the root, 3 under each), V = 128256, T 0.8 + top-p 0.9:
// verify_tree_logits (path 1) against warping the 17 target and 17 draft rows and calling
// verify_tree (path 0). accept 0: draft rows equal the target's (the walk takes first children:
// 3 target and 2 draft rows read, the leaf's drawn from; BM_StreamRows/V/5 is their read);
// accept 2: draft logits = target + normal(0, 0.5). Counter `visited`: nodes the walk verified.
void BM_TreeLogits(benchmark::State& state) {
  const auto vocab = state.range(0);
  const bool from_logits = state.range(1) != 0;
  const bool equal = state.range(2) == 0;
  const auto warp = hot_warp(2);
  const auto v = static_cast<std::size_t>(vocab);
  specdec::toy::ToyRandom rng(5);
  std::vector<float> target, draft;
  for (std::size_t r = 0; r < 17; ++r) {
    const auto row = sb::random_logits(vocab, 1000 + r);
    target.insert(target.end(), row.begin(), row.end());
    for (float x : row) draft.push_back(equal ? x : x + static_cast<float>(0.5 * rng.normal()));
  }
  specdec::Workspace ws;
  std::vector<float> target_rows(target.size()), draft_rows(draft.size());
  const auto warp_all = [&] {
    for (std::size_t r = 0; r < 17; ++r) {
      specdec::warp_logits<float>(warp, std::span<const float>(target).subspan(r * v, v),
                                  std::span<float>(target_rows).subspan(r * v, v), ws);
      specdec::warp_logits<float>(warp, std::span<const float>(draft).subspan(r * v, v),
                                  std::span<float>(draft_rows).subspan(r * v, v), ws);
    }
  };
  warp_all();
  // Children drawn without replacement from their parent's warped draft row.
  std::vector<specdec::Token> tokens;
  std::vector<std::int32_t> parents;
  const auto add_children = [&](std::int32_t parent, int count) {
    std::vector<float> q(draft_rows.begin() + static_cast<std::ptrdiff_t>((parent + 1) * vocab),
                         draft_rows.begin() + static_cast<std::ptrdiff_t>((parent + 2) * vocab));
    for (int k = 0; k < count; ++k) {
      const auto x = specdec::detail::sample_row(q.data(), vocab, static_cast<float>(rng.uniform()));
      q[static_cast<std::size_t>(x)] = 0.0f;
      tokens.push_back(x);
      parents.push_back(parent);
    }
  };
  add_children(-1, 4);
  for (std::int32_t node = 0; node < 4; ++node) add_children(node, 3);
  const specdec::TreeView tree{tokens, parents};
  std::vector<std::int32_t> accepted(17);
  specdec::TreeVerdict verdict;
  std::uint32_t seed = 0;
  for (auto _ : state) {
    const specdec::RandomStream stream{seed++};
    if (from_logits) {
      verdict = specdec::verify_tree_logits<float>(specdec::Recursive{}, warp, tree,
                                                   {target, draft}, vocab, stream, accepted, ws);
    } else {
      warp_all();
      verdict = specdec::verify_tree<float>(specdec::Recursive{}, tree, target_rows, draft_rows,
                                            vocab, stream, accepted, ws);
    }
    benchmark::DoNotOptimize(verdict);
  }
  state.counters["visited"] = verdict.accepted + 1;
}
BENCHMARK(BM_TreeLogits)
    ->ArgNames({"V", "logits", "accept"})
    ->ArgsProduct({{128256}, {0, 1}, {0, 2}})
    ->UseRealTime();

}  // namespace
