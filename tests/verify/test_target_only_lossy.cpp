// SPDX-License-Identifier: MIT
// Lossy target-only trees (verify/target_only_lossy.hpp): SGLang's threshold relaxation against
// the law it claims (the target at thresholds (1, 1)), typical acceptance without draft rows.
#include <cmath>
#include <map>

#include "helpers.hpp"

using namespace specdec;

namespace target_only_lossy_tests {

/// What one node emits: accept[k] = P(child k is taken), correction[y] = P(all rejected, y).
struct Law {
  std::vector<double> accept, correction;
};

constexpr int kCoinGrid = 20000;

/// The law of detail::thresholded_row measured on the implementation: the coin swept over a grid
/// of midpoints (the final uniform pinned), then the final uniform swept with a coin of 1, which
/// rejects every child unless the thresholds accept one whatever the coin.
Law measured_law(const std::vector<float>& row, const std::vector<Token>& children,
                 AcceptanceThresholds t) {
  const auto vocab = static_cast<std::int64_t>(row.size());
  const auto count = static_cast<std::int32_t>(children.size());
  std::vector<float> scratch(row.size());
  Law law{std::vector<double>(children.size(), 0.0), std::vector<double>(row.size(), 0.0)};
  int rejected = 0;
  for (int g = 0; g < kCoinGrid; ++g) {
    const float coin = (static_cast<float>(g) + 0.5f) / kCoinGrid;
    const auto v = detail::thresholded_row(row.data(), nullptr, vocab, children.data(), count, t,
                                           {coin, 0.5f}, scratch.data());
    if (v.accepted >= 0) {
      law.accept[static_cast<std::size_t>(v.accepted)] += 1.0 / kCoinGrid;
    } else {
      ++rejected;
    }
  }
  if (rejected == 0) return law;
  for (int g = 0; g < kCoinGrid; ++g) {
    const float u = (static_cast<float>(g) + 0.5f) / kCoinGrid;
    const auto v = detail::thresholded_row(row.data(), nullptr, vocab, children.data(), count, t,
                                           {1.0f, u}, scratch.data());
    REQUIRE(v.accepted == -1);
    law.correction[static_cast<std::size_t>(v.token)] +=
        static_cast<double>(rejected) / kCoinGrid / kCoinGrid;
  }
  return law;
}

/// The law the relaxation claims: children tried in order, repeats skipped; S_k the mass of the
/// distinct tokens tried up to child k. Child k takes min(1, S_k / acc) - min(1, S_(k-1) / acc),
/// or everything left when p(x_k) >= single; what remains goes to the target without the
/// children, renormalised.
Law claimed_law(const std::vector<float>& row, const std::vector<Token>& children,
                AcceptanceThresholds t) {
  Law law{std::vector<double>(children.size(), 0.0), std::vector<double>(row.size(), 0.0)};
  const double acc = std::max(static_cast<double>(t.acc), 1e-9);
  double mass = 0.0, taken = 0.0;
  for (std::size_t k = 0; k < children.size(); ++k) {
    const auto x = static_cast<std::size_t>(children[k]);
    if (std::find(children.begin(), children.begin() + static_cast<long>(k), children[k]) !=
        children.begin() + static_cast<long>(k)) {
      continue;
    }
    mass += row[x];
    if (row[x] >= t.single) {
      law.accept[k] = 1.0 - taken;
      return law;
    }
    const double upto = std::min(1.0, mass / acc);
    law.accept[k] = upto - taken;
    taken = upto;
  }
  double rest = 0.0;
  for (std::size_t y = 0; y < row.size(); ++y) {
    if (std::find(children.begin(), children.end(), static_cast<Token>(y)) == children.end()) {
      rest += row[y];
    }
  }
  for (std::size_t y = 0; y < row.size(); ++y) {
    if (std::find(children.begin(), children.end(), static_cast<Token>(y)) == children.end()) {
      law.correction[y] = (1.0 - taken) * row[y] / rest;
    }
  }
  return law;
}

/// A context-dependent target over 3 tokens: the row after a prefix comes from a hash of it.
const std::vector<float>& model_row(const std::vector<Token>& prefix) {
  static std::map<std::vector<Token>, std::vector<float>> cache;
  auto it = cache.find(prefix);
  if (it != cache.end()) return it->second;
  std::uint64_t h = 77;
  for (Token t : prefix) h = h * 1315423911ull + static_cast<std::uint64_t>(t) + 7;
  return cache[prefix] = toy::make_categorical_pair(3, h, 0.7).target;
}

/// Root children {0, 1, 0} (a repeat), node 0's {2, 2} (a repeat), node 1's {0}.
struct SmallTree {
  std::vector<Token> tokens = {0, 1, 0, 2, 2, 0};
  std::vector<std::int32_t> parents = {-1, -1, -1, 0, 0, 1};
  std::vector<std::vector<Token>> paths = {{0}, {1}, {0}, {0, 2}, {0, 2}, {1, 0}};
  std::vector<float> rows() const {
    std::vector<float> out = model_row({});
    for (const auto& p : paths) out.insert(out.end(), model_row(p).begin(), model_row(p).end());
    return out;
  }
};

}  // namespace target_only_lossy_tests

namespace tol = target_only_lossy_tests;

TEST_CASE("thresholded nodes at (1, 1) emit exactly the target, repeated children included",
          "[verify][target_only][lossy][exact]") {
  const std::vector<std::vector<Token>> child_sets = {{1}, {2, 0}, {1, 1, 3}, {3, 2, 1, 0}, {0, 0}};
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    const auto row = toy::make_categorical_pair(4, 900 + seed).target;
    for (const auto& children : child_sets) {
      const auto law = tol::measured_law(row, children, {});
      std::vector<double> emitted = law.correction;
      for (std::size_t k = 0; k < children.size(); ++k) {
        emitted[static_cast<std::size_t>(children[k])] += law.accept[k];
      }
      INFO("seed " << seed << " children " << children.size());
      test::check_close(emitted, std::vector<double>(row.begin(), row.end()), 3.0 / tol::kCoinGrid);
    }
  }
}

TEST_CASE("thresholded nodes follow the law the relaxation claims",
          "[verify][target_only][lossy][exact]") {
  const std::vector<AcceptanceThresholds> settings = {{.single = 0.0f, .acc = 0.0f},
                                                      {.single = 0.3f, .acc = 1.0f},
                                                      {.single = 1.0f, .acc = 0.5f},
                                                      {.single = 0.4f, .acc = 0.7f},
                                                      {.single = 0.9f, .acc = 0.2f}};
  const std::vector<std::vector<Token>> child_sets = {{1}, {2, 0}, {1, 1, 3}, {3, 2, 1}};
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    const auto row = toy::make_categorical_pair(4, 950 + seed, 0.5).target;
    for (const auto& t : settings) {
      for (const auto& children : child_sets) {
        const auto got = tol::measured_law(row, children, t);
        const auto want = tol::claimed_law(row, children, t);
        INFO("seed " << seed << " single " << t.single << " acc " << t.acc);
        test::check_close(got.accept, want.accept, 3.0 / tol::kCoinGrid);
        test::check_close(got.correction, want.correction, 3.0 / tol::kCoinGrid);
      }
    }
  }
}

TEST_CASE("thresholded trees at (1, 1) sample the target joint",
          "[verify][target_only][lossy][mc]") {
  // False-failure probability: kFalseFailureProbability.
  const tol::SmallTree tree;
  const auto rows = tree.rows();
  std::vector<double> joint(27, 0.0);
  for (int i = 0; i < 27; ++i) {
    const std::vector<Token> s = {i / 9, i / 3 % 3, i % 3};
    joint[static_cast<std::size_t>(i)] = tol::model_row({})[s[0]] * tol::model_row({s[0]})[s[1]] *
                                         tol::model_row({s[0], s[1]})[s[2]];
  }
  std::vector<std::int64_t> counts(27, 0);
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  const auto runs = test::monte_carlo_runs(30000);
  for (std::uint32_t r = 0; r < runs; ++r) {
    const auto v = verify_tree_target_only_thresholded<float>(
        {tree.tokens, tree.parents}, rows, 3, {}, RandomStream{12, r}, accepted, ws);
    std::vector<Token> seq;
    for (std::int32_t i = 0; i < v.accepted; ++i) {
      seq.push_back(tree.tokens[static_cast<std::size_t>(accepted[static_cast<std::size_t>(i)])]);
    }
    seq.push_back(v.token);
    for (std::uint32_t i = 0; seq.size() < 3; ++i) {
      seq.push_back(
          sample(tol::model_row(seq), RandomStream{12, r, 0, 0, Domain::kSample}.uniform(i)));
    }
    ++counts[static_cast<std::size_t>(seq[0] * 9 + seq[1] * 3 + seq[2])];
  }
  CHECK(test::chi_square_test(counts, joint).p_value > test::kFalseFailureProbability);
}

TEST_CASE("thresholded trees at (0, 0) follow first children to a leaf",
          "[verify][target_only][lossy]") {
  // SGLang's (0, 0) setting accepts the first child whatever the target says.
  const tol::SmallTree tree;
  const auto rows = tree.rows();
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  for (std::uint32_t s = 0; s < 16; ++s) {
    const auto v = verify_tree_target_only_thresholded<float>({tree.tokens, tree.parents}, rows, 3,
                                                              {.single = 0.0f, .acc = 0.0f},
                                                              RandomStream{s}, accepted, ws);
    REQUIRE(v.accepted == 2);
    CHECK(accepted[0] == 0);
    CHECK(accepted[1] == 3);
    CHECK(v.bonus);
  }
}

TEST_CASE("thresholded trees with supplied coins equal the stream walk drawing the same coins",
          "[verify][target_only][lossy]") {
  const tol::SmallTree tree;
  const auto rows = tree.rows();
  Workspace ws;
  std::vector<std::int32_t> a(2), b(2);
  for (std::uint32_t s = 0; s < 32; ++s) {
    const RandomStream stream{s, 3};
    std::vector<float> coins(7);
    for (std::uint32_t r = 0; r < 7; ++r) coins[r] = stream.at_node(r).uniform(0);
    const AcceptanceThresholds t{.single = 0.6f, .acc = 0.8f};
    const auto x = verify_tree_target_only_thresholded<float>({tree.tokens, tree.parents}, rows, 3,
                                                              t, stream, a, ws);
    const auto y = verify_tree_target_only_thresholded<float>(
        {tree.tokens, tree.parents}, rows, 3, t,
        SuppliedCoins{.node_coins = coins, .final_uniform = stream.at_node(0).uniform(1)}, b, ws);
    REQUIRE(x.accepted == y.accepted);
    CHECK(x.token == y.token);
    CHECK(x.bonus == y.bonus);
    CHECK(std::equal(a.begin(), a.begin() + x.accepted, b.begin()));
  }
}

TEST_CASE("typical acceptance over target-only trees walks as verify_tree with Typical",
          "[verify][target_only][lossy][typical]") {
  // Typical acceptance reads no draft row: any draft rows give verify_tree the same walk and
  // draws. Its claim: the first child above min(epsilon, delta exp(-H)) is taken.
  const tol::SmallTree tree;
  const auto rows = tree.rows();
  const std::vector<float> drafts(rows.size(), 1.0f / 3.0f);
  Workspace ws;
  std::vector<std::int32_t> a(2), b(2);
  for (const Typical rule : {Typical{}, Typical{.epsilon = 0.09f, .delta = 0.3f},
                             Typical{.epsilon = 1.0f, .delta = 10.0f}}) {
    for (std::uint32_t s = 0; s < 32; ++s) {
      const RandomStream stream{s, 5};
      const auto x = verify_tree_target_only_typical<float>({tree.tokens, tree.parents}, rows, 3,
                                                            rule, stream, a, ws);
      const auto y =
          verify_tree<float>(rule, {tree.tokens, tree.parents}, rows, drafts, 3, stream, b, ws);
      REQUIRE(x.accepted == y.accepted);
      CHECK(x.token == y.token);
      CHECK(std::equal(a.begin(), a.begin() + x.accepted, b.begin()));
      if (x.accepted > 0) {
        const auto& root = tol::model_row({});
        const float h = detail::row_entropy(root.data(), 3);
        const float threshold = std::min(rule.epsilon, rule.delta * std::exp(-h));
        std::size_t first = 0;
        while (!(root[static_cast<std::size_t>(tree.tokens[first])] > threshold)) ++first;
        CHECK(a[0] == static_cast<std::int32_t>(first));
      }
    }
  }
}

TEST_CASE("lossy target-only trees name bad arguments", "[verify][target_only][lossy][bad_input]") {
  const tol::SmallTree tree;
  const auto rows = tree.rows();
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  const auto run = [&](AcceptanceThresholds t) {
    verify_tree_target_only_thresholded<float>({tree.tokens, tree.parents}, rows, 3, t,
                                               RandomStream{1}, accepted, ws);
  };
  CHECK_THROWS_WITH(run({.single = 1.5f}), Catch::StartsWith("threshold_single"));
  CHECK_THROWS_WITH(run({.acc = -0.1f}), Catch::StartsWith("threshold_acc"));
  CHECK_THROWS_WITH(run({.acc = std::nanf("")}), Catch::StartsWith("threshold_acc"));
  const std::vector<float> coins(7, 0.5f), short_coins(6, 0.5f),
      bad_coins = {0.5f, 0.5f, 2.0f, 0.5f, 0.5f, 0.5f, 0.5f};
  const auto supplied = [&](const std::vector<float>& c, float last) {
    verify_tree_target_only_thresholded<float>({tree.tokens, tree.parents}, rows, 3, {},
                                               SuppliedCoins{c, last}, accepted, ws);
  };
  CHECK_NOTHROW(supplied(coins, 0.5f));
  CHECK_THROWS_WITH(supplied(short_coins, 0.5f), Catch::StartsWith("coins.node_coins"));
  CHECK_THROWS_WITH(supplied(bad_coins, 0.5f), Catch::StartsWith("coins.node_coins[2]"));
  CHECK_THROWS_WITH(supplied(coins, 1.5f), Catch::StartsWith("coins.final_uniform"));
  std::vector<std::int32_t> too_small(1);
  CHECK_THROWS_WITH(verify_tree_target_only_typical<float>({tree.tokens, tree.parents}, rows, 3,
                                                           Typical{.epsilon = 2.0f},
                                                           RandomStream{1}, accepted, ws),
                    Catch::StartsWith("epsilon"));
  CHECK_THROWS_WITH(
      verify_tree_target_only_typical<float>({tree.tokens, tree.parents}, rows, 3, Typical{},
                                             RandomStream{1}, too_small, ws),
      Catch::StartsWith("accepted_nodes"));
}
