// SPDX-License-Identifier: MIT
// Exact output distributions (enumeration) of every node rule, known answers and closed forms.
#include <cmath>

#include "helpers.hpp"

using namespace specdec;
using test::exact;
using test::make_pair;
using test::Pair;

namespace {

std::vector<Rule> lossless_rules() {
  return {Rejection{}, MultiRound{},      Recursive{},
          SpecTr{},    Lossy{0.0f, 1.0f}, Cascade{Deferral::kDiff, -1.0f}};
}

std::int32_t max_count(const Rule& rule) { return max_candidates(rule, 1000) == 1 ? 1 : 4; }

}  // namespace

TEST_CASE("lossless rules output exactly the warped target", "[verify][exact]") {
  int checked = 0;
  for (const std::int64_t vocab : {3, 5, 8}) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      for (const auto& warp : test::test_warps()) {
        const Pair p = make_pair(vocab, 100 * vocab + seed, warp);
        for (const auto& rule : lossless_rules()) {
          for (std::int32_t k = 1; k <= max_count(rule); ++k) {
            INFO("vocab " << vocab << " seed " << seed << " rule " << rule.index() << " K " << k);
            const auto e = exact(rule, p, k);
            test::check_close(e.distribution, std::span<const float>(p.target));
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked == 3 * 3 * 5 * (3 * 4 + 3));  // K = 1..4 for three rules, 1 for three
}

TEST_CASE("lossless rules claim the warped target", "[verify][exact]") {
  const Pair p = make_pair(6, 7, Warp{.top_p = 0.9f});
  std::vector<double> claimed(6);
  for (const auto& rule : lossless_rules()) {
    REQUIRE(claimed_distribution(rule, p.target, p.draft, 1, claimed, p.raw_target, p.raw_draft));
    test::check_close(claimed, std::span<const float>(p.target));
  }
}

TEST_CASE("standard rejection accepts with probability one minus TV", "[verify][exact]") {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    const Pair p = make_pair(7, seed);
    const double tv = tv_distance<float>(p.target, p.draft);
    CHECK(exact(Rejection{}, p, 1).accept == Catch::Detail::Approx(1.0 - tv).margin(1e-6));
  }
}

TEST_CASE("RRS accepts a Bernoulli pair with K = 2 with probability one", "[verify][exact]") {
  for (const float pt : {0.05f, 0.3f, 0.5f, 0.9f}) {
    for (const float pd : {0.1f, 0.4f, 0.75f, 0.95f}) {
      const auto pair = toy::bernoulli_pair(pt, pd);
      const Pair p{pair.target, pair.draft, pair.target, pair.draft};
      INFO("target " << pt << " draft " << pd);
      CHECK(exact(Recursive{}, p, 2).accept == Catch::Detail::Approx(1.0).margin(1e-6));
    }
  }
  // The i.i.d. rules do not: two equal draws can both be rejected.
  const auto pair = toy::bernoulli_pair(0.9f, 0.1f);
  const Pair p{pair.target, pair.draft, pair.target, pair.draft};
  CHECK(exact(MultiRound{}, p, 2).accept < 0.99);
  CHECK(exact(SpecTr{}, p, 2).accept < 0.99);
}

TEST_CASE("SpecTr gamma and acceptance match the reference table", "[verify][exact][spectr]") {
  struct Row {
    std::vector<float> target, draft;
    std::int32_t k;
    double gamma, accept;
  };
  const std::vector<Row> table = {
      {{.25f, .75f}, {.5f, .5f}, 1, 1.0, .75},
      {{.25f, .75f}, {.5f, .5f}, 2, 1.309017, .904508},
      {{.25f, .75f}, {.5f, .5f}, 4, 1.476099, .988049},
      {{.2f, .3f, .5f}, {.6f, .3f, .1f}, 2, 1.584429, .658443},
      {{.2f, .3f, .5f}, {.6f, .3f, .1f}, 3, 2.100031, .710003},
      {{.2f, .3f, .5f}, {.6f, .3f, .1f}, 4, 2.547464, .754746},
      {{.1f, .2f, .7f}, {.7f, .2f, .1f}, 3, 2.371843, .537184},
  };
  for (const auto& row : table) {
    INFO("K " << row.k << " expected gamma " << row.gamma);
    CHECK(spectr_gamma<float>(row.target, row.draft, row.k) ==
          Catch::Detail::Approx(row.gamma).margin(2e-6));
    const Pair p{row.target, row.draft, row.target, row.draft};
    const auto e = exact(SpecTr{}, p, row.k);
    CHECK(e.accept == Catch::Detail::Approx(row.accept).margin(2e-6));
    test::check_close(e.distribution, std::span<const float>(row.target));
  }
}

TEST_CASE("SpecTr with an explicit valid gamma is lossless", "[verify][exact][spectr]") {
  const Pair p = make_pair(5, 3);
  for (const double gamma : {2.5, 3.0}) {
    test::check_close(exact(SpecTr{gamma}, p, 3).distribution, std::span<const float>(p.target));
  }
}

TEST_CASE("lossy sampling with tuned beta matches the reference table", "[verify][exact][lossy]") {
  // Reference values (the closed form of docs/algorithms.md §1.5): draft (.6,.3,.1),
  // target (.2,.3,.5).
  const Pair p{{.2f, .3f, .5f}, {.6f, .3f, .1f}, {.2f, .3f, .5f}, {.6f, .3f, .1f}};
  struct Row {
    float alpha;
    double accept, beta;
    std::vector<double> pi;
  };
  const std::vector<Row> table = {{0.0f, .6, 1.0, {.2, .3, .5}},
                                  {0.2f, .65, 1.111111, {.25, .3, .45}},
                                  {0.4f, .733333, 1.363636, {.333333, .3, .366667}}};
  for (const auto& row : table) {
    INFO("alpha " << row.alpha);
    CHECK(lossy_tuned_beta<float>(p.target, p.draft, row.alpha) ==
          Catch::Detail::Approx(row.beta).margin(1e-5));
    const Lossy rule{row.alpha, 1.0f, true};
    const auto e = exact(rule, p, 1);
    CHECK(e.accept == Catch::Detail::Approx(row.accept).margin(1e-5));
    test::check_close(e.distribution, row.pi, 1e-5);
    std::vector<double> claimed(3);
    REQUIRE(claimed_distribution(rule, p.target, p.draft, 1, claimed));
    test::check_close(claimed, row.pi, 1e-5);
  }
}

TEST_CASE("lossy sampling with tuned beta follows Lemma 2", "[verify][exact][lossy]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Pair p = make_pair(6, 40 + seed);
    for (const float alpha : {0.1f, 0.3f, 0.6f}) {
      const double beta = lossy_tuned_beta<float>(p.target, p.draft, alpha);
      double rejected = 0.0;
      for (std::size_t v = 0; v < 6; ++v) {
        rejected += std::max<double>(p.draft[v] - p.target[v] / (1.0 - alpha), 0.0);
      }
      if (rejected == 0.0) {  // nothing is rejected: the output is the draft row
        test::check_close(exact(Lossy{alpha, 1.0f, true}, p, 1).distribution,
                          std::span<const float>(p.draft));
        continue;
      }
      std::vector<double> lemma(6);
      for (std::size_t v = 0; v < 6; ++v) {
        lemma[v] =
            std::max(std::min<double>(p.draft[v], p.target[v] / (1.0 - alpha)), p.target[v] / beta);
      }
      test::check_close(exact(Lossy{alpha, 1.0f, true}, p, 1).distribution, lemma, 1e-5);
    }
  }
}

TEST_CASE("lossy sampling with a given beta outputs its closed form", "[verify][exact][lossy]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Pair p = make_pair(6, 50 + seed, Warp{.top_k = 4});
    for (const float alpha : {0.2f, 0.5f}) {
      for (const float beta : {1.0f, 1.5f}) {
        const Lossy rule{alpha, beta};
        std::vector<double> claimed(6);
        REQUIRE(claimed_distribution(rule, p.target, p.draft, 1, claimed));
        // The closed form by hand.
        std::vector<double> form(6);
        double rejected = 0.0, residual = 0.0;
        for (std::size_t v = 0; v < 6; ++v) {
          form[v] = std::min<double>(p.draft[v], p.target[v] / (1.0 - alpha));
          rejected += p.draft[v] - form[v];
          residual += std::max<double>(p.target[v] / beta - p.draft[v], 0.0);
        }
        for (std::size_t v = 0; v < 6; ++v) {
          form[v] += rejected * std::max<double>(p.target[v] / beta - p.draft[v], 0.0) / residual;
        }
        test::check_close(claimed, form);
        test::check_close(exact(rule, p, 1).distribution, form);
      }
    }
  }
}

TEST_CASE("cascade rules match the derived table", "[verify][exact][cascade]") {
  // Closed-form values: small = draft (.6,.3,.1), large = target (.2,.3,.5), T = 1.
  const Pair p{{.2f, .3f, .5f}, {.6f, .3f, .1f}, {.2f, .3f, .5f}, {.6f, .3f, .1f}};
  struct Row {
    Deferral rule;
    float alpha;
    std::vector<double> pi;
    double accept;
  };
  const std::vector<Row> table = {
      {Deferral::kChow, .5f, {.6, .3, .1}, 1.0},
      {Deferral::kDiff, .2f, {.6, .3, .1}, 1.0},
      {Deferral::kOpt, 1.0f, {.6, .3, .1}, 1.0},
      {Deferral::kTokenV1, .2f, {.62, .33, .05}, .95},
      {Deferral::kTokenV2, .2f, {.12, .48, .40}, .52},
      {Deferral::kTokenV3, .5f, {.12, .48, .40}, .52},
      {Deferral::kChow, .1f, {.2, .3, .5}, .6},
  };
  for (const auto& row : table) {
    INFO(deferral_name(row.rule) << " alpha " << row.alpha);
    const Cascade rule{row.rule, row.alpha};
    const auto e = exact(rule, p, 1);
    CHECK(e.accept == Catch::Detail::Approx(row.accept).margin(1e-6));
    test::check_close(e.distribution, row.pi);
  }
}

TEST_CASE("every cascade rule outputs its pi", "[verify][exact][cascade]") {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const Pair p = make_pair(7, 60 + seed, Warp{.temperature = 0.8f, .top_p = 0.95f});
    for (int d = 0; d <= static_cast<int>(Deferral::kTokenV3); ++d) {
      for (const float alpha : {0.0f, 0.1f, 0.4f}) {
        const Cascade rule{static_cast<Deferral>(d), alpha};
        INFO(deferral_name(rule.deferral) << " alpha " << alpha);
        std::vector<double> claimed(7);
        REQUIRE(
            claimed_distribution(rule, p.target, p.draft, 1, claimed, p.raw_target, p.raw_draft));
        test::check_close(exact(rule, p, 1).distribution, claimed);
        double sum = 0.0;
        for (double v : claimed) sum += v;
        CHECK(sum == Catch::Detail::Approx(1.0).margin(1e-5));
      }
    }
  }
}

TEST_CASE("the T = 0 limit of every lossless rule is greedy matching", "[verify][exact]") {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const Pair p = make_pair(6, 70 + seed, Warp{.temperature = 0.0f});
    const auto greedy = exact(Greedy{}, p, 1);
    for (const auto& rule : lossless_rules()) {
      const auto e = exact(rule, p, 1);
      test::check_close(e.distribution, greedy.distribution);
      CHECK(e.accept == Catch::Detail::Approx(greedy.accept).margin(1e-12));
    }
  }
}

TEST_CASE("TokenV3 at T = 0 equals lossy greedy", "[verify][exact][cascade]") {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const Pair p = make_pair(6, 80 + seed, Warp{.temperature = 0.0f}, 0.8f);
    for (const float alpha : {0.0f, 0.2f, 0.5f, 0.9f}) {
      INFO("seed " << seed << " alpha " << alpha);
      const auto v3 = exact(Cascade{Deferral::kTokenV3, alpha}, p, 1);
      const auto lossy = exact(Lossy{alpha, 1.0f, false, true}, p, 1);
      test::check_close(v3.distribution, lossy.distribution);
      CHECK(v3.accept == Catch::Detail::Approx(lossy.accept).margin(1e-12));
    }
  }
}

TEST_CASE("typical acceptance accepts above its threshold and claims nothing", "[verify][exact]") {
  const std::vector<float> target = {.5f, .3f, .15f, .05f};
  const std::vector<float> draft = {.25f, .25f, .25f, .25f};
  double h = 0.0;
  for (float v : target) h -= v * std::log(v);
  const double threshold = std::min(0.3, 0.09 * std::exp(-h));  // about 0.028
  const Pair p{target, draft, target, draft};
  const auto e = exact(Typical{}, p, 1);
  // Every token is above the threshold: the output is the draft itself.
  REQUIRE(threshold < 0.05);
  CHECK(e.accept == Catch::Detail::Approx(1.0));
  test::check_close(e.distribution, std::span<const float>(draft));
  const auto strict = exact(Typical{0.2f, 0.9f}, p, 1);  // threshold 0.2: tokens 0 and 1 pass
  CHECK(strict.accept == Catch::Detail::Approx(0.5));
  CHECK(strict.distribution[2] == Catch::Detail::Approx(0.5 * 0.15));
  std::vector<double> claimed(4);
  CHECK_FALSE(claimed_distribution(Typical{}, target, draft, 1, claimed));
}

TEST_CASE("typical acceptance decides without the entropy as it does with it",
          "[verify][typical]") {
  // A first candidate above min(epsilon, 1.002 delta) is accepted unread; every verdict must be
  // the one the threshold min(epsilon, delta exp(-H)) gives, on rows from flat to one-hot, and on
  // rows whose largest entry passes 1 within the probability check's tolerance.
  toy::ToyRandom rng(31);
  int unread = 0, compared = 0;
  for (const double alpha : {0.02, 0.3, 3.0}) {
    for (const std::int64_t vocab : {5, 64, 3000}) {
      for (int trial = 0; trial < 30; ++trial) {
        std::vector<float> target = toy::dirichlet(vocab, alpha, rng);
        if (trial % 10 == 0) {  // one entry carries everything, rounded up past 1
          std::fill(target.begin(), target.end(), 0.0f);
          target[static_cast<std::size_t>(trial) % target.size()] = 1.0009f;
        }
        check_probability_row<float>("target", target);
        std::vector<Token> candidates;
        for (int k = 0; k < 3; ++k) {
          candidates.push_back(static_cast<Token>(rng.uniform() * static_cast<double>(vocab)));
        }
        for (const auto& [epsilon, delta] : {std::pair{0.3f, 0.09f}, std::pair{0.05f, 0.9f},
                                             std::pair{0.9f, 0.5f}, std::pair{1.0f, 1.0f}}) {
          const float h = detail::row_entropy(target.data(), vocab);
          const float threshold = std::fmin(epsilon, delta * std::exp(-h));
          std::int32_t want = -1;
          for (std::int32_t k = 0; k < 3 && want < 0; ++k) {
            if (target[static_cast<std::size_t>(candidates[static_cast<std::size_t>(k)])] >
                threshold) {
              want = k;
            }
          }
          const auto verdict = detail::typical_row(target.data(), vocab, candidates.data(), 3,
                                                   epsilon, delta, RandomStream{7});
          CAPTURE(alpha, vocab, trial, epsilon, delta, h);
          CHECK(verdict.accepted == want);
          if (want >= 0) CHECK(verdict.token == candidates[static_cast<std::size_t>(want)]);
          unread += target[static_cast<std::size_t>(candidates[0])] >
                            detail::typical_threshold_bound(epsilon, delta)
                        ? 1
                        : 0;
          ++compared;
        }
      }
    }
  }
  CHECK(compared == 3 * 3 * 30 * 4);
  CHECK(unread > compared / 20);
}

TEST_CASE("disjoint supports never accept and output the target", "[verify][exact][edge]") {
  const Pair p{{0.f, 0.f, .4f, .6f}, {.5f, .5f, 0.f, 0.f}, {}, {}};
  for (const auto& rule : lossless_rules()) {
    const auto e = exact(rule, p, max_count(rule) == 1 ? 1 : 2);
    CHECK(e.accept == Catch::Detail::Approx(0.0).margin(1e-12));
    test::check_close(e.distribution, std::span<const float>(p.target));
  }
}

TEST_CASE("identical rows always accept", "[verify][exact][edge]") {
  const Pair p = make_pair(5, 9);
  const Pair same{p.target, p.target, p.target, p.target};
  for (const auto& rule : lossless_rules()) {
    CHECK(exact(rule, same, 1).accept == Catch::Detail::Approx(1.0).margin(1e-9));
  }
}

TEST_CASE("draft zero where the target is positive stays lossless", "[verify][exact][edge]") {
  const Pair p{{.3f, .3f, .4f}, {.5f, .5f, 0.f}, {}, {}};
  for (const auto& rule : lossless_rules()) {
    for (std::int32_t k = 1; k <= max_count(rule); ++k) {
      test::check_close(exact(rule, p, k).distribution, std::span<const float>(p.target));
    }
  }
}

TEST_CASE("candidates covering every token stay lossless", "[verify][exact][edge]") {
  const Pair p = make_pair(4, 11);
  for (const Rule rule : {Rule{MultiRound{}}, Rule{Recursive{}}, Rule{SpecTr{}}}) {
    const auto e = exact(rule, p, 4);
    test::check_close(e.distribution, std::span<const float>(p.target));
  }
}

TEST_CASE("a top-k warp leaving one token accepts with probability one", "[verify][exact][edge]") {
  auto raw = toy::make_categorical_pair(6, 5, 1.0, 1.0f, 0.1f);
  const Warp warp{.top_k = 1};
  const Pair p{test::warped(raw.target, warp), test::warped(raw.target, warp), {}, {}};
  for (const auto& rule : lossless_rules()) {
    const auto e = exact(rule, p, 1);
    CHECK(e.accept == Catch::Detail::Approx(1.0));
    test::check_close(e.distribution, std::span<const float>(p.target));
  }
  // Top-p leaving a different single token on each side: never accepted, still exact.
  const Pair q{{0.f, 1.f, 0.f}, {1.f, 0.f, 0.f}, {}, {}};
  for (const auto& rule : lossless_rules()) {
    const auto e = exact(rule, q, 1);
    CHECK(e.accept == Catch::Detail::Approx(0.0));
    test::check_close(e.distribution, std::span<const float>(q.target));
  }
}

TEST_CASE("RRS with K above the draft support uses the support", "[verify][exact][edge]") {
  const Pair p{{.1f, .2f, .3f, .4f}, {.7f, 0.f, .3f, 0.f}, {}, {}};
  const auto e = exact(Recursive{}, p, 4);  // only two distinct candidates exist
  test::check_close(e.distribution, std::span<const float>(p.target));
  CHECK(e.accept == Catch::Detail::Approx(exact(Recursive{}, p, 2).accept));
}

TEST_CASE("cascade_target returns the pi the rule claims", "[verify][cascade]") {
  const Pair p = make_pair(5, 90, Warp{.temperature = 0.5f});
  std::vector<float> pi(5);
  std::vector<double> claimed(5);
  for (const Deferral d : {Deferral::kBild, Deferral::kOptLog, Deferral::kTokenV2}) {
    cascade_target<float>(p.raw_target, p.raw_draft, p.target, p.draft, d, 0.3f, pi);
    REQUIRE(claimed_distribution(Cascade{d, 0.3f}, p.target, p.draft, 1, claimed, p.raw_target,
                                 p.raw_draft));
    test::check_close(claimed, std::span<const float>(pi));
  }
}
