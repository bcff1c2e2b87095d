// SPDX-License-Identifier: MIT
// ReDrafter verification: the reference's per-beam rule (parity mode) on W = 4 beams of 4 draft
// tokens (the exact mode verifies with verify_tree, benchmarked with the verifiers).
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "reference.hpp"
#include "specdec/decode/redrafter_strategy.hpp"

namespace sb = specdec::bench;

namespace {

constexpr std::int32_t kWidth = 4, kDepth = 4;

// Probability rows from random logits (softmax), one per seed.
std::vector<float> probability_rows(std::int64_t vocab, std::int64_t rows, std::uint64_t seed) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    auto row = sb::random_logits(vocab, seed + static_cast<std::uint64_t>(r));
    float max = row[0];
    for (float x : row) max = x > max ? x : max;
    double sum = 0.0;
    for (auto& x : row) sum += (x = std::exp(x - max));
    for (auto& x : row) x = static_cast<float>(x / sum);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

}  // namespace

// Parity verdict: W x L acceptance tests reading two entries each, then one residual over V.
static void BM_RedrafterParityVerdict(benchmark::State& state) {
  const auto vocab = state.range(0);
  const auto v = static_cast<std::size_t>(vocab);
  specdec::ReDrafterBeams beams;
  beams.width = kWidth;
  beams.length = kDepth + 1;
  beams.tokens.resize(static_cast<std::size_t>(kWidth * (kDepth + 1)));
  // Beams sharing their first token (a typical dynamic-tree shape), otherwise distinct.
  std::vector<specdec::Token> flat;
  for (std::int32_t w = 0; w < kWidth; ++w) {
    for (std::int32_t k = 0; k <= kDepth; ++k) {
      beams.tokens[static_cast<std::size_t>(w * (kDepth + 1) + k)] =
          static_cast<specdec::Token>(k <= 1 ? 7 * k : (w * 131 + k * 17) % vocab);
      if (k > 0) flat.push_back(beams.tokens[static_cast<std::size_t>(w * (kDepth + 1) + k)]);
    }
  }
  auto draft = probability_rows(vocab, kWidth * kDepth, 100);
  beams.log_probs.resize(draft.size());
  for (std::size_t i = 0; i < draft.size(); ++i) beams.log_probs[i] = std::log(draft[i]);
  specdec::CompressedBeams compressed;
  specdec::compress_beams(flat, kWidth, vocab, compressed);
  specdec::DraftTree tree;
  std::vector<std::int32_t> node_of(static_cast<std::size_t>(compressed.size()));
  specdec::compressed_to_draft_tree(compressed, tree, node_of);
  std::vector<std::int32_t> node_of_beam(flat.size());
  for (std::size_t x = 0; x < flat.size(); ++x) {
    node_of_beam[x] = node_of[static_cast<std::size_t>(compressed.unpacker[x])];
  }
  const auto target = probability_rows(vocab, tree.size() + 1, 1);
  std::vector<std::int32_t> accepted(kDepth);
  std::vector<float> scratch(v);
  std::uint32_t position = 0;
  for (auto _ : state) {
    const specdec::RandomStream stream{
        .seed = 1, .position = position++, .domain = specdec::Domain::kVerify};
    const auto verdict = specdec::detail::redrafter_parity_verdict(
        beams, node_of_beam, target, vocab, stream, accepted, scratch);
    benchmark::DoNotOptimize(verdict);
  }
  sb::set_vocab_counters(state, vocab);
}
BENCHMARK(BM_RedrafterParityVerdict)->Apply(sb::vocab_args);
