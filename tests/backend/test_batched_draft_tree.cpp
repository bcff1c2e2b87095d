// SPDX-License-Identifier: MIT
// Batched Gumbel-top-k, stochastic-beam-search levels, tree masks, positions and prefix match
// against the single-sequence functions.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/tree/tree_mask.hpp"

using namespace specdec;

namespace {

RandomStream draft_stream(std::uint64_t seed, std::uint32_t sequence) {
  RandomStream s;
  s.seed = seed;
  s.sequence = sequence;
  s.domain = Domain::kDraft;
  return s;
}

struct TopK {
  std::vector<Token> tokens;
  std::vector<float> values;
  std::vector<std::int32_t> counts;
};

TopK run_top_k(const backend::Cpu& cpu, RowKind kind, const std::vector<float>& rows,
               std::int64_t n_rows, std::int64_t vocab, std::int64_t k,
               const std::vector<RandomStream>& streams) {
  TopK r{std::vector<Token>(static_cast<std::size_t>(n_rows * k)),
         std::vector<float>(static_cast<std::size_t>(n_rows * k)),
         std::vector<std::int32_t>(static_cast<std::size_t>(n_rows))};
  Workspace ws(workspace_size(cpu, GumbelTopKBatchShape{n_rows, vocab, k}));
  gumbel_top_k_batch(cpu, kind, MatrixView<const float>(rows.data(), n_rows, vocab), k, streams,
                     MatrixView<Token>(r.tokens.data(), n_rows, k),
                     MatrixView<float>(r.values.data(), n_rows, k), r.counts, ws);
  return r;
}

}  // namespace

TEST_CASE("gumbel_top_k_batch equals gumbel_top_k per row", "[backend][batched]") {
  const std::int64_t n_rows = 9, vocab = 500, k = 6;
  toy::ToyRandom rng(4);
  std::vector<float> probs, logits;
  std::vector<RandomStream> streams;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    auto row = toy::dirichlet(vocab, 0.3, rng);
    if (r == 3) {  // only three tokens allowed: fewer than k samples
      std::fill(row.begin(), row.end(), 0.0f);
      row[1] = 0.5f, row[7] = 0.25f, row[400] = 0.25f;
    }
    probs.insert(probs.end(), row.begin(), row.end());
    for (const float p : row) logits.push_back(p > 0.0f ? std::log(p) : -INFINITY);
    streams.push_back(draft_stream(12, static_cast<std::uint32_t>(r)));
  }
  for (const RowKind kind : {RowKind::kProbabilities, RowKind::kLogWeights}) {
    const auto& rows = kind == RowKind::kProbabilities ? probs : logits;
    const auto got = run_top_k(backend::cpu, kind, rows, n_rows, vocab, k, streams);
    Workspace ws;
    for (std::int64_t r = 0; r < n_rows; ++r) {
      std::vector<Token> tokens(static_cast<std::size_t>(k), kNoToken);
      std::vector<float> values(static_cast<std::size_t>(k), -INFINITY);
      const auto row = std::span<const float>(rows).subspan(static_cast<std::size_t>(r * vocab),
                                                            static_cast<std::size_t>(vocab));
      const auto count = kind == RowKind::kProbabilities
                             ? gumbel_top_k_probabilities<float>(
                                   row, k, streams[static_cast<std::size_t>(r)], tokens, ws, values)
                             : gumbel_top_k<float>(row, k, streams[static_cast<std::size_t>(r)],
                                                   tokens, ws, values);
      CHECK(got.counts[static_cast<std::size_t>(r)] == count);
      for (std::int64_t j = 0; j < k; ++j) {
        const auto at = static_cast<std::size_t>(r * k + j);
        CHECK(got.tokens[at] == tokens[static_cast<std::size_t>(j)]);
        CHECK(got.values[at] == values[static_cast<std::size_t>(j)]);
      }
    }
  }
}

TEST_CASE("gumbel_top_k_batch is independent of the thread count", "[backend][batched]") {
  const std::int64_t n_rows = 20, vocab = 300, k = 4;
  toy::ToyRandom rng(9);
  std::vector<float> probs;
  std::vector<RandomStream> streams;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const auto row = toy::dirichlet(vocab, 0.5, rng);
    probs.insert(probs.end(), row.begin(), row.end());
    streams.push_back(draft_stream(1, static_cast<std::uint32_t>(r)));
  }
  const auto one = run_top_k(backend::cpu.with_threads(1), RowKind::kProbabilities, probs, n_rows,
                             vocab, k, streams);
  const auto two = run_top_k(backend::cpu.with_threads(2), RowKind::kProbabilities, probs, n_rows,
                             vocab, k, streams);
  CHECK(one.tokens == two.tokens);
  CHECK(one.values == two.values);
}

TEST_CASE("gumbel_top_k_batch rejects bad input naming the argument", "[backend][batched]") {
  std::vector<float> probs(3 * 4, 0.25f);
  probs[2 * 4 + 1] = -1.0f;
  std::vector<RandomStream> streams(3);
  CHECK_THROWS_WITH(run_top_k(backend::cpu, RowKind::kProbabilities, probs, 3, 4, 2, streams),
                    Catch::Contains("rows[2]"));
  CHECK_THROWS_WITH(run_top_k(backend::cpu, RowKind::kProbabilities, probs, 3, 4, 5, streams),
                    Catch::Contains("k: 5 must be in [1, 4]"));
  streams.resize(2);
  CHECK_THROWS_WITH(run_top_k(backend::cpu, RowKind::kLogWeights, probs, 3, 4, 2, streams),
                    Catch::Contains("streams"));
}

namespace {

/// The draft row of a node: one of a few fixed rows, chosen by node id.
struct NodeRows {
  std::int64_t vocab;
  std::vector<std::vector<float>> table;
  const std::vector<float>& of(std::int32_t node) const {
    return table[static_cast<std::size_t>(node + 1) % table.size()];
  }
};

/// stochastic_beam_level_batch applied `depth` times to B sequences, each level's output becoming
/// the next level's beams, as draft_rsd_s numbers nodes.
std::vector<DraftedTree> beams_by_levels(const backend::Cpu& cpu, std::int32_t width,
                                         std::int32_t depth, const std::vector<NodeRows>& rows,
                                         const std::vector<RandomStream>& streams) {
  const auto batch = static_cast<std::int64_t>(rows.size());
  const auto vocab = rows[0].vocab;
  const auto w = static_cast<std::size_t>(width);
  const auto cells = static_cast<std::size_t>(batch) * w;
  std::vector<DraftedTree> trees(static_cast<std::size_t>(batch));
  for (auto& t : trees) t.clear(vocab);
  std::vector<std::int32_t> counts(static_cast<std::size_t>(batch), 1), nodes(cells, kRootNode);
  std::vector<float> log_probs(cells, 0.0f), scores(cells, 0.0f);
  std::vector<std::int32_t> next_parents(cells), next_counts(static_cast<std::size_t>(batch));
  std::vector<Token> next_tokens(cells);
  std::vector<float> next_log_probs(cells), next_scores(cells);
  std::vector<float> draft(cells * static_cast<std::size_t>(vocab), 0.0f);
  Workspace ws(workspace_size(cpu, BeamLevelBatchShape{batch, width, vocab}));
  for (std::int32_t level = 0; level < depth; ++level) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(counts[b]); ++i) {
        const auto& row = rows[b].of(nodes[b * w + i]);
        std::copy(row.begin(), row.end(),
                  draft.begin() +
                      static_cast<std::ptrdiff_t>((b * w + i) * static_cast<std::size_t>(vocab)));
      }
    }
    const auto bw = static_cast<std::int64_t>(width);
    stochastic_beam_level_batch(cpu, MatrixView<const float>(draft.data(), batch * bw, vocab),
                                counts, MatrixView<const std::int32_t>(nodes.data(), batch, bw),
                                MatrixView<const float>(log_probs.data(), batch, bw),
                                MatrixView<const float>(scores.data(), batch, bw), streams,
                                MatrixView<std::int32_t>(next_parents.data(), batch, bw),
                                MatrixView<Token>(next_tokens.data(), batch, bw),
                                MatrixView<float>(next_log_probs.data(), batch, bw),
                                MatrixView<float>(next_scores.data(), batch, bw), next_counts, ws);
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
      const auto begin = trees[b].size();
      for (std::size_t j = 0; j < static_cast<std::size_t>(next_counts[b]); ++j) {
        trees[b].add(next_tokens[b * w + j],
                     nodes[b * w + static_cast<std::size_t>(next_parents[b * w + j])],
                     next_log_probs[b * w + j], next_scores[b * w + j]);
      }
      for (std::size_t j = 0; j < static_cast<std::size_t>(next_counts[b]); ++j) {
        nodes[b * w + j] = begin + static_cast<std::int32_t>(j);
        log_probs[b * w + j] = next_log_probs[b * w + j];
        scores[b * w + j] = next_scores[b * w + j];
      }
      counts[b] = next_counts[b];
    }
  }
  return trees;
}

}  // namespace

TEST_CASE("stochastic_beam_level_batch equals draft_rsd_s level by level", "[backend][batched]") {
  const std::int32_t width = 4, depth = 3;
  const std::int64_t vocab = 60;
  toy::ToyRandom rng(6);
  std::vector<NodeRows> rows;
  std::vector<RandomStream> streams;
  for (std::uint32_t b = 0; b < 7; ++b) {
    NodeRows r{vocab, {}};
    for (int i = 0; i < 5; ++i) r.table.push_back(toy::dirichlet(vocab, 0.4, rng));
    if (b == 1) {  // a sparse row: fewer live beams than the width at the next level
      std::fill(r.table[0].begin(), r.table[0].end(), 0.0f);
      r.table[0][3] = 0.6f, r.table[0][9] = 0.4f;
    }
    rows.push_back(r);
    streams.push_back(draft_stream(33, b));
  }
  const auto one = beams_by_levels(backend::cpu.with_threads(1), width, depth, rows, streams);
  const auto two = beams_by_levels(backend::cpu.with_threads(2), width, depth, rows, streams);
  Workspace ws;
  for (std::size_t b = 0; b < rows.size(); ++b) {
    DraftedTree want;
    draft_rsd_s(
        width, depth, vocab,
        [&](const DraftTree&, std::span<const std::int32_t> nodes, MatrixView<float> out) {
          for (std::size_t i = 0; i < nodes.size(); ++i) {
            const auto& row = rows[b].of(nodes[i]);
            std::copy(row.begin(), row.end(), out.row_data(static_cast<std::int64_t>(i)));
          }
        },
        streams[b], want, ws);
    CHECK(one[b].tree.tokens == want.tree.tokens);
    CHECK(one[b].tree.parents == want.tree.parents);
    CHECK(one[b].log_probs == want.log_probs);
    CHECK(one[b].scores == want.scores);
    CHECK(two[b].tree.tokens == one[b].tree.tokens);
    CHECK(two[b].scores == one[b].scores);
  }
}

TEST_CASE("stochastic_beam_level_batch rejects bad input naming the argument",
          "[backend][batched]") {
  std::vector<float> draft(2 * 2 * 4, 0.25f);
  std::vector<std::int32_t> counts = {1, 3}, nodes = {-1, -1, -1, -1}, parents(4), next_counts(2);
  std::vector<float> lp(4, 0.0f), sc(4, 0.0f), nlp(4), nsc(4);
  std::vector<Token> tokens(4);
  std::vector<RandomStream> streams(2);
  Workspace ws;
  const auto call = [&] {
    stochastic_beam_level_batch(
        backend::cpu, MatrixView<const float>(draft.data(), 4, 4), counts,
        MatrixView<const std::int32_t>(nodes.data(), 2, 2),
        MatrixView<const float>(lp.data(), 2, 2), MatrixView<const float>(sc.data(), 2, 2), streams,
        MatrixView<std::int32_t>(parents.data(), 2, 2), MatrixView<Token>(tokens.data(), 2, 2),
        MatrixView<float>(nlp.data(), 2, 2), MatrixView<float>(nsc.data(), 2, 2), next_counts, ws);
  };
  CHECK_THROWS_WITH(call(), Catch::Contains("beam_counts[1]: 3 is outside [1, 2]"));
  counts[1] = 2;
  draft[3 * 4] = 2.0f;
  CHECK_THROWS_WITH(call(), Catch::Contains("draft_rows[3]"));
}

// ---- Tree masks, positions and prefix match ----

namespace {

struct Forest {
  std::vector<std::int32_t> offsets{0}, parents;
  std::vector<DraftTree> trees;
};

Forest random_forest(std::int64_t batch, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  Forest f;
  for (std::int64_t b = 0; b < batch; ++b) {
    DraftTree t;
    const auto n = b == 1 ? 0 : 1 + static_cast<std::int32_t>(rng.uniform() * 70.0f);
    for (std::int32_t i = 0; i < n; ++i) {
      // Level order: a parent no shallower than the previous node's parent.
      const std::int32_t last = i == 0 ? -1 : t.parents.back();
      const auto span = static_cast<float>(i - last);
      std::int32_t parent = last + static_cast<std::int32_t>(rng.uniform() * span);
      if (parent >= i) parent = i - 1;
      t.add(static_cast<Token>(i % 7), parent);
    }
    f.parents.insert(f.parents.end(), t.parents.begin(), t.parents.end());
    f.offsets.push_back(f.offsets.back() + t.size());
    f.trees.push_back(t);
  }
  return f;
}

}  // namespace

TEST_CASE("packed_tree_masks_batch equals build_packed_mask per tree", "[backend][batched]") {
  const auto f = random_forest(9, 4);
  const auto total = static_cast<std::int64_t>(f.parents.size());
  const std::int64_t words = 3;
  for (const int threads : {1, 2}) {
    std::vector<std::uint32_t> masks(static_cast<std::size_t>(total * words), 0xdeadbeefu);
    packed_tree_masks_batch(backend::cpu.with_threads(threads), f.offsets, f.parents,
                            MatrixView<std::uint32_t>(masks.data(), total, words));
    for (std::size_t b = 0; b < f.trees.size(); ++b) {
      const auto& t = f.trees[b];
      std::vector<std::uint32_t> want(packed_mask_size(t));
      build_packed_mask(t, want);
      const auto w = static_cast<std::size_t>(packed_mask_words(t.size()));
      for (std::size_t i = 0; i < static_cast<std::size_t>(t.size()); ++i) {
        for (std::size_t j = 0; j < static_cast<std::size_t>(words); ++j) {
          const auto got =
              masks[(static_cast<std::size_t>(f.offsets[b]) + i) * static_cast<std::size_t>(words) +
                    j];
          CHECK(got == (j < w ? want[i * w + j] : 0u));
        }
      }
    }
  }
}

TEST_CASE("tree_positions_batch equals tree_positions per tree", "[backend][batched]") {
  const auto f = random_forest(7, 8);
  std::vector<std::int32_t> contexts;
  for (std::size_t b = 0; b < f.trees.size(); ++b)
    contexts.push_back(1 + static_cast<std::int32_t>(b) * 13);
  std::vector<std::int32_t> positions(f.parents.size(), -1);
  tree_positions_batch(backend::cpu.with_threads(2), f.offsets, f.parents, contexts, positions);
  for (std::size_t b = 0; b < f.trees.size(); ++b) {
    std::vector<std::int32_t> want(static_cast<std::size_t>(f.trees[b].size()));
    tree_positions(f.trees[b], contexts[b], want);
    CHECK(std::vector<std::int32_t>(positions.begin() + f.offsets[b],
                                    positions.begin() + f.offsets[b + 1]) == want);
  }
}

TEST_CASE("prefix_match_batch equals prefix_match per row", "[backend][batched]") {
  const std::int64_t batch = 6;
  const std::int32_t width = 5, length = 4;
  toy::ToyRandom rng(2);
  std::vector<Token> beams;
  for (std::int64_t i = 0; i < batch * width * length; ++i) {
    beams.push_back(static_cast<Token>(rng.uniform() * 3.0f));  // small vocabulary: many matches
  }
  std::vector<std::int32_t> out(beams.size(), -1);
  prefix_match_batch(backend::cpu.with_threads(2),
                     MatrixView<const Token>(beams.data(), batch, width * length), width, 3,
                     MatrixView<std::int32_t>(out.data(), batch, width * length));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto at = static_cast<std::size_t>(b * width * length);
    std::vector<std::int32_t> want(static_cast<std::size_t>(width * length));
    prefix_match(std::span<const Token>(beams).subspan(at, want.size()), width, 3, want);
    CHECK(std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(at),
                                    out.begin() + static_cast<std::ptrdiff_t>(at + want.size())) ==
          want);
  }
}

TEST_CASE("tree batch entries reject bad input naming the argument", "[backend][batched]") {
  auto f = random_forest(3, 1);
  std::vector<std::uint32_t> masks(f.parents.size() * 3);
  f.parents[static_cast<std::size_t>(f.offsets[2])] = 0;  // the first node of tree 2
  CHECK_THROWS_WITH(
      packed_tree_masks_batch(
          backend::cpu, f.offsets, f.parents,
          MatrixView<std::uint32_t>(masks.data(), static_cast<std::int64_t>(f.parents.size()), 3)),
      Catch::Contains("parents[2][0]"));
  f = random_forest(3, 1);
  std::vector<std::int32_t> contexts = {4, 0, 2}, positions(f.parents.size());
  CHECK_THROWS_WITH(tree_positions_batch(backend::cpu, f.offsets, f.parents, contexts, positions),
                    Catch::Contains("context_lengths[1]"));
  std::vector<Token> beams = {0, 1, 2, 3, 0, 1, 9, 3};
  std::vector<std::int32_t> out(beams.size());
  CHECK_THROWS_WITH(prefix_match_batch(backend::cpu, MatrixView<const Token>(beams.data(), 2, 4), 2,
                                       5, MatrixView<std::int32_t>(out.data(), 2, 4)),
                    Catch::Contains("beams[1][1][0]: token 9"));
}
