// SPDX-License-Identifier: MIT
// The exact law of constrained verification at V = 6: every draft (a chain of 3 tokens, a tree
// of depth 3) is enumerated with its probability, each position's accept and correction law
// taken from the rows the library transforms (rejection on chains, RRS on trees), and the
// emitted tokens, extended by sampling the target, compared with the target sampled
// autoregressively under the same constraints (transformed by the reference). Each transform
// alone and all together, the draft transformed and not, two warps. Then the verifiers
// themselves against the enumerated law of the emitted tokens: chi-square at 1e-6.
#include <cmath>
#include <map>

#include "constraints_law.hpp"
#include "helpers.hpp"
#include "specdec/verify/exact.hpp"

using namespace specdec;
using namespace specdec::test::exact_law;

namespace {

// One node's outcome under `rule` given its candidates (distinct): the probability each
// candidate is accepted, and the correction law (mass over the other tokens).
struct NodeOutcome {
  std::vector<double> accept;
  std::vector<double> correction;
};

NodeOutcome node_outcome(const Rule& rule, const std::vector<float>& p, const std::vector<float>& q,
                         const std::vector<std::int32_t>& tuple) {
  const detail::ExactRows rows{
      .target = normalised(p), .draft = normalised(q), .raw_target = {}, .pi = {}};
  std::vector<double> out(kV, 0.0);
  const double accepted = detail::exact_outcome(rule, rows, tuple, 1.0, out);
  // A rejected candidate has no correction mass (its residual entry is 0), so out at a candidate
  // is its acceptance; one candidate: the returned acceptance itself.
  NodeOutcome o{{}, out};
  for (const auto x : tuple) {
    o.accept.push_back(tuple.size() == 1 ? accepted : out[static_cast<std::size_t>(x)]);
    o.correction[static_cast<std::size_t>(x)] -= o.accept.back();
  }
  return o;
}

// The law of a chain's emitted tokens (the accepted draft, then the correction or bonus token):
// every draft of kLength tokens with its probability.
Law chain_law(Rows& rows) {
  Law law;
  const auto walk = [&](auto&& self, const std::vector<Token>& drafted, double weight) -> void {
    if (drafted.size() < static_cast<std::size_t>(kLength)) {
      const auto q = normalised(rows.draft_row(drafted));
      for (Token x = 0; x < kVocab; ++x) {
        if (q[static_cast<std::size_t>(x)] > 0.0) self(self, plus(drafted, x), weight * q[x]);
      }
      return;
    }
    double reach = weight;
    std::vector<Token> prefix;
    for (const Token x : drafted) {
      const auto o =
          node_outcome(Rejection{}, rows.target_library(prefix), rows.draft_row(prefix), {x});
      for (Token y = 0; y < kVocab; ++y) {
        const double c = o.correction[static_cast<std::size_t>(y)];
        if (c > 0.0) law[plus(prefix, y)] += reach * c;
      }
      reach *= o.accept[0];
      if (reach == 0.0) return;
      prefix.push_back(x);
    }
    const auto bonus = normalised(rows.target_library(prefix));
    for (Token y = 0; y < kVocab; ++y) {
      if (bonus[static_cast<std::size_t>(y)] > 0.0) law[plus(prefix, y)] += reach * bonus[y];
    }
  };
  walk(walk, {}, 1.0);
  return law;
}

// The tree's shape: children per node at each depth (at most; fewer where the draft row has
// fewer tokens), drawn without replacement from the parent's draft row.
constexpr std::int32_t kBranching[kLength] = {2, 2, 1};

std::int32_t support(const std::vector<float>& row) {
  std::int32_t n = 0;
  for (const float x : row) n += x > 0.0f ? 1 : 0;
  return n;
}

// The law of a tree walk's emitted tokens under RRS: every candidate tuple at each node with
// its probability, an accepted child continuing into its own (independent) subtree.
void tree_law(Rows& rows, const std::vector<Token>& prefix, double weight, Law& law) {
  const auto& p = rows.target_library(prefix);
  const auto depth = prefix.size();
  if (depth == static_cast<std::size_t>(kLength)) {
    const auto bonus = normalised(p);
    for (Token y = 0; y < kVocab; ++y) {
      if (bonus[static_cast<std::size_t>(y)] > 0.0) law[plus(prefix, y)] += weight * bonus[y];
    }
    return;
  }
  const auto& q = rows.draft_row(prefix);
  const auto qd = normalised(q);
  const auto k = std::min(kBranching[depth], support(q));
  std::vector<std::int32_t> tuple;
  const auto walk = [&](auto&& self, double w, double removed) -> void {
    if (std::ssize(tuple) == k) {
      const auto o = node_outcome(Recursive{}, p, q, tuple);
      for (std::size_t j = 0; j < tuple.size(); ++j) {
        if (o.accept[j] > 0.0) tree_law(rows, plus(prefix, tuple[j]), w * o.accept[j], law);
      }
      for (Token y = 0; y < kVocab; ++y) {
        const double c = o.correction[static_cast<std::size_t>(y)];
        if (c > 0.0) law[plus(prefix, y)] += w * c;
      }
      return;
    }
    for (std::int32_t x = 0; x < kVocab; ++x) {
      const double qx = qd[static_cast<std::size_t>(x)];
      if (!(qx > 0.0) || std::find(tuple.begin(), tuple.end(), x) != tuple.end()) continue;
      tuple.push_back(x);
      self(self, w * qx / (1.0 - removed), removed + qx);
      tuple.pop_back();
    }
  };
  walk(walk, weight, 0.0);
}


}  // namespace

TEST_CASE("constrained chains and trees emit the constrained target's law: enumeration",
          "[verify][logits][constraints]") {
  std::int32_t compared = 0;
  for_each_exact_setting([&](Rows& rows, int) {
    const auto target = extended(rows, {{{}, 1.0}});
    {
      INFO("chain");
      test::check_close(extended(rows, chain_law(rows)), target, 1e-9);
    }
    Law tree;
    tree_law(rows, {}, 1.0, tree);
    INFO("tree");
    test::check_close(extended(rows, tree), target, 1e-9);
    ++compared;
  });
  CHECK(compared == 32);
}

TEST_CASE("the constraints change the law the enumeration compares",
          "[verify][logits][constraints]") {
  // Each transform moves the target's law (so the comparison above tests it), and an
  // untransformed draft proposes tokens the target forbids (rejected with certainty).
  Request none = make_request(0);
  Rows plain{.q = none, .warp = Warp{}, .draft_transformed = false};
  const auto unconstrained = extended(plain, {{{}, 1.0}});
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    Rows rows{.q = q, .warp = Warp{}, .draft_transformed = false};
    const auto target = extended(rows, {{{}, 1.0}});
    double distance = 0.0;
    for (std::size_t i = 0; i < target.size(); ++i)
      distance += std::abs(target[i] - unconstrained[i]);
    INFO("transforms " << which);
    CHECK(distance > 1e-3);
  }
}

namespace {

// Draws a chain from the draft rows and verifies it with the constrained entry: the emitted
// tokens.
std::vector<Token> run_chain(Rows& rows, const RandomStream& stream, toy::ToyRandom& rng,
                             Workspace& ws) {
  const DrawnChain d = draw_chain(rows, rng);
  std::vector<Token> out(kLength + 1);
  const auto v = constrained::verify_chain_logits(rows.warp, d.target, d.draft, d.tokens, kVocab,
                                                  d.constraints(rows.q), stream, out, ws);
  out.resize(static_cast<std::size_t>(v.emitted));
  return out;
}

// Draws a tree of kBranching's shape from the draft rows (children without replacement) and
// verifies it with the constrained entry under RRS: the emitted tokens.
std::vector<Token> run_tree(Rows& rows, const RandomStream& stream, toy::ToyRandom& rng,
                            Workspace& ws) {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents, mask;
  std::vector<float> target, draft;
  std::vector<std::vector<Token>> prefixes;
  const auto add_row = [&](const std::vector<Token>& prefix) {
    const auto t = raw_logits(prefix, false);
    const auto d = rows.draft_logits(prefix);
    target.insert(target.end(), t.begin(), t.end());
    draft.insert(draft.end(), d.begin(), d.end());
    mask.push_back(grammar_mask(prefix));
    prefixes.push_back(prefix);
  };
  add_row({});
  // Rows in node order: node n's row is n + 1; children are drawn when their parent's row is.
  for (std::size_t row = 0; row < prefixes.size(); ++row) {
    const auto prefix = prefixes[row];
    if (prefix.size() == static_cast<std::size_t>(kLength)) continue;
    auto q = rows.draft_row(prefix);
    const auto k = std::min(kBranching[prefix.size()], support(q));
    for (std::int32_t j = 0; j < k; ++j) {
      const Token x = detail::sample_row(q.data(), kVocab, rng.uniform());
      // Without replacement: the drawn token leaves the row (sample_row normalises by the sum).
      q[static_cast<std::size_t>(x)] = 0.0f;
      tokens.push_back(x);
      parents.push_back(static_cast<std::int32_t>(row) - 1);
      add_row(plus(prefix, x));
    }
  }
  constrained::LogitConstraints c = rows.q.c;
  if (rows.q.grammar) c.bitmask = mask;
  std::vector<std::int32_t> accepted(tokens.size());
  const auto v = constrained::verify_tree_logits(Recursive{}, rows.warp, {tokens, parents},
                                                 {target, draft}, kVocab, c, stream, accepted, ws);
  std::vector<Token> out;
  for (std::int32_t i = 0; i < v.accepted; ++i) {
    out.push_back(tokens[static_cast<std::size_t>(accepted[static_cast<std::size_t>(i)])]);
  }
  out.push_back(v.token);
  return out;
}

}  // namespace

TEST_CASE("constrained chain and tree verifiers pass a chi-square test against the enumeration",
          "[verify][logits][constraints][mc]") {
  // False-failure probability test::kFalseFailureProbability per case; fixed seeds.
  const std::uint32_t runs = test::monte_carlo_runs(20000);
  Workspace ws;
  for (const bool tree : {false, true}) {
    for (const bool transformed : {false, true}) {
      const Request q = make_request(kAll);
      Rows rows{.q = q, .warp = Warp{.temperature = 0.8f}, .draft_transformed = transformed};
      Law law;
      if (tree) {
        tree_law(rows, {}, 1.0, law);
      } else {
        law = chain_law(rows);
      }
      toy::ToyRandom rng(tree ? 91 : 92, transformed ? 1 : 0);
      std::map<std::vector<Token>, std::int64_t> counts;
      for (std::uint32_t n = 0; n < runs; ++n) {
        const RandomStream stream{tree ? 391u : 392u, n, transformed ? 7u : 0u};
        ++counts[tree ? run_tree(rows, stream, rng, ws) : run_chain(rows, stream, rng, ws)];
      }
      INFO("tree " << tree << " draft transformed " << transformed);
      check_counts_follow(law, counts);
    }
  }
}
