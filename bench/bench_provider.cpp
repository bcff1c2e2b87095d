// SPDX-License-Identifier: MIT
// The provider layer's per-step overheads: checking a provider's rows, the type-erased call, and
// building a TreeBatch from a draft tree.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "reference.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"

namespace sb = specdec::bench;

namespace {

// Hands back precomputed logits, as an engine copies its output buffer into the caller's rows.
class CopyProvider {
 public:
  explicit CopyProvider(std::vector<float> row) : row_(std::move(row)) {}
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(row_.size()); }
  std::span<const specdec::Token> context() const { return context_; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(context_.size()); }
  void reset(std::span<const specdec::Token> prompt) {
    context_.assign(prompt.begin(), prompt.end());
  }
  void evaluate(const specdec::TreeBatch& batch, specdec::MatrixView<float> logits) {
    specdec::provider::check_evaluate_arguments(batch, committed_length(), logits, vocab_size());
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      std::copy(row_.begin(), row_.end(), logits.row_data(r));
    }
  }
  void commit(const specdec::TreeBatch&, std::span<const std::int32_t>, specdec::Token next) {
    context_.push_back(next);
  }

 private:
  std::vector<float> row_;
  std::vector<specdec::Token> context_;
};

}  // namespace

// provider::check_output on one row of V logits (what the decoding loop pays per returned row).
static void BM_CheckProviderOutputRow(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto row = sb::random_logits(vocab);
  const specdec::MatrixView<const float> view(row.data(), 1, vocab);
  for (auto _ : state) {
    specdec::provider::check_output("target_logits", view, 1, vocab);
    benchmark::ClobberMemory();
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_CheckProviderOutputRow)->Apply(sb::vocab_args);

// One root row through AnyLogitsProvider: validation, a virtual call and a row copy.
static void BM_AnyProviderEvaluateRootRow(benchmark::State& state) {
  const auto vocab = state.range(0);
  specdec::AnyLogitsProvider provider(CopyProvider(sb::random_logits(vocab)));
  const std::vector<specdec::Token> prompt = {1, 2, 3};
  provider.reset(prompt);
  const auto batch = specdec::TreeBatch::from_tree(specdec::DraftTree{}, 3);
  std::vector<float> out(static_cast<std::size_t>(vocab));
  for (auto _ : state) {
    provider.evaluate(batch, specdec::MatrixView<float>(out.data(), 1, vocab));
    benchmark::DoNotOptimize(out.data());
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_AnyProviderEvaluateRootRow)->Apply(sb::vocab_args);

// Rebuilding a TreeBatch (positions from depths, reused capacity) for a tree of N nodes.
static void BM_TreeBatchAssign(benchmark::State& state) {
  const auto nodes = static_cast<std::int32_t>(state.range(0));
  specdec::DraftTree tree;
  for (std::int32_t i = 0; i < nodes; ++i) tree.add(i % 7, i < 4 ? -1 : (i - 4) / 2);
  specdec::TreeBatch batch;
  for (auto _ : state) {
    batch.assign(tree, 100);
    benchmark::DoNotOptimize(batch.positions.data());
  }
  state.counters["nodes"] = nodes;
}
BENCHMARK(BM_TreeBatchAssign)->Arg(8)->Arg(64);
