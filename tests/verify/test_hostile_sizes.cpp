// SPDX-License-Identifier: MIT
// verify_tree on hostile sizes: deep trees finish in time linear in the nodes, and the walk that
// gets there draws exactly what a scan of every later node for the children of each accepted node
// draws.
#include <chrono>

#include "helpers.hpp"
#include "specdec/toy/random.hpp"

using namespace specdec;

namespace {

// Generous against the few milliseconds expected (a quadratic walk of 100,000 nodes takes seconds
// even in Release); holds under the sanitizers too.
constexpr double kTimeLimitSeconds = 2.0;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The walk as it was first written: the children of the current node are found by scanning
/// every later node. The reference the linear walk must match draw for draw.
TreeVerdict reference_walk(const Rule& rule, const std::vector<Token>& tokens,
                           const std::vector<std::int32_t>& parents,
                           const std::vector<float>& target, const std::vector<float>& draft,
                           std::int64_t vocab, const RandomStream& stream,
                           std::vector<std::int32_t>& accepted_nodes) {
  const auto v = static_cast<std::size_t>(vocab);
  std::vector<float> scratch(v);
  TreeVerdict verdict;
  std::int32_t current = -1;
  for (;;) {
    std::vector<Token> candidates;
    std::vector<std::int32_t> ids;
    for (std::size_t j = static_cast<std::size_t>(current + 1); j < tokens.size(); ++j) {
      if (parents[j] == current) {
        ids.push_back(static_cast<std::int32_t>(j));
        candidates.push_back(tokens[j]);
      }
    }
    const auto row = static_cast<std::size_t>(current + 1);
    const auto s = stream.at_node(static_cast<std::uint32_t>(current + 1));
    if (ids.empty()) {
      verdict.token = detail::sample_row(target.data() + row * v, vocab, s.uniform(0));
      verdict.bonus = true;
      return verdict;
    }
    const NodeRows<float> rows{target.data() + row * v, draft.data() + row * v, vocab};
    const auto node = detail::verify_node_unchecked(
        rule, rows, candidates.data(), static_cast<std::int32_t>(ids.size()), s, scratch.data());
    if (node.accepted < 0) {
      verdict.token = node.token;
      return verdict;
    }
    current = ids[static_cast<std::size_t>(node.accepted)];
    accepted_nodes[static_cast<std::size_t>(verdict.accepted++)] = current;
  }
}

/// A random level-ordered tree of `levels` levels whose siblings are interleaved with their
/// cousins (children of one node are not contiguous), at most three children per node and
/// distinct sibling tokens; fills `tokens` and `parents`.
void random_interleaved_tree(toy::ToyRandom& rng, std::int32_t levels, std::int64_t vocab,
                             std::vector<Token>& tokens, std::vector<std::int32_t>& parents) {
  tokens.clear();
  parents.clear();
  std::vector<std::int32_t> level = {-1};  // the nodes of the previous level
  for (std::int32_t d = 0; d < levels && !level.empty(); ++d) {
    std::vector<std::int32_t> next_parents;
    for (const auto p : level) {
      const auto count = static_cast<int>(rng.uniform() * 4.0f);  // 0 to 3 children
      for (int c = 0; c < count; ++c) next_parents.push_back(p);
    }
    // Shuffle the level so that siblings interleave with their cousins.
    for (std::size_t i = next_parents.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(rng.uniform() * static_cast<float>(i)) % i;
      std::swap(next_parents[i - 1], next_parents[j]);
    }
    level.clear();
    for (const auto p : next_parents) {
      // Distinct sibling tokens: the k-th child of p takes a token that no earlier sibling has.
      Token token =
          static_cast<Token>(rng.uniform() * static_cast<float>(vocab)) % static_cast<Token>(vocab);
      for (bool taken = true; taken;) {
        taken = false;
        for (std::size_t j = 0; j < tokens.size(); ++j) {
          if (parents[j] == p && tokens[j] == token) {
            taken = true;
            token = (token + 1) % static_cast<Token>(vocab);
          }
        }
      }
      level.push_back(static_cast<std::int32_t>(tokens.size()));
      tokens.push_back(token);
      parents.push_back(p);
    }
  }
}

/// A chain of `n` nodes (node i under node i - 1, token i mod `vocab`) and n + 1 equal uniform
/// rows for its target and draft: every test accepts (min(1, p / q) = 1).
struct LongChain {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<float> rows;
};

LongChain long_chain(std::int32_t n, std::int64_t vocab) {
  LongChain c{std::vector<Token>(static_cast<std::size_t>(n)),
              std::vector<std::int32_t>(static_cast<std::size_t>(n)),
              std::vector<float>(static_cast<std::size_t>(n + 1) * static_cast<std::size_t>(vocab),
                                 1.0f / static_cast<float>(vocab))};
  for (std::int32_t i = 0; i < n; ++i) {
    c.tokens[static_cast<std::size_t>(i)] = i % vocab;
    c.parents[static_cast<std::size_t>(i)] = i - 1;
  }
  return c;
}

}  // namespace

TEST_CASE("verify_tree walks a 100,000-node chain, every node accepted, in linear time",
          "[verify][tree][hostile]") {
  const std::int32_t n = 100000;
  const std::int64_t vocab = 8;
  const auto [tokens, parents, rows] = long_chain(n, vocab);
  std::vector<std::int32_t> accepted(n, -1);
  Workspace ws;
  // Recursive also checks that siblings differ, which must not scan every earlier node either.
  for (const Rule& rule : {Rule{MultiRound{}}, Rule{Recursive{}}}) {
    const auto start = std::chrono::steady_clock::now();
    const auto verdict = verify_tree<float>(rule, {tokens, parents}, rows, rows, vocab,
                                            RandomStream{7}, accepted, ws);
    CHECK(seconds_since(start) < kTimeLimitSeconds);
    CHECK(verdict.accepted == n);
    CHECK(verdict.bonus);
    bool in_order = true;
    for (std::int32_t i = 0; i < n; ++i) in_order &= accepted[static_cast<std::size_t>(i)] == i;
    CHECK(in_order);
  }
}

TEST_CASE("verify_tree rejects repeated RRS siblings in a 100,000-node tree in time",
          "[verify][tree][hostile]") {
  // A chain, then the last node gets two children with the same token: the check names the
  // second of them and its earlier sibling.
  const std::int32_t n = 100000;
  const std::int64_t vocab = 8;
  auto [tokens, parents, rows] = long_chain(n, vocab);
  tokens[n - 2] = tokens[n - 1] = 3;
  parents[n - 2] = parents[n - 1] = n - 3;
  std::vector<std::int32_t> accepted(n, -1);
  Workspace ws;
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(verify_tree<float>(Recursive{}, {tokens, parents}, rows, rows, vocab,
                                       RandomStream{7}, accepted, ws),
                    Catch::Contains("tokens[99999]") && Catch::Contains("sibling node 99998"));
  CHECK(seconds_since(start) < kTimeLimitSeconds);
}

TEST_CASE("verify_tree names the first node repeating a sibling, as a scan in node order would",
          "[verify][tree][hostile]") {
  // Root children 0..3 with tokens 2, 1, 2, 1: node 2 repeats node 0 first (node 3 repeats node
  // 1 later); node 4 under node 1 and node 5 under node 0 share a token but are cousins.
  const std::vector<Token> tokens = {2, 1, 2, 1, 0, 0};
  const std::vector<std::int32_t> parents = {-1, -1, -1, -1, 1, 0};
  const std::vector<float> rows(7 * 4, 1.0f / 4);
  std::vector<std::int32_t> accepted(2);
  Workspace ws;
  CHECK_THROWS_WITH(verify_tree<float>(Recursive{}, {tokens, parents}, rows, rows, 4,
                                       RandomStream{1}, accepted, ws),
                    Catch::Contains("tokens[2]") && Catch::Contains("sibling node 0"));
  // Cousins sharing a token are fine.
  const std::vector<Token> fine = {2, 1, 0, 0, 0, 0};
  const std::vector<std::int32_t> fine_parents = {-1, -1, -1, 0, 1, 2};
  CHECK_NOTHROW(verify_tree<float>(Recursive{}, {fine, fine_parents}, rows, rows, 4,
                                   RandomStream{1}, accepted, ws));
}

TEST_CASE("verify_tree's linear walk draws what scanning every later node draws",
          "[verify][tree][hostile]") {
  // Random level-ordered trees with interleaved siblings, rows where rejections happen, three
  // rules: the accepted nodes, the final token and the bonus flag match the reference walk.
  toy::ToyRandom rng(2024);
  const std::int64_t vocab = 6;
  Workspace ws;
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  int compared = 0, deep = 0;
  for (int trial = 0; trial < 300; ++trial) {
    random_interleaved_tree(rng, 6, vocab, tokens, parents);
    const auto rows = tokens.size() + 1;
    std::vector<float> target, draft;
    for (std::size_t r = 0; r < rows; ++r) {
      const auto q = toy::dirichlet(vocab, 1.0, rng);
      const auto noise = toy::dirichlet(vocab, 1.0, rng);
      for (std::int64_t x = 0; x < vocab; ++x) {
        const auto i = static_cast<std::size_t>(x);
        draft.push_back(0.9f * q[i] + 0.1f / static_cast<float>(vocab));  // positive everywhere
        target.push_back(0.8f * draft.back() + 0.2f * noise[i]);
      }
    }
    for (const Rule& rule : {Rule{MultiRound{}}, Rule{SpecTr{}}, Rule{Recursive{}}}) {
      const RandomStream stream{static_cast<std::uint64_t>(trial)};
      std::vector<std::int32_t> want(tokens.size() + 1, -1), got(tokens.size() + 1, -1);
      const auto expected =
          reference_walk(rule, tokens, parents, target, draft, vocab, stream, want);
      const auto verdict =
          verify_tree<float>(rule, {tokens, parents}, target, draft, vocab, stream, got, ws);
      REQUIRE(verdict.accepted == expected.accepted);
      REQUIRE(verdict.token == expected.token);
      REQUIRE(verdict.bonus == expected.bonus);
      REQUIRE(got == want);
      ++compared;
      deep += verdict.accepted >= 3 ? 1 : 0;
    }
  }
  CHECK(compared == 900);
  CHECK(deep > 50);  // the walks go deep enough to cross interleaved levels
}
