// SPDX-License-Identifier: MIT
// Tree drafters over toy models: RSD-C, RSD-S (stochastic beam search), i.i.d. chains, beam search.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "specdec/draft/draft.hpp"
#include "specdec/toy/draft_rows.hpp"
#include "specdec/toy/markov.hpp"
#include "support/stats.hpp"

using namespace specdec;
using Catch::Detail::Approx;

namespace {

RandomStream drafter_stream(std::uint32_t i) {
  return RandomStream{.seed = 9, .sequence = 1, .position = i, .node = 0, .domain = Domain::kDraft};
}

toy::MarkovModel small_markov() {
  return toy::MarkovModel::from_rows({{0.1f, 0.4f, 0.3f, 0.2f},
                                      {0.25f, 0.25f, 0.2f, 0.3f},
                                      {0.5f, 0.1f, 0.1f, 0.3f},
                                      {0.2f, 0.3f, 0.4f, 0.1f}});
}

double without_replacement_probability(std::span<const float> p, std::span<const int> tuple) {
  double prob = 1.0, left = 1.0;
  for (int x : tuple) {
    prob *= p[static_cast<std::size_t>(x)] / left;
    left -= p[static_cast<std::size_t>(x)];
  }
  return prob;
}

std::vector<std::int32_t> children_of(const DraftTree& t, std::int32_t parent) {
  std::vector<std::int32_t> c;
  for (std::int32_t i = 0; i < t.size(); ++i)
    if (t.parents[static_cast<std::size_t>(i)] == parent) c.push_back(i);
  return c;
}

/// The law of two draft tokens (a, b), at index a * 4 + b, after the context token `context` of
/// small_markov's V = 4 chain: p(a | context) p(b | a).
std::vector<double> two_token_law(const toy::MarkovModel& model, Token context) {
  std::vector<double> law(16, 0.0);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b)
      law[static_cast<std::size_t>(a * 4 + b)] =
          static_cast<double>(model.row(context)[a]) * model.row(static_cast<Token>(a))[b];
  return law;
}

std::vector<Token> path_of(const DraftTree& t, std::int32_t node) {
  std::vector<Token> p;
  for (auto n = node; n >= 0; n = t.parents[static_cast<std::size_t>(n)])
    p.insert(p.begin(), t.tokens[static_cast<std::size_t>(n)]);
  return p;
}

/// Drafting from small_markov after the context token `context`: its draft rows, a workspace
/// (sized for RSD-S with up to `width` beams when given) and the drafted tree.
struct MarkovDrafts {
  toy::MarkovModel model = small_markov();
  toy::ToyDraftRows<toy::MarkovModel> rows;
  Workspace ws;
  DraftedTree out;

  explicit MarkovDrafts(Token context) : rows(model, {context}) {}
  MarkovDrafts(Token context, std::int32_t width)
      : rows(model, {context}), ws(rsd_s_workspace_size(width, 4)) {}
  MarkovDrafts(const MarkovDrafts&) = delete;  // rows points at model
  MarkovDrafts& operator=(const MarkovDrafts&) = delete;

  /// RSD-S draft number `i`: `width` beams, `depth` levels.
  const DraftTree& rsd_s(std::int32_t width, std::int32_t depth, int i) {
    draft_rsd_s(width, depth, 4, rows, drafter_stream(static_cast<std::uint32_t>(i)), out, ws);
    return out.tree;
  }
};

}  // namespace

TEST_CASE("RSD-C builds the tree shape of its branching factors", "[draft][rsdc]") {
  const toy::NGramModel model({.vocab = 6, .order = 2, .concentration = 2.0, .seed = 3});
  toy::ToyDraftRows rows(model, {1, 2});
  const std::vector<std::int32_t> b = {3, 2, 1};
  Workspace ws(rsd_c_workspace_size(b, 6));
  DraftedTree out;
  draft_rsd_c(b, 6, rows, drafter_stream(0), out, ws);
  REQUIRE(out.size() == 3 + 6 + 6);
  out.tree.validate(6);
  CHECK(rows.calls() == 3);
  CHECK(out.has_row(kRootNode));
  for (std::int32_t n = 0; n < out.size(); ++n) {
    const auto depth = out.tree.depths[static_cast<std::size_t>(n)];
    CHECK(out.has_row(n) == (depth < 3));
    const auto kids = children_of(out.tree, n);
    CHECK(static_cast<int>(kids.size()) == (depth < 3 ? b[static_cast<std::size_t>(depth)] : 0));
    std::set<Token> distinct;
    for (auto k : kids) distinct.insert(out.tree.tokens[static_cast<std::size_t>(k)]);
    CHECK(distinct.size() == kids.size());
    // Path log probability = parent's + log draft(token | parent).
    const auto parent = out.tree.parents[static_cast<std::size_t>(n)];
    const auto token = out.tree.tokens[static_cast<std::size_t>(n)];
    CHECK(out.log_probs[static_cast<std::size_t>(n)] ==
          Approx(out.path_log_prob(parent) + std::log(out.row(parent)[token])).margin(1e-5));
  }
}

TEST_CASE("RSD-C root children follow sampling without replacement", "[draft][rsdc]") {
  const auto model = small_markov();
  toy::ToyDraftRows rows(model, {0});
  const std::vector<std::int32_t> b = {2, 1};
  Workspace ws(rsd_c_workspace_size(b, 4));
  DraftedTree out;
  std::vector<std::int64_t> counts(16, 0);
  for (int i = 0; i < 50000; ++i) {
    draft_rsd_c(b, 4, rows, drafter_stream(static_cast<std::uint32_t>(i)), out, ws);
    ++counts[static_cast<std::size_t>(out.tree.tokens[0] * 4 + out.tree.tokens[1])];
  }
  std::vector<double> expected(16, 0.0);
  test::for_each_distinct_tuple(4, 2, [&](std::span<const int> t) {
    expected[static_cast<std::size_t>(t[0] * 4 + t[1])] =
        without_replacement_probability(model.row(0), t);
  });
  // False-failure probability 1e-6.
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("RSD-S root children follow sampling without replacement", "[draft][rsds]") {
  MarkovDrafts s(2, 3);
  std::vector<std::int64_t> counts(64, 0);
  std::vector<std::int64_t> first(4, 0);
  for (int i = 0; i < 50000; ++i) {
    const auto& t = s.rsd_s(3, 1, i).tokens;
    REQUIRE(s.out.size() == 3);
    ++counts[static_cast<std::size_t>(t[0] * 16 + t[1] * 4 + t[2])];
    ++first[static_cast<std::size_t>(t[0])];
  }
  std::vector<double> expected(64, 0.0);
  test::for_each_distinct_tuple(4, 3, [&](std::span<const int> t) {
    expected[static_cast<std::size_t>(t[0] * 16 + t[1] * 4 + t[2])] =
        without_replacement_probability(s.model.row(2), t);
  });
  const auto row = s.model.row(2);
  const std::vector<double> row_expected(row.begin(), row.end());
  // False-failure probability 1e-6 each.
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
  CHECK(test::chi_square_test(first, row_expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("RSD-S children of one parent are sampled without replacement (Theorem 3.2)",
          "[draft][rsds]") {
  // W = 3, L = 2 on a V = 4 Markov model. The children of a depth-1 node, in order, are
  // sequential draws without replacement from its draft row: the first child follows the row,
  // and the second child, given the first one a, follows the row without a. (How many children a
  // node keeps depends on the other beams and on its earlier children, so the pair law given
  // "exactly two children" is not the unconditional one; the sequential law is what recursive
  // rejection sampling needs.) Checked per parent token and per first child.
  MarkovDrafts s(0, 3);
  std::vector<std::vector<std::int64_t>> first(4, std::vector<std::int64_t>(4, 0));
  std::vector<std::vector<std::int64_t>> second(16, std::vector<std::int64_t>(4, 0));
  for (int i = 0; i < 100000; ++i) {
    const DraftTree& tree = s.rsd_s(3, 2, i);
    for (std::int32_t n = 0; n < 3; ++n) {
      const auto v = static_cast<std::size_t>(tree.tokens[static_cast<std::size_t>(n)]);
      const auto kids = children_of(tree, n);
      if (kids.empty()) continue;
      const auto a = static_cast<std::size_t>(tree.tokens[static_cast<std::size_t>(kids[0])]);
      ++first[v][a];
      if (kids.size() >= 2) {
        const auto b = static_cast<std::size_t>(tree.tokens[static_cast<std::size_t>(kids[1])]);
        ++second[v * 4 + a][b];
      }
    }
  }
  int checks = 0;
  for (int v = 0; v < 4; ++v) {
    const auto row = s.model.row(static_cast<Token>(v));
    const std::vector<double> row_expected(row.begin(), row.end());
    INFO("parent token " << v);
    // False-failure probability 1e-6 per check (at most 20 checks).
    CHECK(test::chi_square_test(first[static_cast<std::size_t>(v)], row_expected).p_value >
          test::kFalseFailureProbability);
    ++checks;
    for (int a = 0; a < 4; ++a) {
      const auto& counts = second[static_cast<std::size_t>(v * 4 + a)];
      std::int64_t total = 0;
      for (auto c : counts) total += c;
      if (total < 200) continue;
      std::vector<double> expected(4, 0.0);
      for (int b = 0; b < 4; ++b)
        if (b != a) expected[static_cast<std::size_t>(b)] = row[b] / (1.0 - row[a]);
      INFO("first child " << a);
      CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
      ++checks;
    }
  }
  CHECK(checks >= 12);  // enough conditional laws were exercised
}

TEST_CASE("RSD-S top final sequence is a sample from the draft model", "[draft][rsds]") {
  // Stochastic beam search ranks whole sequences by their truncated Gumbel values, so the best
  // final beam is an exact sample of the length-2 sequence from the draft model (Kool et al.).
  // Selecting by the untruncated value (the typo of seed 000 Alg. 9) breaks this.
  MarkovDrafts s(1, 2);
  std::vector<std::int64_t> counts(16, 0);
  for (int i = 0; i < 100000; ++i) {
    const DraftTree& tree = s.rsd_s(2, 2, i);
    const auto leaf = std::find(tree.depths.begin(), tree.depths.end(), 2) - tree.depths.begin();
    const auto path = path_of(tree, static_cast<std::int32_t>(leaf));
    ++counts[static_cast<std::size_t>(path[0] * 4 + path[1])];
  }
  // False-failure probability 1e-6.
  CHECK(test::chi_square_test(counts, two_token_law(s.model, 1)).p_value >
        test::kFalseFailureProbability);
}

TEST_CASE("RSD-S returns W distinct sequences with monotone truncated values", "[draft][rsds]") {
  const toy::NGramModel model({.vocab = 8, .order = 2, .concentration = 0.7, .seed = 5});
  toy::ToyDraftRows rows(model, {3});
  Workspace ws(rsd_s_workspace_size(6, 8));
  DraftedTree out;
  for (std::uint32_t i = 0; i < 200; ++i) {
    draft_rsd_s(6, 4, 8, rows, drafter_stream(i), out, ws);
    out.tree.validate(8);
    REQUIRE(out.size() == 24);
    std::set<std::vector<Token>> sequences;
    for (std::int32_t n = 18; n < 24; ++n) sequences.insert(path_of(out.tree, n));
    CHECK(sequences.size() == 6);
    for (std::int32_t n = 0; n < out.size(); ++n) {
      const auto parent = out.tree.parents[static_cast<std::size_t>(n)];
      const float bound = parent < 0 ? 0.0f : out.scores[static_cast<std::size_t>(parent)];
      CHECK(out.scores[static_cast<std::size_t>(n)] <= bound);
      // Levels are sorted by the truncated value.
      if (n > 0 && out.tree.depths[static_cast<std::size_t>(n)] ==
                       out.tree.depths[static_cast<std::size_t>(n - 1)]) {
        CHECK(out.scores[static_cast<std::size_t>(n)] <=
              out.scores[static_cast<std::size_t>(n - 1)]);
      }
    }
  }
}

TEST_CASE("RSD-S never drafts zero-probability tokens and stays finite", "[draft][rsds]") {
  // Rows with exact zeros and denormal-sized probabilities.
  auto rows = [](const DraftTree&, std::span<const std::int32_t> nodes, MatrixView<float> out) {
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(nodes.size()); ++r) {
      auto row = out.row(r);
      std::fill(row.begin(), row.end(), 0.0f);
      row[1] = 1e-38f;
      row[2] = 1.0f - 2e-38f;
      row[4] = 1e-38f;
    }
  };
  Workspace ws;
  DraftedTree out;
  for (std::uint32_t i = 0; i < 100; ++i) {
    draft_rsd_s(5, 3, 6, rows, drafter_stream(i), out, ws);
    out.tree.validate(6);
    for (std::int32_t n = 0; n < out.size(); ++n) {
      const auto t = out.tree.tokens[static_cast<std::size_t>(n)];
      CHECK((t == 1 || t == 2 || t == 4));
      CHECK(std::isfinite(out.scores[static_cast<std::size_t>(n)]));
      CHECK(std::isfinite(out.log_probs[static_cast<std::size_t>(n)]));
    }
    CHECK(out.tree.depths[0] == 1);
    CHECK(children_of(out.tree, kRootNode).size() == 3);
  }
}

TEST_CASE("tree drafters do not allocate workspace after warm-up", "[draft][rsds]") {
  const toy::NGramModel model({.vocab = 16, .order = 1, .concentration = 0.5, .seed = 2});
  toy::ToyDraftRows rows(model, {0});
  Workspace ws(rsd_s_workspace_size(4, 16));
  DraftedTree out;
  draft_rsd_s(4, 3, 16, rows, drafter_stream(0), out, ws);
  const auto before = ws.allocations();
  const auto capacity = out.rows.capacity();
  for (std::uint32_t i = 1; i < 20; ++i) draft_rsd_s(4, 3, 16, rows, drafter_stream(i), out, ws);
  CHECK(ws.allocations() == before);
  CHECK(out.rows.capacity() == capacity);
}

TEST_CASE("i.i.d. chains hold K independent draft sequences", "[draft][iid]") {
  const auto model = small_markov();
  toy::ToyDraftRows rows(model, {1});
  Workspace ws;
  DraftedTree out;
  std::vector<std::int64_t> first(4, 0), second(16, 0);
  for (std::uint32_t i = 0; i < 50000; ++i) {
    draft_iid_chains(3, 2, 4, rows, drafter_stream(i), out, ws);
    REQUIRE(out.size() == 6);
    for (std::int32_t c = 0; c < 3; ++c) {
      CHECK(out.tree.parents[static_cast<std::size_t>(3 + c)] == c);
      CHECK(out.has_row(c));
    }
    ++first[static_cast<std::size_t>(out.tree.tokens[2])];
    ++second[static_cast<std::size_t>(out.tree.tokens[0] * 4 + out.tree.tokens[3])];
  }
  std::vector<double> first_expected(model.row(1).begin(), model.row(1).end());
  const auto second_expected = two_token_law(model, 1);
  // False-failure probability 1e-6 each.
  CHECK(test::chi_square_test(first, first_expected).p_value > test::kFalseFailureProbability);
  CHECK(test::chi_square_test(second, second_expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("beam search equals exhaustive search when W covers every prefix", "[draft][beam]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const toy::NGramModel model({.vocab = 3, .order = 2, .concentration = 0.8, .seed = seed});
    toy::ToyDraftRows rows(model, {0});
    // Exhaustive: the most probable of the 27 sequences of length 3.
    double best = -1e300;
    std::vector<int> best_seq;
    test::for_each_tuple(3, 3, [&](std::span<const int> t) {
      std::vector<Token> ctx = {0};
      std::vector<float> row(3);
      double lp = 0.0;
      for (int x : t) {
        model.next_probabilities(ctx, row);
        lp += std::log(static_cast<double>(row[static_cast<std::size_t>(x)]));
        ctx.push_back(x);
      }
      if (lp > best) {
        best = lp;
        best_seq.assign(t.begin(), t.end());
      }
    });
    Workspace ws;
    DraftedTree search;
    BeamSearchResult result;
    beam_search({9, 3, BeamMode::kDeterministic}, 3, rows, drafter_stream(0), search, result, ws);
    REQUIRE(result.tokens.size() == 3);
    for (int i = 0; i < 3; ++i)
      CHECK(result.tokens[static_cast<std::size_t>(i)] == best_seq[static_cast<std::size_t>(i)]);
    CHECK(result.prefix_log_probs[2] == Approx(best).margin(1e-5));
    CHECK(result.prefix_log_probs[0] >= result.prefix_log_probs[1]);
  }
}

TEST_CASE("beam sampling with one beam samples from the draft model", "[draft][beam]") {
  MarkovDrafts d(3);
  BeamSearchResult result;
  std::vector<std::int64_t> counts(16, 0);
  for (std::uint32_t i = 0; i < 50000; ++i) {
    beam_search({1, 2, BeamMode::kSampling}, 4, d.rows, drafter_stream(i), d.out, result, d.ws);
    ++counts[static_cast<std::size_t>(result.tokens[0] * 4 + result.tokens[1])];
  }
  // False-failure probability 1e-6.
  CHECK(test::chi_square_test(counts, two_token_law(d.model, 3)).p_value >
        test::kFalseFailureProbability);
}

TEST_CASE("tree drafters reject bad input", "[draft][errors]") {
  const auto model = small_markov();
  toy::ToyDraftRows rows(model, {0});
  Workspace ws;
  DraftedTree out;
  BeamSearchResult best;
  const auto s = drafter_stream(0);
  CHECK_THROWS_WITH(draft_rsd_s(0, 2, 4, rows, s, out, ws), Catch::Contains("width:"));
  CHECK_THROWS_WITH(draft_rsd_s(2, 0, 4, rows, s, out, ws), Catch::Contains("depth:"));
  CHECK_THROWS_WITH(draft_rsd_s(2, 2, 0, rows, s, out, ws), Catch::Contains("vocab:"));
  const std::vector<std::int32_t> negative = {2, -1};
  CHECK_THROWS_WITH(draft_rsd_c(negative, 4, rows, s, out, ws), Catch::Contains("branching[1]"));
  const std::vector<std::int32_t> too_wide = {5};
  CHECK_THROWS_WITH(draft_rsd_c(too_wide, 4, rows, s, out, ws), Catch::Contains("branching[0]"));
  CHECK_THROWS_WITH(draft_rsd_c(std::span<const std::int32_t>(), 4, rows, s, out, ws),
                    Catch::Contains("branching:"));
  CHECK_THROWS_WITH(draft_iid_chains(0, 2, 4, rows, s, out, ws), Catch::Contains("k:"));
  CHECK_THROWS_WITH(beam_search({0, 2, BeamMode::kDeterministic}, 4, rows, s, out, best, ws),
                    Catch::Contains("width:"));
  CHECK_THROWS_WITH(beam_search({2, 0, BeamMode::kDeterministic}, 4, rows, s, out, best, ws),
                    Catch::Contains("length:"));
  auto bad_rows = [](const DraftTree&, std::span<const std::int32_t>, MatrixView<float> r) {
    for (std::int64_t i = 0; i < r.rows; ++i) std::fill(r.row(i).begin(), r.row(i).end(), 0.5f);
  };
  CHECK_THROWS_WITH(draft_rsd_s(2, 2, 4, bad_rows, s, out, ws),
                    Catch::Contains("draft_rows(node -1)"));
  CHECK_THROWS_WITH(out.row(7), Catch::Contains("node:"));
}
