// SPDX-License-Identifier: MIT
// Batched Gumbel-top-k and stochastic-beam-search levels against gumbel_top_k and draft_rsd_s per
// sequence, on every backend.
#include <Eigen/Core>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/toy/random.hpp"
#include "support/backends.hpp"
#include "support/stats.hpp"
#include "tree_cases.hpp"

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
#include "specdec/backend/cuda/draft_batch.hpp"
#endif

using namespace specdec;
using specdec::test::draft_stream;
using Catch::Detail::Approx;

namespace {

/// Values computed on `Backend` against the host's: equal on the CPU; on a GPU, whose libm
/// differs from the host's in the last bits, equal to float rounding.
template <class Backend>
bool same_value(float got, float want) {
  if constexpr (std::is_same_v<Backend, backend::Cpu>) {
    return got == want || (std::isnan(got) && std::isnan(want));
  } else {
    return got == want || got == Approx(want).epsilon(1e-5).margin(1e-5);
  }
}

struct TopK {
  std::vector<Token> tokens;
  std::vector<float> values;
  std::vector<std::int32_t> counts;
};

/// gumbel_top_k_batch on `backend`, rows in its memory; `with_values` = false passes a values view
/// with no rows.
template <class Backend, class T>
TopK run_top_k(const Backend& backend, RowKind kind, const std::vector<T>& rows,
               std::int64_t n_rows, std::int64_t vocab, std::int64_t k,
               const std::vector<RandomStream>& streams, bool with_values = true) {
  const auto cells = static_cast<std::size_t>(n_rows * k);
  test::Buffer<Backend, T> d_rows(rows);
  test::Buffer<Backend, Token> d_tokens(cells);
  test::Buffer<Backend, float> d_values(cells);
  test::Buffer<Backend, std::int32_t> d_counts(static_cast<std::size_t>(n_rows));
  test::Scratch<Backend> scratch(workspace_size(backend, GumbelTopKBatchShape{n_rows, vocab, k}));
  gumbel_top_k_batch(
      backend,
      GumbelTopKBatchArgs<T>{
          .kind = kind,
          .rows = MatrixView<const T>(d_rows.data(), n_rows, vocab),
          .k = k,
          .streams = streams,
          .tokens = MatrixView<Token>(d_tokens.data(), n_rows, k),
          .values =
              with_values ? MatrixView<float>(d_values.data(), n_rows, k) : MatrixView<float>(),
          .counts = std::span<std::int32_t>(d_counts.data(), static_cast<std::size_t>(n_rows))},
      scratch.get());
  return {d_tokens.to_host(), with_values ? d_values.to_host() : std::vector<float>(),
          d_counts.to_host()};
}

/// gumbel_top_k (or gumbel_top_k_probabilities) row by row, padded with -1 / -inf.
template <class T>
TopK top_k_oracle(RowKind kind, const std::vector<T>& rows, std::int64_t n_rows, std::int64_t vocab,
                  std::int64_t k, const std::vector<RandomStream>& streams) {
  TopK want{std::vector<Token>(static_cast<std::size_t>(n_rows * k), kNoToken),
            std::vector<float>(static_cast<std::size_t>(n_rows * k), -INFINITY),
            {}};
  Workspace ws;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    const auto at = static_cast<std::size_t>(r * k), kk = static_cast<std::size_t>(k);
    const auto row = std::span<const T>(rows).subspan(static_cast<std::size_t>(r * vocab),
                                                      static_cast<std::size_t>(vocab));
    const auto tokens = std::span<Token>(want.tokens).subspan(at, kk);
    const auto values = std::span<float>(want.values).subspan(at, kk);
    const auto& s = streams[static_cast<std::size_t>(r)];
    const auto count = kind == RowKind::kProbabilities
                           ? gumbel_top_k_probabilities<T>(row, k, s, tokens, ws, values)
                           : gumbel_top_k<T>(row, k, s, tokens, ws, values);
    want.counts.push_back(static_cast<std::int32_t>(count));
  }
  return want;
}

template <class Backend>
void check_top_k(const TopK& got, const TopK& want) {
  CHECK(got.counts == want.counts);
  CHECK(got.tokens == want.tokens);
  REQUIRE(got.values.size() == want.values.size());
  for (std::size_t i = 0; i < want.values.size(); ++i) {
    CAPTURE(i, got.values[i], want.values[i]);
    CHECK(same_value<Backend>(got.values[i], want.values[i]));
  }
}

/// Dirichlet probability rows (row 3, when present, has three allowed tokens only) and their
/// logarithms; one draft stream per row.
struct TopKRows {
  std::vector<float> probs, logits;
  std::vector<RandomStream> streams;
};
TopKRows top_k_rows(std::int64_t n_rows, std::int64_t vocab, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  TopKRows t;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    auto row = toy::dirichlet(vocab, 0.3, rng);
    if (r == 3) {  // only three tokens allowed: fewer than k samples
      std::fill(row.begin(), row.end(), 0.0f);
      row[1] = 0.5f, row[7] = 0.25f, row[static_cast<std::size_t>(vocab) - 100] = 0.25f;
    }
    t.probs.insert(t.probs.end(), row.begin(), row.end());
    for (const float p : row) t.logits.push_back(p > 0.0f ? std::log(p) : -INFINITY);
    t.streams.push_back(draft_stream(seed + 8, static_cast<std::uint32_t>(r)));
  }
  return t;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("gumbel_top_k_batch equals gumbel_top_k per row", "[backend][batched]",
                        test::Backends) {
  const std::int64_t n_rows = 9, vocab = 500, k = 6;
  const auto t = top_k_rows(n_rows, vocab, 4);
  for (const RowKind kind : {RowKind::kProbabilities, RowKind::kLogWeights}) {
    const auto& rows = kind == RowKind::kProbabilities ? t.probs : t.logits;
    const auto got = run_top_k(TestType{}, kind, rows, n_rows, vocab, k, t.streams);
    const auto want = top_k_oracle(kind, rows, n_rows, vocab, k, t.streams);
    check_top_k<TestType>(got, want);
    CHECK(want.counts[3] == 3);
  }
}

TEMPLATE_LIST_TEST_CASE("gumbel_top_k_batch takes fp16 and bf16 rows", "[backend][batched]",
                        test::Backends) {
  const std::int64_t n_rows = 5, vocab = 300, k = 4;
  const auto t = top_k_rows(n_rows, vocab, 14);
  std::vector<Eigen::half> half;
  std::vector<Eigen::bfloat16> bf16;
  for (const float x : t.logits) {
    half.push_back(static_cast<Eigen::half>(x));
    bf16.push_back(static_cast<Eigen::bfloat16>(x));
  }
  check_top_k<TestType>(
      run_top_k(TestType{}, RowKind::kLogWeights, half, n_rows, vocab, k, t.streams),
      top_k_oracle(RowKind::kLogWeights, half, n_rows, vocab, k, t.streams));
  std::vector<Eigen::half> half_probs;
  for (const float p : t.probs) half_probs.push_back(static_cast<Eigen::half>(p));
  // fp16 rounding leaves the rows' sums within the probability tolerance.
  check_top_k<TestType>(
      run_top_k(TestType{}, RowKind::kProbabilities, half_probs, n_rows, vocab, k, t.streams),
      top_k_oracle(RowKind::kProbabilities, half_probs, n_rows, vocab, k, t.streams));
  check_top_k<TestType>(
      run_top_k(TestType{}, RowKind::kLogWeights, bf16, n_rows, vocab, k, t.streams),
      top_k_oracle(RowKind::kLogWeights, bf16, n_rows, vocab, k, t.streams));
}

TEMPLATE_LIST_TEST_CASE("gumbel_top_k_batch may skip the values", "[backend][batched]",
                        test::Backends) {
  const std::int64_t n_rows = 4, vocab = 200, k = 5;
  const auto t = top_k_rows(n_rows, vocab, 2);
  const auto with =
      run_top_k(TestType{}, RowKind::kProbabilities, t.probs, n_rows, vocab, k, t.streams);
  const auto without =
      run_top_k(TestType{}, RowKind::kProbabilities, t.probs, n_rows, vocab, k, t.streams, false);
  CHECK(without.tokens == with.tokens);
  CHECK(without.counts == with.counts);
}

TEMPLATE_LIST_TEST_CASE("gumbel_top_k_batch with k = 1 draws tokens distributed as the row",
                        "[backend][batched]", test::Backends) {
  // 100000 rows share one distribution and differ in their streams: the first sample of each is a
  // draw from the row (token 4 has probability 0 and never appears).
  const std::int64_t n_rows = 100000, vocab = 6, k = 1;
  const std::vector<float> row = {0.3f, 0.05f, 0.25f, 0.15f, 0.0f, 0.25f};
  std::vector<float> probs, logits;
  std::vector<RandomStream> streams;
  for (std::int64_t r = 0; r < n_rows; ++r) {
    probs.insert(probs.end(), row.begin(), row.end());
    for (const float p : row) logits.push_back(p > 0.0f ? std::log(p) + 3.0f : -INFINITY);
    streams.push_back(draft_stream(99, static_cast<std::uint32_t>(r)));
  }
  for (const RowKind kind : {RowKind::kProbabilities, RowKind::kLogWeights}) {
    const auto got = run_top_k(TestType{}, kind, kind == RowKind::kProbabilities ? probs : logits,
                               n_rows, vocab, k, streams, false);
    std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
    for (const Token t : got.tokens) ++counts[static_cast<std::size_t>(t)];
    CHECK(std::all_of(got.counts.begin(), got.counts.end(), [](std::int32_t c) { return c == 1; }));
    // False-failure probability: kFalseFailureProbability = 1e-6.
    const auto result = test::chi_square_test(counts, std::span<const float>(row));
    CHECK(result.p_value > test::kFalseFailureProbability);
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

/// stochastic_beam_level_batch on `backend` applied `depth` times to B sequences, each level's
/// output becoming the next level's beams (the host keeps the trees, the backend's memory holds
/// each level's inputs and outputs), nodes numbered as draft_rsd_s numbers them.
template <class Backend>
std::vector<DraftedTree> beams_by_levels(const Backend& backend, std::int32_t width,
                                         std::int32_t depth, const std::vector<NodeRows>& rows,
                                         const std::vector<RandomStream>& streams) {
  const auto batch = static_cast<std::int64_t>(rows.size());
  const auto vocab = rows[0].vocab;
  const auto w = static_cast<std::size_t>(width);
  const auto bw = static_cast<std::int64_t>(width);
  const auto cells = static_cast<std::size_t>(batch) * w;
  std::vector<DraftedTree> trees(static_cast<std::size_t>(batch));
  for (auto& t : trees) t.clear(vocab);
  std::vector<std::int32_t> counts(static_cast<std::size_t>(batch), 1), nodes(cells, kRootNode);
  std::vector<float> log_probs(cells, 0.0f), scores(cells, 0.0f);
  std::vector<float> draft(cells * static_cast<std::size_t>(vocab), 0.0f);
  test::Scratch<Backend> scratch(workspace_size(backend, BeamLevelBatchShape{batch, width, vocab}));
  test::Buffer<Backend, std::int32_t> next_parents(cells),
      next_counts(static_cast<std::size_t>(batch));
  test::Buffer<Backend, Token> next_tokens(cells);
  test::Buffer<Backend, float> next_log_probs(cells), next_scores(cells);
  for (std::int32_t level = 0; level < depth; ++level) {
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(counts[b]); ++i) {
        const auto& row = rows[b].of(nodes[b * w + i]);
        std::copy(row.begin(), row.end(),
                  draft.begin() +
                      static_cast<std::ptrdiff_t>((b * w + i) * static_cast<std::size_t>(vocab)));
      }
    }
    test::Buffer<Backend, float> d_draft(draft), d_log_probs(log_probs), d_scores(scores);
    test::Buffer<Backend, std::int32_t> d_counts(counts), d_nodes(nodes);
    stochastic_beam_level_batch(
        backend,
        BeamLevelBatchArgs{.draft_rows = MatrixView<const float>(d_draft.data(), batch * bw, vocab),
                           .beam_counts = std::span<const std::int32_t>(
                               d_counts.data(), static_cast<std::size_t>(batch)),
                           .nodes = MatrixView<const std::int32_t>(d_nodes.data(), batch, bw),
                           .log_probs = MatrixView<const float>(d_log_probs.data(), batch, bw),
                           .scores = MatrixView<const float>(d_scores.data(), batch, bw),
                           .streams = streams,
                           .next_parents = MatrixView<std::int32_t>(next_parents.data(), batch, bw),
                           .next_tokens = MatrixView<Token>(next_tokens.data(), batch, bw),
                           .next_log_probs = MatrixView<float>(next_log_probs.data(), batch, bw),
                           .next_scores = MatrixView<float>(next_scores.data(), batch, bw),
                           .next_counts = std::span<std::int32_t>(next_counts.data(),
                                                                  static_cast<std::size_t>(batch))},
        scratch.get());
    const auto parents = next_parents.to_host(), got_counts = next_counts.to_host();
    const auto tokens = next_tokens.to_host();
    const auto lp = next_log_probs.to_host(), sc = next_scores.to_host();
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
      const auto begin = trees[b].size();
      for (std::size_t j = 0; j < static_cast<std::size_t>(got_counts[b]); ++j) {
        trees[b].add(tokens[b * w + j], nodes[b * w + static_cast<std::size_t>(parents[b * w + j])],
                     lp[b * w + j], sc[b * w + j]);
      }
      for (std::size_t j = 0; j < w; ++j) {
        if (j < static_cast<std::size_t>(got_counts[b])) {
          nodes[b * w + j] = begin + static_cast<std::int32_t>(j);
          log_probs[b * w + j] = lp[b * w + j];
          scores[b * w + j] = sc[b * w + j];
        } else {  // padding
          CHECK(parents[b * w + j] == -1);
          CHECK(tokens[b * w + j] == kNoToken);
          CHECK(lp[b * w + j] == -INFINITY);
          CHECK(sc[b * w + j] == -INFINITY);
        }
      }
      counts[b] = got_counts[b];
    }
  }
  return trees;
}

/// B sequences of node rows (sequence 1's root row has two allowed tokens only: fewer live beams
/// than the width at the next level).
std::vector<NodeRows> beam_rows(std::int64_t vocab, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<NodeRows> rows;
  for (std::uint32_t b = 0; b < 7; ++b) {
    NodeRows r{vocab, {}};
    for (int i = 0; i < 5; ++i) r.table.push_back(toy::dirichlet(vocab, 0.4, rng));
    if (b == 1) {
      std::fill(r.table[0].begin(), r.table[0].end(), 0.0f);
      r.table[0][3] = 0.6f, r.table[0][9] = 0.4f;
    }
    rows.push_back(r);
  }
  return rows;
}

DraftedTree rsd_s_oracle(std::int32_t width, std::int32_t depth, const NodeRows& rows,
                         const RandomStream& stream) {
  DraftedTree want;
  Workspace ws;
  draft_rsd_s(
      width, depth, rows.vocab,
      [&](const DraftTree&, std::span<const std::int32_t> nodes, MatrixView<float> out) {
        for (std::size_t i = 0; i < nodes.size(); ++i) {
          const auto& row = rows.of(nodes[i]);
          std::copy(row.begin(), row.end(), out.row_data(static_cast<std::int64_t>(i)));
        }
      },
      stream, want, ws);
  return want;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("stochastic_beam_level_batch equals draft_rsd_s level by level",
                        "[backend][batched]", test::Backends) {
  const std::int32_t width = 4, depth = 3;
  const auto rows = beam_rows(60, 6);
  std::vector<RandomStream> streams;
  for (std::uint32_t b = 0; b < rows.size(); ++b) streams.push_back(draft_stream(33, b));
  const auto got = beams_by_levels(TestType{}, width, depth, rows, streams);
  for (std::size_t b = 0; b < rows.size(); ++b) {
    const auto want = rsd_s_oracle(width, depth, rows[b], streams[b]);
    CHECK(got[b].tree.tokens == want.tree.tokens);
    CHECK(got[b].tree.parents == want.tree.parents);
    REQUIRE(got[b].log_probs.size() == want.log_probs.size());
    for (std::size_t i = 0; i < want.log_probs.size(); ++i) {
      CHECK(same_value<TestType>(got[b].log_probs[i], want.log_probs[i]));
      CHECK(same_value<TestType>(got[b].scores[i], want.scores[i]));
    }
  }
  CHECK(got[1].tree.tokens.size() < got[0].tree.tokens.size());  // the sparse sequence
}

TEST_CASE("stochastic_beam_level_batch is independent of the thread count", "[backend][batched]") {
  const auto rows = beam_rows(50, 3);
  std::vector<RandomStream> streams;
  for (std::uint32_t b = 0; b < rows.size(); ++b) streams.push_back(draft_stream(5, b));
  const auto one = beams_by_levels(backend::cpu.with_threads(1), 3, 3, rows, streams);
  const auto two = beams_by_levels(backend::cpu.with_threads(2), 3, 3, rows, streams);
  for (std::size_t b = 0; b < rows.size(); ++b) {
    CHECK(two[b].tree.tokens == one[b].tree.tokens);
    CHECK(two[b].tree.parents == one[b].tree.parents);
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
        backend::cpu,
        BeamLevelBatchArgs{.draft_rows = MatrixView<const float>(draft.data(), 4, 4),
                           .beam_counts = counts,
                           .nodes = MatrixView<const std::int32_t>(nodes.data(), 2, 2),
                           .log_probs = MatrixView<const float>(lp.data(), 2, 2),
                           .scores = MatrixView<const float>(sc.data(), 2, 2),
                           .streams = streams,
                           .next_parents = MatrixView<std::int32_t>(parents.data(), 2, 2),
                           .next_tokens = MatrixView<Token>(tokens.data(), 2, 2),
                           .next_log_probs = MatrixView<float>(nlp.data(), 2, 2),
                           .next_scores = MatrixView<float>(nsc.data(), 2, 2),
                           .next_counts = next_counts},
        ws);
  };
  CHECK_THROWS_WITH(call(), Catch::Contains("beam_counts[1]: 3 is outside [1, 2]"));
  counts[1] = 2;
  draft[3 * 4] = 2.0f;
  CHECK_THROWS_WITH(call(), Catch::Contains("draft_rows[3]"));
}

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA

TEST_CASE("gumbel_top_k_batch on CUDA rejects bad input naming the argument",
          "[backend][batched]") {
  const std::int64_t n_rows = 2, vocab = 2000;
  const auto cuda = backend::cuda;
  test::Buffer<backend::Cuda, float> rows(static_cast<std::size_t>(n_rows * vocab));
  test::Buffer<backend::Cuda, Token> tokens(static_cast<std::size_t>(n_rows * 1100));
  test::Buffer<backend::Cuda, float> values(static_cast<std::size_t>(n_rows * 1100));
  test::Buffer<backend::Cuda, std::int32_t> counts(static_cast<std::size_t>(n_rows));
  const std::vector<RandomStream> streams(static_cast<std::size_t>(n_rows));
  const auto bytes = workspace_size(cuda, GumbelTopKBatchShape{n_rows, vocab, 1100});
  test::Scratch<backend::Cuda> scratch(bytes);
  const auto call = [&](std::int64_t k, const float* row_data, backend::DeviceWorkspace ws) {
    gumbel_top_k_batch(
        cuda,
        GumbelTopKBatchArgs<float>{.kind = RowKind::kProbabilities,
                                   .rows = MatrixView<const float>(row_data, n_rows, vocab),
                                   .k = k,
                                   .streams = streams,
                                   .tokens = MatrixView<Token>(tokens.data(), n_rows, k),
                                   .values = MatrixView<float>(values.data(), n_rows, k),
                                   .counts = std::span<std::int32_t>(counts.data(), 2)},
        ws);
  };
  CHECK_THROWS_WITH(call(1025, rows.data(), scratch.get()),
                    Catch::Contains("k: 1025 exceeds the CUDA backend's limit of 1024"));
  CHECK_THROWS_WITH(call(4, nullptr, scratch.get()),
                    Catch::Contains("rows: is a null device pointer"));
  CHECK_THROWS_WITH(call(4, rows.data(), {scratch.get().data, 100}),
                    Catch::Contains("workspace: holds 100 bytes"));
  CHECK_THROWS_WITH(call(2001, rows.data(), scratch.get()),
                    Catch::Contains("k: 2001 must be in [1, 2000]"));
}

TEST_CASE("stochastic_beam_level_batch on CUDA rejects bad input naming the argument",
          "[backend][batched]") {
  const std::int64_t batch = 2, width = 2, vocab = 8;
  const auto cuda = backend::cuda;
  test::Buffer<backend::Cuda, float> draft(static_cast<std::size_t>(batch * width * vocab));
  test::Buffer<backend::Cuda, std::int32_t> counts(2), nodes(4), parents(4), next_counts(2);
  test::Buffer<backend::Cuda, float> lp(4), sc(4), nlp(4), nsc(4);
  test::Buffer<backend::Cuda, Token> tokens(4);
  const std::vector<RandomStream> streams(2);
  const auto bytes = workspace_size(cuda, BeamLevelBatchShape{batch, width, vocab});
  test::Scratch<backend::Cuda> scratch(bytes);
  const auto call = [&](const std::int32_t* nodes_data, backend::DeviceWorkspace ws) {
    stochastic_beam_level_batch(
        cuda,
        BeamLevelBatchArgs{.draft_rows = MatrixView<const float>(draft.data(), 4, vocab),
                           .beam_counts = std::span<const std::int32_t>(counts.data(), 2),
                           .nodes = MatrixView<const std::int32_t>(nodes_data, 2, 2),
                           .log_probs = MatrixView<const float>(lp.data(), 2, 2),
                           .scores = MatrixView<const float>(sc.data(), 2, 2),
                           .streams = streams,
                           .next_parents = MatrixView<std::int32_t>(parents.data(), 2, 2),
                           .next_tokens = MatrixView<Token>(tokens.data(), 2, 2),
                           .next_log_probs = MatrixView<float>(nlp.data(), 2, 2),
                           .next_scores = MatrixView<float>(nsc.data(), 2, 2),
                           .next_counts = std::span<std::int32_t>(next_counts.data(), 2)},
        ws);
  };
  CHECK_THROWS_WITH(call(nullptr, scratch.get()),
                    Catch::Contains("nodes: is a null device pointer"));
  CHECK_THROWS_WITH(call(nodes.data(), {scratch.get().data, bytes - 1}),
                    Catch::Contains("workspace: holds"));
  CHECK_THROWS_WITH(call(nodes.data(), {nullptr, 0}), Catch::Contains("workspace: is null"));
}

#endif
