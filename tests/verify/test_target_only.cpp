// SPDX-License-Identifier: MIT
// Verification of drafts without draft rows (verify/target_only.hpp): exact output distributions
// of chains and trees against the target joint, Monte Carlo, batches, bad input.
#include <cmath>
#include <limits>
#include <map>

#include "helpers.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/unchecked.hpp"

using namespace specdec;

namespace target_only_tests {

/// A context-dependent target model over `vocab` tokens: the (warped) row after a prefix comes
/// from a seed hashed from it.
struct TargetModel {
  std::int64_t vocab = 0;
  std::uint64_t seed = 0;
  Warp warp{};
  mutable std::map<std::vector<Token>, std::vector<float>> cache{};

  const std::vector<float>& at(const std::vector<Token>& prefix) const {
    auto it = cache.find(prefix);
    if (it != cache.end()) return it->second;
    std::uint64_t h = seed;
    for (Token t : prefix) h = h * 1315423911ull + static_cast<std::uint64_t>(t) + 7;
    Warp w = warp;
    w.top_k = static_cast<std::int32_t>(std::min<std::int64_t>(w.top_k, vocab));
    return cache[prefix] = test::warped(toy::make_categorical_pair(vocab, h, 0.7).target, w);
  }
  double joint(const std::vector<Token>& seq) const {
    double p = 1.0;
    std::vector<Token> prefix;
    for (Token t : seq) {
      p *= at(prefix)[static_cast<std::size_t>(t)];
      prefix.push_back(t);
    }
    return p;
  }
};

std::int64_t index_of(const std::vector<Token>& s, std::int64_t vocab) {
  std::int64_t index = 0;
  for (Token t : s) index = index * vocab + t;
  return index;
}

/// The target joint over all sequences of `length` tokens, indexed by index_of.
std::vector<double> target_joint(const TargetModel& m, int length) {
  const auto count = static_cast<std::size_t>(std::pow(m.vocab, length));
  std::vector<double> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<Token> s(static_cast<std::size_t>(length));
    auto rest = static_cast<std::int64_t>(i);
    for (int j = length - 1; j >= 0; --j, rest /= m.vocab) {
      s[static_cast<std::size_t>(j)] = static_cast<Token>(rest % m.vocab);
    }
    out[i] = m.joint(s);
  }
  return out;
}

/// Adds weight * P(`prefix` extended to `length` tokens by sampling the target) to `out`.
void extend(const TargetModel& m, const std::vector<Token>& prefix, int length, double weight,
            std::vector<double>& out) {
  if (weight == 0.0) return;
  if (static_cast<int>(prefix.size()) == length) {
    out[static_cast<std::size_t>(index_of(prefix, m.vocab))] += weight;
    return;
  }
  const auto& row = m.at(prefix);
  for (Token t = 0; t < m.vocab; ++t) {
    auto next = prefix;
    next.push_back(t);
    extend(m, next, length, weight * row[static_cast<std::size_t>(t)], out);
  }
}

/// What verify_target_only does at one node, measured on the implementation with forced draws:
/// accept[k] = P(child k is accepted), correction[y] = P(all rejected and y is emitted). A test
/// draw is swept over a grid of `kGrid` midpoints while the earlier draws are pinned just below 1
/// (which rejects anything the target does not make certain); the outcome at step k depends only
/// on which earlier children were rejected, so the products are exact up to the grid's spacing.
struct NodeOutcome {
  std::vector<double> accept, correction;
};
constexpr int kGrid = 20000;
constexpr float kReject = 0.99999994f;  // the largest float below 1

NodeOutcome node_outcome(const std::vector<float>& target, const std::vector<Token>& children) {
  Workspace ws;
  const auto count = children.size();
  NodeOutcome o{std::vector<double>(count, 0.0), std::vector<double>(target.size(), 0.0)};
  std::vector<float> draws(count + 1, kReject);
  double reach = 1.0;
  for (std::size_t k = 0; k <= count && reach > 0.0; ++k) {
    std::vector<int> hits(k < count ? 1 : target.size(), 0);  // counted exactly: 0 or kGrid
    for (int g = 0; g < kGrid; ++g) {
      draws[k] = (static_cast<float>(g) + 0.5f) / kGrid;
      const auto v = verify_target_only<float>(target, children, SuppliedUniforms(draws), ws);
      if (k < count) {
        hits[0] += v.accepted == static_cast<std::int32_t>(k) ? 1 : 0;
      } else {
        REQUIRE(v.accepted == -1);
        ++hits[static_cast<std::size_t>(v.token)];
      }
    }
    draws[k] = kReject;
    if (k < count) {
      o.accept[k] = reach * hits[0] / kGrid;
      reach *= static_cast<double>(kGrid - hits[0]) / kGrid;
    } else {
      for (std::size_t y = 0; y < hits.size(); ++y) o.correction[y] = reach * hits[y] / kGrid;
    }
  }
  return o;
}

/// The exact law of verify_chain_target_only on the deterministic draft `x`, the emitted tokens
/// extended by the target to L + 1 tokens, from the node outcomes at each position.
std::vector<double> chain_law(const TargetModel& m, const std::vector<Token>& x) {
  const int length = static_cast<int>(x.size());
  std::vector<double> out(static_cast<std::size_t>(std::pow(m.vocab, length + 1)), 0.0);
  double reach = 1.0;
  std::vector<Token> prefix;
  for (int i = 0; i < length && reach > 0.0; ++i) {
    const auto o = node_outcome(m.at(prefix), {x[static_cast<std::size_t>(i)]});
    for (Token y = 0; y < m.vocab; ++y) {
      auto emitted = prefix;
      emitted.push_back(y);
      extend(m, emitted, length + 1, reach * o.correction[static_cast<std::size_t>(y)], out);
    }
    reach *= o.accept[0];
    prefix.push_back(x[static_cast<std::size_t>(i)]);
  }
  extend(m, prefix, length + 1, reach, out);  // the bonus token and nothing more
  return out;
}

/// A tree in level order with its node paths.
struct Tree {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<std::vector<Token>> paths;  // tokens from the root to node i, inclusive
  int depth = 0;

  std::int32_t add(Token t, std::int32_t parent) {
    tokens.push_back(t);
    parents.push_back(parent);
    auto path = parent < 0 ? std::vector<Token>{} : paths[static_cast<std::size_t>(parent)];
    path.push_back(t);
    depth = std::max(depth, static_cast<int>(path.size()));
    paths.push_back(path);
    return static_cast<std::int32_t>(tokens.size() - 1);
  }
  std::vector<float> rows(const TargetModel& m) const {
    std::vector<float> out = m.at({});
    for (const auto& p : paths) out.insert(out.end(), m.at(p).begin(), m.at(p).end());
    return out;
  }
};

/// Depth 3 over V = 3 with repeated tokens among siblings: root {0, 1, 0}, node 0 {2, 2, 1},
/// node 1 {0}, node 2 (a repeat: never reached) {1}, node 3 {1}, node 5 {0, 0}.
Tree repeated_tree() {
  Tree t;
  const auto a = t.add(0, -1), b = t.add(1, -1), c = t.add(0, -1);
  const auto d = t.add(2, a);
  t.add(2, a);
  const auto f = t.add(1, a);
  t.add(0, b);
  t.add(1, c);
  t.add(1, d);
  t.add(0, f);
  t.add(0, f);
  return t;
}

/// The exact law of verify_tree_target_only on `tree` (emitted tokens extended by the target to
/// depth + 1 tokens), from the node outcomes; also checks that no repeated sibling is ever taken.
std::vector<double> tree_law(const TargetModel& m, const Tree& tree) {
  const int length = tree.depth + 1;
  std::vector<double> out(static_cast<std::size_t>(std::pow(m.vocab, length)), 0.0);
  const auto walk = [&](auto&& self, std::int32_t node, double reach) -> void {
    const auto prefix =
        node < 0 ? std::vector<Token>{} : tree.paths[static_cast<std::size_t>(node)];
    std::vector<std::int32_t> ids;
    std::vector<Token> children;
    for (std::size_t i = 0; i < tree.tokens.size(); ++i) {
      if (tree.parents[i] == node) {
        ids.push_back(static_cast<std::int32_t>(i));
        children.push_back(tree.tokens[i]);
      }
    }
    if (children.empty()) {
      extend(m, prefix, length, reach, out);
      return;
    }
    const auto o = node_outcome(m.at(prefix), children);
    for (std::size_t k = 0; k < children.size(); ++k) {
      const bool repeat = std::find(children.begin(), children.begin() + static_cast<long>(k),
                                    children[k]) != children.begin() + static_cast<long>(k);
      if (repeat) CHECK(o.accept[k] == 0.0);
      if (o.accept[k] > 0.0) self(self, ids[k], reach * o.accept[k]);
    }
    for (Token y = 0; y < m.vocab; ++y) {
      auto emitted = prefix;
      emitted.push_back(y);
      extend(m, emitted, length, reach * o.correction[static_cast<std::size_t>(y)], out);
    }
  };
  walk(walk, -1, 1.0);
  return out;
}

}  // namespace target_only_tests

namespace tot = target_only_tests;

TEST_CASE("target-only nodes accept candidate k with its residual target probability",
          "[verify][target_only]") {
  // Children 1, 2, 1 of a row (0.1, 0.5, 0.3, 0.1): child 0 is accepted with 0.5, child 1 with
  // 0.3 / 0.5 of what is left, the repeat never; the rest goes to tokens 0 and 3 in proportion.
  const auto o = tot::node_outcome({0.1f, 0.5f, 0.3f, 0.1f}, {1, 2, 1});
  CHECK(o.accept[0] == Catch::Detail::Approx(0.5).margin(1e-4));
  CHECK(o.accept[1] == Catch::Detail::Approx(0.3).margin(1e-4));
  CHECK(o.accept[2] == 0.0);
  test::check_close(o.correction, std::vector<double>{0.1, 0.0, 0.0, 0.1}, 1e-4);
}

TEST_CASE("target-only chains reproduce the target joint for every draft chain",
          "[verify][target_only][exact]") {
  // Every deterministic draft of L = 1..3 tokens over V = 3 and 4 (drafts the target rules out
  // included), under warps that cut the rows.
  for (const std::int64_t vocab : {3, 4}) {
    for (int length = 1; length <= 3; ++length) {
      const tot::TargetModel m{vocab, static_cast<std::uint64_t>(100 * vocab + length),
                               test::test_warps()[static_cast<std::size_t>(length) % 5]};
      const auto joint = tot::target_joint(m, length + 1);
      const auto chains = static_cast<std::int64_t>(std::pow(vocab, length));
      for (std::int64_t c = 0; c < chains; c += vocab == 4 && length == 3 ? 5 : 1) {
        std::vector<Token> x;
        for (std::int64_t r = c, i = 0; i < length; ++i, r /= vocab) {
          x.push_back(static_cast<Token>(r % vocab));
        }
        INFO("vocab " << vocab << " L " << length << " chain " << c);
        test::check_close(tot::chain_law(m, x), joint, 1e-3);
      }
    }
  }
}

TEST_CASE("target-only trees with repeated sibling tokens reproduce the target joint",
          "[verify][target_only][exact]") {
  const auto tree = tot::repeated_tree();
  for (const auto& warp : {Warp{}, Warp{.top_k = 2}}) {
    const tot::TargetModel m{3, 41, warp};
    test::check_close(tot::tree_law(m, tree), tot::target_joint(m, tree.depth + 1), 1e-3);
  }
}

TEST_CASE("target-only chains sample the target joint", "[verify][target_only][mc]") {
  // False-failure probability: kFalseFailureProbability. Drafts alternate between a likely and an
  // unlikely chain so that both acceptances and corrections are exercised.
  const tot::TargetModel m{3, 7, Warp{.temperature = 0.8f}};
  const std::vector<std::vector<Token>> drafts = {{0, 1}, {2, 2}};
  std::vector<std::int64_t> counts(27, 0);
  Workspace ws;
  std::vector<Token> out(3);
  for (std::uint32_t s = 0; s < 20000; ++s) {
    const auto& x = drafts[s % 2];
    std::vector<float> rows;
    for (std::size_t i = 0; i <= x.size(); ++i) {
      const auto& r = m.at(std::vector<Token>(x.begin(), x.begin() + static_cast<long>(i)));
      rows.insert(rows.end(), r.begin(), r.end());
    }
    const auto v = verify_chain_target_only<float>(
        rows, x, 3, RandomStream{9, s, 0, 0, Domain::kVerify}, out, ws);
    REQUIRE(v.emitted == v.accepted + 1);
    std::vector<Token> seq(out.begin(), out.begin() + v.emitted);
    for (std::uint32_t i = 0; seq.size() < 3; ++i) {
      seq.push_back(sample(m.at(seq), RandomStream{9, s, 0, 0, Domain::kSample}.uniform(i)));
    }
    ++counts[static_cast<std::size_t>(tot::index_of(seq, 3))];
  }
  CHECK(test::chi_square_test(counts, tot::target_joint(m, 3)).p_value >
        test::kFalseFailureProbability);
}

TEST_CASE("target-only trees sample the target joint", "[verify][target_only][mc]") {
  // False-failure probability: kFalseFailureProbability.
  const auto tree = tot::repeated_tree();
  const tot::TargetModel m{3, 43, Warp{}};
  const auto rows = tree.rows(m);
  std::vector<std::int64_t> counts(81, 0);
  Workspace ws;
  std::vector<std::int32_t> accepted(3);
  for (std::uint32_t s = 0; s < 20000; ++s) {
    const auto v =
        verify_tree_target_only<float>({tree.tokens, tree.parents}, rows, 3,
                                       RandomStream{10, s, 0, 0, Domain::kVerify}, accepted, ws);
    std::vector<Token> seq;
    for (std::int32_t i = 0; i < v.accepted; ++i) {
      seq.push_back(tree.tokens[static_cast<std::size_t>(accepted[static_cast<std::size_t>(i)])]);
    }
    seq.push_back(v.token);
    for (std::uint32_t i = 0; seq.size() < 4; ++i) {
      seq.push_back(sample(m.at(seq), RandomStream{10, s, 0, 0, Domain::kSample}.uniform(i)));
    }
    ++counts[static_cast<std::size_t>(tot::index_of(seq, 3))];
  }
  CHECK(test::chi_square_test(counts, tot::target_joint(m, 4)).p_value >
        test::kFalseFailureProbability);
}

TEST_CASE("target-only chains accept a draft the target makes certain and reject one it rules out",
          "[verify][target_only]") {
  const std::vector<float> rows = {0.0f, 1.0f, 0.0f,   // position 0: token 1 certain
                                   0.5f, 0.0f, 0.5f,   // position 1: token 1 ruled out
                                   1.0f, 0.0f, 0.0f};  // never reached
  const std::vector<Token> x = {1, 1};
  Workspace ws;
  std::vector<Token> out(3);
  for (std::uint32_t s = 0; s < 32; ++s) {
    const auto v = verify_chain_target_only<float>(rows, x, 3, RandomStream{s}, out, ws);
    REQUIRE(v.accepted == 1);
    CHECK(out[0] == 1);
    CHECK(out[1] != 1);
  }
}

TEST_CASE("target-only batches equal the single-sequence calls, zero drafts included",
          "[verify][target_only][batch]") {
  const std::int64_t vocab = 5;
  const std::vector<std::int32_t> offsets = {0, 2, 2, 5};  // gammas 2, 0, 3
  const std::vector<Token> tokens = {1, 4, 0, 3, 3};
  std::vector<float> rows;
  for (int r = 0; r < 8; ++r) {
    const auto row = toy::make_categorical_pair(vocab, 500 + r).target;
    rows.insert(rows.end(), row.begin(), row.end());
  }
  Workspace ws;
  for (std::uint32_t seed = 0; seed < 16; ++seed) {
    std::vector<RandomStream> streams;
    for (std::uint32_t b = 0; b < 3; ++b) streams.push_back(RandomStream{seed, b});
    std::vector<Token> emitted(8, 99);
    std::vector<std::int32_t> accepted(3, -5);
    verify_chain_batch_target_only(backend::cpu,
                                   ChainBatchArgs{.draft_offsets = offsets,
                                                  .target_rows = {rows.data(), 8, vocab},
                                                  .draft_tokens = tokens,
                                                  .streams = streams,
                                                  .emitted = emitted,
                                                  .accepted = accepted},
                                   ws);
    INFO("seed " << seed);
    test::check_chain_batch_sequences(
        offsets, emitted, accepted,
        [&](std::size_t b, std::size_t first, std::size_t gamma, std::span<Token> want) {
          return verify_chain_target_only<float>(
              std::span<const float>(rows).subspan((first + b) * 5, (gamma + 1) * 5),
              std::span<const Token>(tokens).subspan(first, gamma), vocab, streams[b], want, ws);
        });
  }
}

TEST_CASE("target-only tree batches equal the single-tree calls", "[verify][target_only][batch]") {
  const auto tree = tot::repeated_tree();
  const tot::TargetModel m{3, 45, Warp{}};
  const auto one = tree.rows(m);
  const auto n = static_cast<std::int32_t>(tree.tokens.size());
  // Tree 0 is the repeated tree, tree 1 has no nodes (a bonus token from its root row).
  const std::vector<std::int32_t> offsets = {0, n, n};
  std::vector<float> rows = one;
  rows.insert(rows.end(), one.begin(), one.begin() + 3);
  Workspace ws;
  for (std::uint32_t seed = 0; seed < 16; ++seed) {
    const std::vector<RandomStream> streams = {RandomStream{seed, 0}, RandomStream{seed, 1}};
    std::vector<std::int32_t> nodes(static_cast<std::size_t>(n), -1), accepted(2);
    std::vector<Token> final_tokens(2);
    std::vector<std::uint8_t> bonus(2);
    verify_tree_batch_target_only(backend::cpu,
                                  TreeBatchArgs{.node_offsets = offsets,
                                                .trees = {tree.tokens, tree.parents},
                                                .target_rows = {rows.data(), n + 2, 3},
                                                .streams = streams,
                                                .accepted_nodes = nodes,
                                                .accepted = accepted,
                                                .final_tokens = final_tokens,
                                                .bonus = bonus},
                                  ws);
    std::vector<std::int32_t> want(3);
    const auto v =
        verify_tree_target_only<float>({tree.tokens, tree.parents}, one, 3, streams[0], want, ws);
    CHECK(accepted[0] == v.accepted);
    CHECK(final_tokens[0] == v.token);
    CHECK(bonus[0] == (v.bonus ? 1 : 0));
    for (std::int32_t i = 0; i < v.accepted; ++i)
      CHECK(nodes[static_cast<std::size_t>(i)] == want[static_cast<std::size_t>(i)]);
    CHECK(accepted[1] == 0);
    CHECK(bonus[1] == 1);
  }
}

TEST_CASE("unchecked target-only chains and trees equal the checked calls",
          "[verify][target_only][unchecked]") {
  const auto tree = tot::repeated_tree();
  const tot::TargetModel m{3, 47, Warp{}};
  const auto rows = tree.rows(m);
  const std::vector<Token> x = {tree.tokens[0], tree.tokens[3], tree.tokens[8]};
  std::vector<float> chain_rows;
  for (std::size_t i = 0; i <= x.size(); ++i) {
    const auto& r = m.at(std::vector<Token>(x.begin(), x.begin() + static_cast<long>(i)));
    chain_rows.insert(chain_rows.end(), r.begin(), r.end());
  }
  Workspace ws;
  std::vector<float> scratch(3);
  for (std::uint32_t seed = 0; seed < 16; ++seed) {
    std::vector<Token> want(4), got(4);
    const auto checked =
        verify_chain_target_only<float>(chain_rows, x, 3, RandomStream{seed}, want, ws);
    const auto fast = unchecked::verify_chain_target_only(
        ChainRows<float>{
            .target = chain_rows.data(), .draft_tokens = x.data(), .length = 3, .vocab = 3},
        RandomStream{seed}, got.data(), scratch.data());
    CHECK(fast.accepted == checked.accepted);
    CHECK(got == want);
    std::vector<std::int32_t> want_nodes(3, -1), got_nodes(12, -1), ids(12);
    std::vector<Token> candidates(12);
    const auto t1 = verify_tree_target_only<float>({tree.tokens, tree.parents}, rows, 3,
                                                   RandomStream{seed}, want_nodes, ws);
    const auto t2 = unchecked::verify_tree_target_only(
        {tree.tokens, tree.parents}, TreeRows<float>{.target = rows.data(), .vocab = 3},
        RandomStream{seed},
        TreeBuffers{.accepted_nodes = got_nodes.data(),
                    .candidates = candidates.data(),
                    .ids = ids.data(),
                    .scratch = scratch.data()});
    CHECK(t1.accepted == t2.accepted);
    CHECK(t1.token == t2.token);
    CHECK(std::equal(want_nodes.begin(), want_nodes.begin() + t1.accepted, got_nodes.begin()));
  }
}

TEST_CASE("target-only verification names bad arguments", "[verify][target_only][bad_input]") {
  const std::vector<float> rows = {0.2f, 0.3f, 0.5f, 0.6f, 0.2f, 0.2f, 0.1f, 0.1f, 0.8f};
  Workspace ws;
  std::vector<Token> out(3);
  const RandomStream stream{1};
  const auto chain = [&](std::vector<float> r, std::vector<Token> x, std::int64_t vocab,
                         std::size_t out_size = 3) {
    std::vector<Token> o(out_size);
    verify_chain_target_only<float>(r, x, vocab, stream, o, ws);
  };
  // A -1 placeholder is reported before any row is read.
  CHECK_THROWS_WITH(chain(rows, {0, -1}, 3), Catch::Contains("draft_tokens[1]") &&
                                                 Catch::Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(chain(rows, {3, 0}, 3), Catch::Contains("draft_tokens[0]"));
  CHECK_THROWS_WITH(chain(rows, {0}, 3), Catch::Contains("target_rows"));
  CHECK_THROWS_WITH(chain(rows, {0, 1}, 3, 2), Catch::StartsWith("out"));
  CHECK_THROWS_WITH(chain(rows, {0, 1}, 0), Catch::StartsWith("vocab"));
  auto nan_rows = rows;
  nan_rows[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(chain(nan_rows, {0, 1}, 3), Catch::Contains("target_rows[0]"));
  std::vector<std::int32_t> accepted(2);
  const std::vector<Token> tokens = {0, 1};
  const std::vector<std::int32_t> bad_parents = {-1, 1};
  CHECK_THROWS_WITH(
      verify_tree_target_only<float>({tokens, bad_parents}, rows, 3, stream, accepted, ws),
      Catch::Contains("parents[1]"));
  const std::vector<std::int32_t> parents = {-1, 0};
  CHECK_THROWS_WITH(
      verify_tree_target_only<float>({tokens, parents}, nan_rows, 3, stream, accepted, ws),
      Catch::Contains("target_rows[0]"));
  const std::vector<Token> placeholder = {0, -1};
  CHECK_THROWS_WITH(
      verify_tree_target_only<float>({placeholder, parents}, rows, 3, stream, accepted, ws),
      Catch::Contains("tokens[1]"));
  CHECK_THROWS_WITH(verify_target_only<float>(std::span<const float>(rows).subspan(0, 3),
                                              std::vector<Token>{}, stream, ws),
                    Catch::StartsWith("candidates"));
}

TEST_CASE("target-only batches reject draft rows and name the sequence",
          "[verify][target_only][batch][bad_input]") {
  const std::vector<float> rows = {0.2f, 0.3f, 0.5f, 0.6f, 0.2f, 0.2f, 0.1f, 0.1f, 0.8f};
  const std::vector<std::int32_t> offsets = {0, 1, 1};
  const std::vector<RandomStream> streams = {RandomStream{1}, RandomStream{2}};
  std::vector<Token> emitted(3);
  std::vector<std::int32_t> accepted(2);
  Workspace ws;
  const auto run = [&](std::vector<Token> tokens, MatrixView<const float> draft) {
    verify_chain_batch_target_only(backend::cpu,
                                   ChainBatchArgs{.draft_offsets = offsets,
                                                  .target_rows = {rows.data(), 3, 3},
                                                  .draft_rows = draft,
                                                  .draft_tokens = tokens,
                                                  .streams = streams,
                                                  .emitted = emitted,
                                                  .accepted = accepted},
                                   ws);
  };
  CHECK_THROWS_WITH(run({0}, {rows.data(), 1, 3}), Catch::StartsWith("draft_rows"));
  CHECK_THROWS_WITH(run({-1}, {}), Catch::Contains("draft_tokens[0][0]"));
  CHECK_NOTHROW(run({2}, {}));
}

TEST_CASE("at temperature 0 target-only chains and trees are greedy matching",
          "[verify][target_only][greedy]") {
  // Rows warped at T = 0 are one-hot on the argmax: the walks then emit what Greedy emits.
  const tot::TargetModel m{4, 49, Warp{.temperature = 0.0f}};
  Workspace ws;
  for (std::int64_t c = 0; c < 64; ++c) {
    const std::vector<Token> x = {static_cast<Token>(c % 4), static_cast<Token>(c / 4 % 4),
                                  static_cast<Token>(c / 16)};
    std::vector<float> rows;
    for (std::size_t i = 0; i <= x.size(); ++i) {
      const auto& r = m.at(std::vector<Token>(x.begin(), x.begin() + static_cast<long>(i)));
      rows.insert(rows.end(), r.begin(), r.end());
    }
    const std::vector<float> unused(12, 0.25f);
    std::vector<Token> greedy(4), target_only(4);
    const RandomStream stream{static_cast<std::uint64_t>(c)};
    const auto g = verify_chain<float>(Greedy{}, rows, unused, x, 4, stream, greedy, ws);
    const auto t = verify_chain_target_only<float>(rows, x, 4, stream, target_only, ws);
    INFO("chain " << c);
    REQUIRE(t.accepted == g.accepted);
    CHECK(std::equal(greedy.begin(), greedy.begin() + g.emitted, target_only.begin()));
  }
  const auto tree = tot::repeated_tree();
  const tot::TargetModel m3{3, 51, Warp{.temperature = 0.0f}};
  const auto rows = tree.rows(m3);
  const std::vector<float> unused(rows.size(), 1.0f / 3.0f);
  std::vector<std::int32_t> greedy(3), target_only(3);
  for (std::uint32_t s = 0; s < 8; ++s) {
    const auto g = verify_tree<float>(Greedy{}, {tree.tokens, tree.parents}, rows, unused, 3,
                                      RandomStream{s}, greedy, ws);
    const auto t = verify_tree_target_only<float>({tree.tokens, tree.parents}, rows, 3,
                                                  RandomStream{s}, target_only, ws);
    REQUIRE(t.accepted == g.accepted);
    CHECK(t.token == g.token);
    CHECK(std::equal(greedy.begin(), greedy.begin() + g.accepted, target_only.begin()));
  }
}
