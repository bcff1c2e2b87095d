// SPDX-License-Identifier: MIT
// The guarantee users care about most: every lossless method's output is distributed exactly as
// the warped target (chi-square over the first three tokens of 2 * 10^5 independent sequences on
// an order-1 Markov toy with V = 4); MTAD at tau = 1 too; cascades and lossy sampling follow the
// distribution their per-token pi implies.
#include <catch2/catch.hpp>
#include <functional>

#include "decode/strategy_law.hpp"
#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {

constexpr std::uint32_t kRuns = test::monte_carlo_runs(200000);
constexpr Token kLast = 2;  // the prompt's last token

/// Counts the first three tokens of kRuns sequences (sequence id = run index).
std::vector<std::int64_t> histogram(const DecodeOptions& base, std::uint32_t runs = kRuns) {
  auto target = test::markov_target();
  auto draft = test::markov_draft();
  DecodeOptions options = base;
  options.max_new_tokens = 3;
  Decoder decoder(target, draft, options);
  return test::first_token_counts(decoder, runs, {0, kLast});
}

/// The law of a chain step after `last` as `step(last, t, d)` gives it, t and d the target's and
/// the draft's rows after `last` warped by `warp`.
template <class Step>
auto on_warped_rows(const Warp& warp, Step step) {
  return [warp, step](Token last) {
    return step(last, test::warped_row(test::target_table(), last, warp),
                test::warped_row(test::draft_table(), last, warp));
  };
}

void check_matches(const DecodeOptions& options, const std::vector<double>& expected) {
  const auto counts = histogram(options);
  const auto chi = test::chi_square_test(counts, expected);
  INFO(method_name(options.method)
       << " chi2 " << chi.statistic << " df " << chi.df << " p " << chi.p_value);
  CHECK(chi.p_value > test::kFalseFailureProbability);
}

/// A lossless method at T = 1 and with top-p = 0.8 (both rows warped): two chi-square tests,
/// false-failure probability 2e-6 in all.
void check_lossless(DecodeOptions options) {
  options.seed = 1234;
  options.warp = Warp{};
  check_matches(options, test::target_sequence_distribution(kLast, options.warp));
  options.warp.top_p = 0.8f;
  options.seed = 99;
  check_matches(options, test::target_sequence_distribution(kLast, options.warp));
}

DecodeOptions with_method(Method m, std::int32_t depth = 2, std::int32_t width = 2) {
  DecodeOptions o;
  o.method = m;
  o.depth = depth;
  o.width = width;
  return o;
}

/// The exact distribution of the first three tokens of a chain method (depth L) whose per-token
/// target is pi(row): position j < L of a step emits x with probability pi(x), accepting it
/// (the step goes on) with probability accept(x); position L emits the bonus token from the
/// warped target. `joint(prev)` returns the joint rows P(x, accepted) and P(x, rejected).
using JointRows = std::function<std::pair<std::vector<double>, std::vector<double>>(Token)>;

std::vector<double> chain_sequence_distribution(std::int32_t depth, const JointRows& joint,
                                                const Warp& warp) {
  const auto table = test::target_table();
  std::vector<double> out(64, 0.0);
  std::function<void(Token, std::int32_t, int, std::size_t, double)> walk =
      [&](Token last, std::int32_t offset, int produced, std::size_t index, double p) {
        if (produced == 3) {
          out[index] += p;
          return;
        }
        if (offset == depth) {
          const auto row = test::warped_row(table, last, warp);
          for (Token x = 0; x < 4; ++x) {
            walk(x, 0, produced + 1, index * 4 + static_cast<std::size_t>(x), p * row[x]);
          }
          return;
        }
        const auto [accepted, rejected] = joint(last);
        for (Token x = 0; x < 4; ++x) {
          const auto i = index * 4 + static_cast<std::size_t>(x);
          walk(x, offset + 1, produced + 1, i, p * accepted[static_cast<std::size_t>(x)]);
          walk(x, 0, produced + 1, i, p * rejected[static_cast<std::size_t>(x)]);
        }
      };
  walk(kLast, 0, 0, 0, 1.0);
  return out;
}

/// Joint rows of speculative sampling towards pi with draft d: P(x, accepted) = min(d, pi),
/// P(x, rejected) = [pi - d]+.
std::pair<std::vector<double>, std::vector<double>> towards(const std::vector<float>& pi,
                                                            const std::vector<float>& d) {
  std::vector<double> a(4), r(4);
  for (std::size_t x = 0; x < 4; ++x) {
    a[x] = std::min<double>(d[x], pi[x]);
    r[x] = std::max<double>(0.0, static_cast<double>(pi[x]) - d[x]);
  }
  return {a, r};
}

}  // namespace

TEST_CASE("SD with standard rejection is lossless") { check_lossless(with_method(Method::kSd, 3)); }

TEST_CASE("SD with block verification is lossless") {
  check_lossless(with_method(Method::kSdBlock, 3));
}

TEST_CASE("SpecInfer is lossless") { check_lossless(with_method(Method::kSpecInfer, 2, 3)); }

TEST_CASE("SpecTr is lossless") { check_lossless(with_method(Method::kSpecTr, 2, 3)); }

TEST_CASE("RSD-C is lossless") {
  auto o = with_method(Method::kRsdC);
  o.branching = {3, 2};
  check_lossless(o);
}

TEST_CASE("RSD-S is lossless") { check_lossless(with_method(Method::kRsdS, 2, 3)); }

TEST_CASE("A cascade whose rule always defers is lossless") {
  auto o = with_method(Method::kCascade, 2);
  o.cascade = Cascade{Deferral::kChow, 0.0f};  // defer iff max draft < 1: always here
  check_lossless(o);
}

TEST_CASE("Lossy sampling with alpha 0 is lossless") {
  auto o = with_method(Method::kLossy, 2);
  o.lossy = Lossy{0.0f, 1.0f};
  check_lossless(o);
}

TEST_CASE("MTAD with tau 1 samples the target") {
  // Beam sampling at T = 1 and deterministic beam search with top-p: false-failure probability
  // 2e-6 in all.
  auto o = with_method(Method::kMtad, 2, 2);
  o.tau = 1.0f;
  o.seed = 5;
  check_matches(o, test::target_sequence_distribution(kLast, o.warp));
  o.mtad_beam_search = true;
  o.warp.top_p = 0.8f;
  check_matches(o, test::target_sequence_distribution(kLast, o.warp));
}

TEST_CASE("MTAD with tau 0 accepts every draft block") {
  for (bool beam_search : {false, true}) {
    auto target = test::markov_target();
    auto draft = test::markov_draft();
    auto o = with_method(Method::kMtad, 3, 2);
    o.tau = 0.0f;
    o.mtad_beam_search = beam_search;
    o.max_new_tokens = 40;  // 10 steps of L + 1 = 4 tokens
    const std::vector<Token> prompt{1};
    const auto r = decode(target, draft, prompt, o, 5);
    CHECK(r.metrics.target_calls == 10);
    CHECK(r.metrics.acceptance_rate(3) == Catch::Detail::Approx(1.0));
    CHECK(r.metrics.accepted_per_level[0] == 10);
  }
}

TEST_CASE("A cascade matches the sequence distribution its per-token pi implies") {
  // Token-level deferral (the target's own top tokens are kept): pi mixes the rows per token.
  for (auto deferral : {Deferral::kTokenV3, Deferral::kChow}) {
    INFO("deferral " << deferral_name(deferral));
    auto o = with_method(Method::kCascade, 2);
    // Thresholds keep a margin from every table entry (softmax rounding must not flip a test).
    o.cascade = Cascade{deferral, deferral == Deferral::kChow ? 0.55f : 0.45f};
    o.seed = 31;
    const auto joint = on_warped_rows(o.warp, [&](Token last, const auto& t, const auto& d) {
      std::vector<float> pi(4);
      cascade_target(test::target_table()[static_cast<std::size_t>(last)],
                     test::draft_table()[static_cast<std::size_t>(last)], t, d, o.cascade.deferral,
                     o.cascade.alpha, pi);
      return towards(pi, d);
    });
    // False-failure probability: 1e-6 per deferral rule.
    check_matches(o, chain_sequence_distribution(o.depth, joint, o.warp));
  }
}

TEST_CASE("Lossy sampling matches the sequence distribution its closed form implies") {
  auto o = with_method(Method::kLossy, 2);
  o.lossy = Lossy{0.3f, 1.0f};
  o.seed = 77;
  const auto joint = on_warped_rows(o.warp, [&](Token, const auto& t, const auto& d) {
    // Accept x with probability min(1, t / ((1 - alpha) d)); rejection mass R; the correction
    // is drawn from norm([t - beta d]+).
    const double alpha = o.lossy.alpha, beta = o.lossy.beta;
    std::vector<double> a(4), r(4);
    double rejected = 0.0, residual = 0.0;
    for (std::size_t x = 0; x < 4; ++x) {
      a[x] = std::min<double>(d[x], t[x] / (1.0 - alpha));
      rejected += d[x] - a[x];
      residual += std::max(0.0, t[x] - beta * d[x]);
    }
    for (std::size_t x = 0; x < 4; ++x) {
      r[x] = residual > 0.0 ? rejected * std::max(0.0, t[x] - beta * d[x]) / residual : 0.0;
    }
    return std::make_pair(a, r);
  });
  // False-failure probability: 1e-6.
  check_matches(o, chain_sequence_distribution(o.depth, joint, o.warp));
}
