// SPDX-License-Identifier: MIT
// Monte-Carlo checks of the row functions against the exact distributions (chi-square tests), the
// draw order, the lazy residual, and half-precision rows.
#include <Eigen/Core>
#include <limits>

#include "helpers.hpp"

using namespace specdec;
using test::Pair;

namespace {

/// Verifies `samples` fresh candidate tuples with `rule` and counts the output tokens.
std::vector<std::int64_t> simulate(const Rule& rule, const Pair& p, std::int32_t count,
                                   std::uint64_t seed, std::uint32_t samples = 100000) {
  std::vector<std::int64_t> counts(p.target.size(), 0);
  Workspace ws;
  Rule resolved = rule;  // solve SpecTr's automatic gamma once, not per sample
  if (auto* spectr = std::get_if<SpecTr>(&resolved); spectr && spectr->gamma <= 0.0) {
    spectr->gamma = spectr_gamma<float>(p.target, p.draft, count);
  }
  for (std::uint32_t s = 0; s < samples; ++s) {
    const RandomStream draft_stream{seed, 0, s, 0, Domain::kDraft};
    const auto candidates =
        test::draw_candidates(p.draft, count, draws_without_replacement(rule), draft_stream);
    const RandomStream verify_stream{seed, 0, s, 0, Domain::kVerify};
    const auto verdict = verify_node(resolved, p.target, p.draft, candidates, verify_stream, ws,
                                     p.raw_target, p.raw_draft);
    ++counts[static_cast<std::size_t>(verdict.token)];
  }
  return counts;
}

void check_rule(const Rule& rule, const Pair& p, std::int32_t count, std::uint64_t seed) {
  // False-failure probability: kFalseFailureProbability per call.
  const auto e = test::exact(rule, p, count);
  const auto counts = simulate(rule, p, count, seed);
  const auto chi = test::chi_square_test(counts, e.distribution);
  INFO("rule " << rule.index() << " chi2 " << chi.statistic << " df " << chi.df);
  CHECK(chi.p_value > test::kFalseFailureProbability);
}

}  // namespace

TEST_CASE("rejection sampling frequencies match the target", "[verify][mc]") {
  check_rule(Rejection{}, test::make_pair(6, 1, Warp{.top_p = 0.9f}), 1, 11);
}

TEST_CASE("multi-round frequencies match the target", "[verify][mc]") {
  check_rule(MultiRound{}, test::make_pair(6, 2), 3, 12);
}

TEST_CASE("RRS frequencies match the target", "[verify][mc]") {
  check_rule(Recursive{}, test::make_pair(6, 3, Warp{.temperature = 0.8f}), 3, 13);
}

TEST_CASE("SpecTr frequencies match the target", "[verify][mc]") {
  check_rule(SpecTr{}, test::make_pair(6, 4), 3, 14);
}

TEST_CASE("lossy sampling frequencies match pi", "[verify][mc]") {
  check_rule(Lossy{0.3f, 1.0f}, test::make_pair(6, 5), 1, 15);
  check_rule(Lossy{0.3f, 1.0f, true}, test::make_pair(6, 6), 1, 16);
}

TEST_CASE("cascade frequencies match pi", "[verify][mc]") {
  check_rule(Cascade{Deferral::kTokenV1, 0.1f}, test::make_pair(6, 7, Warp{.temperature = 0.7f}), 1,
             17);
  check_rule(Cascade{Deferral::kOpt, 0.5f}, test::make_pair(6, 8), 1, 18);
}

TEST_CASE("typical acceptance frequencies match its exact distribution", "[verify][mc]") {
  check_rule(Typical{0.2f, 0.5f}, test::make_pair(6, 9), 2, 19);
}

TEST_CASE("half-precision rows give the same verdicts as fp32 rows", "[verify][mc]") {
  // Rows exactly representable in both precisions.
  const std::vector<float> target = {.25f, .5f, .125f, .125f};
  const std::vector<float> draft = {.5f, .25f, .125f, .125f};
  std::vector<Eigen::half> target_h, draft_h;
  std::vector<Eigen::bfloat16> target_b, draft_b;
  for (std::size_t i = 0; i < 4; ++i) {
    target_h.emplace_back(target[i]);
    draft_h.emplace_back(draft[i]);
    target_b.emplace_back(target[i]);
    draft_b.emplace_back(draft[i]);
  }
  Workspace ws;
  const std::vector<Token> candidates = {0, 2};
  for (std::uint32_t s = 0; s < 200; ++s) {
    const RandomStream stream{3, 0, s};
    const auto a = verify_node<float>(MultiRound{}, target, draft, candidates, stream, ws);
    const auto b =
        verify_node<Eigen::half>(MultiRound{}, target_h, draft_h, candidates, stream, ws);
    const auto c =
        verify_node<Eigen::bfloat16>(Recursive{}, target_b, draft_b, candidates, stream, ws);
    const auto d = verify_node<float>(Recursive{}, target, draft, candidates, stream, ws);
    CHECK(a == b);
    CHECK(c == d);
  }
}

TEST_CASE("rejection takes draw 0 for the test and draw 1 for the correction", "[verify][draws]") {
  const std::vector<float> target = {.2f, .8f};
  const std::vector<float> draft = {.8f, .2f};
  Workspace ws;
  // u_0 = 0.1: 0.1 * 0.8 < 0.2 accepts; u_0 = 0.5 rejects; the correction then comes from
  // norm([target - draft]+) = (0, 1) whatever u_1.
  const std::vector<float> accept = {0.1f, 0.999f};
  const std::vector<float> reject = {0.5f, 0.001f};
  CHECK(verify_rejection(target, draft, 0, SuppliedUniforms(accept), ws) == NodeVerdict{0, 0});
  CHECK(verify_rejection(target, draft, 0, SuppliedUniforms(reject), ws) == NodeVerdict{-1, 1});
  // Accepting reads only draw 0: one supplied uniform is enough.
  const std::vector<float> one = {0.1f};
  CHECK(verify_rejection(target, draft, 0, SuppliedUniforms(one), ws) == NodeVerdict{0, 0});
}

TEST_CASE("accepting the first candidate never forms the residual", "[verify][lazy]") {
  const std::vector<float> target = {.1f, .2f, .3f, .4f};
  const std::vector<float> draft = {.1f, .2f, .3f, .4f};
  const std::vector<Token> candidates = {3, 1, 2};
  std::vector<float> scratch(4, std::numeric_limits<float>::quiet_NaN());
  const RandomStream stream{1};
  CHECK(detail::residual_walk<detail::ResidualRule::kMultiRound>(
            detail::HostRows{}, target.data(), draft.data(), 4, candidates.data(), 3, stream,
            scratch.data()) == NodeVerdict{0, 3});
  CHECK(detail::residual_walk<detail::ResidualRule::kRecursive>(
            detail::HostRows{}, target.data(), draft.data(), 4, candidates.data(), 3, stream,
            scratch.data()) == NodeVerdict{0, 3});
  CHECK(detail::rejection_row(target.data(), draft.data(), 4, 3, stream, scratch.data()) ==
        NodeVerdict{0, 3});
  CHECK(detail::spectr_row(target.data(), draft.data(), 4, candidates.data(), 3, 1.0, stream,
                           scratch.data()) == NodeVerdict{0, 3});
  for (float v : scratch) CHECK(std::isnan(v));  // untouched
}

TEST_CASE("every rule returns the same verdict for the same stream", "[verify][draws]") {
  const Pair p = test::make_pair(8, 21);
  Workspace ws;
  const std::vector<Token> candidates = {1, 5};
  for (const Rule rule :
       {Rule{MultiRound{}}, Rule{Recursive{}}, Rule{SpecTr{}}, Rule{Typical{}}, Rule{Greedy{}}}) {
    const RandomStream stream{5, 1, 2, 3};
    CHECK(verify_node(rule, p.target, p.draft, candidates, stream, ws) ==
          verify_node(rule, p.target, p.draft, candidates, stream, ws));
  }
}

TEST_CASE("lossless multi-candidate rules pass a chi-square test for K = 1 to 4", "[verify][mc]") {
  // False-failure probability: kFalseFailureProbability per check (12 checks).
  const auto p = test::make_pair(5, 30, Warp{.top_k = 4});
  std::uint64_t seed = 100;
  for (const Rule rule : {Rule{MultiRound{}}, Rule{Recursive{}}, Rule{SpecTr{}}}) {
    for (std::int32_t k = 1; k <= 4; ++k) {
      INFO("K " << k);
      check_rule(rule, p, k, ++seed);
    }
  }
}

TEST_CASE("lossy and cascade rules in their lossless settings pass a chi-square test",
          "[verify][mc]") {
  // False-failure probability: kFalseFailureProbability per check.
  const auto p = test::make_pair(6, 31, Warp{.temperature = 0.8f});
  check_rule(Lossy{0.0f, 1.0f}, p, 1, 201);
  check_rule(Cascade{Deferral::kDiff, -1.0f}, p, 1, 202);
}

namespace {

/// A Dirichlet(concentration) row over `vocab` tokens with about a fifth of the entries zeroed
/// (at least one kept), renormalised.
std::vector<float> sparse_dirichlet(std::int64_t vocab, double concentration, toy::ToyRandom& rng) {
  auto row = toy::dirichlet(vocab, concentration, rng);
  const auto kept = static_cast<std::size_t>(rng.uniform_double() * static_cast<double>(vocab));
  double total = 0.0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i != kept && rng.uniform_double() < 0.2) row[i] = 0.0f;
    total += row[i];
  }
  if (!(total > 0.0)) row[kept] = 1.0f, total = 1.0;
  for (auto& v : row) v = static_cast<float>(v / total);
  return row;
}

}  // namespace

TEST_CASE("every lossless rule samples the target on many random pairs", "[verify][mc]") {
  // 48 seeded pairs per rule: V from 2 to 16, target and draft independent Dirichlet rows of
  // concentration 0.1, 0.5 or 2 with zeros, K from 1 to 4 (1 for rejection), 20000 verifications
  // each. The chi-square statistics of the pairs add up to one statistic (independent samples;
  // about 48 x (V - 1) degrees of freedom). Power: a rule whose output is off by a TV of 0.5% in
  // every pair adds a noncentrality of about 20000 x 2 x 0.005^2 x V per pair, ~440 in all against
  // a 10^-6 critical margin of ~150 above the ~420 degrees of freedom: detected with probability
  // above 0.99. False-failure probability: kFalseFailureProbability per rule.
  const std::vector<std::pair<const char*, Rule>> rules = {
      {"rejection", Rejection{}}, {"multi_round", MultiRound{}}, {"recursive", Recursive{}},
      {"spectr", SpecTr{}}};
  for (const auto& [name, rule] : rules) {
    double statistic = 0.0;
    int df = 0;
    for (std::uint64_t pair = 0; pair < 48; ++pair) {
      toy::ToyRandom rng(1000 + pair);
      const auto vocab = static_cast<std::int64_t>(2 + pair % 15);
      const double concentration = pair % 3 == 0 ? 0.1 : pair % 3 == 1 ? 0.5 : 2.0;
      test::Pair p;
      p.target = p.raw_target = sparse_dirichlet(vocab, concentration, rng);
      p.draft = p.raw_draft = sparse_dirichlet(vocab, concentration, rng);
      const auto count = std::holds_alternative<Rejection>(rule)
                             ? 1
                             : static_cast<std::int32_t>(1 + pair % 4);
      const auto counts = simulate(rule, p, count, 77 + pair, test::monte_carlo_runs(20000));
      const auto chi = test::chi_square_test(counts, std::span<const float>(p.target));
      statistic += chi.statistic;
      df += chi.df;
    }
    INFO(name << ": chi2 " << statistic << " over " << df << " degrees of freedom");
    CHECK(test::chi_square_p_value(statistic, df) > test::kFalseFailureProbability);
  }
}
