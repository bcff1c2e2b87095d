// SPDX-License-Identifier: MIT
// Drafting: Gumbel-top-k over one row, and one stochastic-beam-search level (W rows).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "reference.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/draft/draft.hpp"

namespace sb = specdec::bench;

static void BM_GumbelTopK(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto k = state.range(1);
  const auto logits = sb::random_logits(vocab);
  std::vector<specdec::Token> tokens(static_cast<std::size_t>(k));
  specdec::Workspace ws(specdec::gumbel_top_k_workspace_size(vocab));
  specdec::RandomStream stream{.seed = 1, .domain = specdec::Domain::kDraft};
  std::uint32_t position = 0;
  for (auto _ : state) {
    // The row function (the public entry adds an O(V) validation pass).
    auto scope = ws.scope();
    auto perturbed = ws.take<float>(static_cast<std::size_t>(vocab));
    auto index = ws.take<std::int32_t>(static_cast<std::size_t>(vocab));
    const auto got = specdec::detail::gumbel_top_k_row<specdec::RowKind::kLogWeights>(
        logits.data(), vocab, k, stream.at_position(position++), 0,
        {.perturbed = perturbed.data(), .index = index.data(), .tokens = tokens.data()});
    benchmark::DoNotOptimize(got);
    benchmark::DoNotOptimize(tokens.data());
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_GumbelTopK)->ArgsProduct({{32000, 128256, 256000}, {1, 8, 64}});

// One RSD-S level: W beam nodes, each with a V-row (copied in by the callback, as an engine
// would), Gumbel-top-W per row, truncated update and global top-W. Timed as a depth-2 search
// (the root row plus the W-node level): W + 1 rows per iteration.
static void BM_StochasticBeamLevel(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto width = static_cast<std::int32_t>(state.range(1));
  const auto logits = sb::random_logits(vocab);
  std::vector<float> probs(logits.size());
  specdec::softmax<float>(logits, probs);
  auto rows = [&](const specdec::DraftTree&, std::span<const std::int32_t> nodes,
                  specdec::MatrixView<float> out) {
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(nodes.size()); ++r) {
      std::memcpy(out.row_data(r), probs.data(), probs.size() * sizeof(float));
    }
  };
  specdec::Workspace ws(specdec::rsd_s_workspace_size(width, vocab));
  specdec::DraftedTree tree;
  specdec::RandomStream stream{.seed = 1, .domain = specdec::Domain::kDraft};
  std::uint32_t position = 0;
  for (auto _ : state) {
    specdec::draft_rsd_s(width, 2, vocab, rows, stream.at_position(position++), tree, ws);
    benchmark::DoNotOptimize(tree.tree.tokens.data());
  }
  sb::set_vocab_counters(state, vocab, static_cast<double>(width + 1));
}
BENCHMARK(BM_StochasticBeamLevel)->ArgsProduct({{32000, 128256, 256000}, {4, 16}});
