// SPDX-License-Identifier: MIT
// One decoding step (draft the tree level by level, one target call, warp every row, verify,
// commit) at V = 32000, 128256, 256000, with providers that only copy fixed logits rows, so the
// numbers are the decoder's own cost per step: SD (L = 4), SpecTr (K = 3, L = 3), RSD-S (W = 3,
// L = 4) and MTAD (W = 3, L = 4). ns_per_elem counts every row the step warps (draft + target).
#include <benchmark/benchmark.h>

#include <span>
#include <vector>

#include "reference.hpp"
#include "specdec/decode/decoder.hpp"

namespace sb = specdec::bench;
using namespace specdec;

namespace {

/// A provider whose every row is one fixed logits row (a model with no cost of its own).
class FixedRowProvider {
 public:
  FixedRowProvider(std::int64_t vocab, std::uint64_t seed) : row_(sb::random_logits(vocab, seed)) {}
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(row_.size()); }
  std::span<const Token> context() const { return context_; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(context_.size()); }
  void reset(std::span<const Token> prompt) { context_.assign(prompt.begin(), prompt.end()); }
  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      std::copy(row_.begin(), row_.end(), logits.row_data(r));
    }
    (void)batch;
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept, Token next) {
    for (auto n : kept) context_.push_back(batch.tokens[static_cast<std::size_t>(n)]);
    context_.push_back(next);
  }

 private:
  std::vector<float> row_;
  std::vector<Token> context_;
};

void run_step(benchmark::State& state, Method method, std::int32_t depth, std::int32_t width,
              double rows_per_step) {
  const auto vocab = state.range(0);
  FixedRowProvider target(vocab, 1), draft(vocab, 2);
  DecodeOptions o;
  o.method = method;
  o.depth = depth;
  o.width = width;
  o.max_new_tokens = 1 << 30;
  Decoder decoder(target, draft, o);
  const std::vector<Token> prompt{1};
  decoder.reset(prompt, 0);
  std::int64_t steps = 0;
  for (auto _ : state) {
    if (++steps % 4096 == 0) decoder.reset(prompt, static_cast<std::uint32_t>(steps));
    benchmark::DoNotOptimize(decoder.step().data());
  }
  sb::set_vocab_counters(state, vocab, rows_per_step);
}

void BM_DecodeStep_Sd(benchmark::State& state) { run_step(state, Method::kSd, 4, 1, 4 + 5); }
void BM_DecodeStep_SpecTr(benchmark::State& state) {
  run_step(state, Method::kSpecTr, 3, 3, 1 + 3 + 3 + 10);
}
void BM_DecodeStep_RsdS(benchmark::State& state) {
  run_step(state, Method::kRsdS, 4, 3, 1 + 3 * 3 + 13);
}
void BM_DecodeStep_Mtad(benchmark::State& state) {
  run_step(state, Method::kMtad, 4, 3, 1 + 3 * 3 + 5);
}

}  // namespace

BENCHMARK(BM_DecodeStep_Sd)->Apply(sb::vocab_args);
BENCHMARK(BM_DecodeStep_SpecTr)->Apply(sb::vocab_args);
BENCHMARK(BM_DecodeStep_RsdS)->Apply(sb::vocab_args);
BENCHMARK(BM_DecodeStep_Mtad)->Apply(sb::vocab_args);
