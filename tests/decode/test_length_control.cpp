// SPDX-License-Identifier: MIT
// Draft-length controllers, each on a scripted stream of acceptance.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <vector>

#include "specdec/decode/length_control.hpp"

using namespace specdec;

namespace {

// Drafts the scripted tokens until the rule stops and returns how many it drafted.
std::int32_t drafted(CumulativeStop& rule, const std::vector<double>& predicted) {
  rule.start();
  for (double p : predicted) {
    if (rule.stop_after(p)) break;
  }
  return rule.length();
}

}  // namespace

TEST_CASE("SpecDec++: stop once 1 - prod(acceptance) passes the threshold", "[length][specdecpp]") {
  CumulativeStop rule({.threshold = 0.5, .min_length = 1, .max_length = 6});
  // 0.9, 0.81, 0.729, 0.6561, 0.59049, 0.531441: never past 0.5, so max_length ends it.
  CHECK(drafted(rule, std::vector<double>(10, 0.9)) == 6);
  // 0.8, 0.64, 0.512, 0.4096: the rejection chance passes 0.5 at the fourth token.
  CHECK(drafted(rule, std::vector<double>(10, 0.8)) == 4);
  CHECK(rule.rejection_probability() == Approx(1 - 0.4096));
  // A confident start, then an unlikely token: stop right after it.
  CHECK(drafted(rule, {0.99, 0.99, 0.3, 0.99}) == 3);
  // min_length drafts on through an early rejection chance.
  CumulativeStop patient({.threshold = 0.5, .min_length = 3, .max_length = 6});
  CHECK(drafted(patient, {0.1, 0.9, 0.9, 0.9}) == 3);
  CHECK_THROWS_WITH(rule.stop_after(1.5), Catch::StartsWith("predicted_acceptance"));
  CHECK_THROWS_WITH(CumulativeStop({.threshold = NAN}), Catch::StartsWith("threshold"));
  CHECK_THROWS_WITH(CumulativeStop({.min_length = 4, .max_length = 3}),
                    Catch::StartsWith("max_length"));
  CHECK_THROWS_WITH(CumulativeStop({.min_length = 0}), Catch::StartsWith("min_length"));
}

TEST_CASE("Hugging Face: +2 when all accepted, -1 otherwise, and the confidence stop",
          "[length][heuristic]") {
  HeuristicLength rule(
      {.initial = 5, .min_length = 1, .max_length = 9, .confidence_threshold = 0.4});
  // Scripted accepted counts and the lengths they lead to.
  const std::vector<std::int32_t> accepted = {5, 7, 3, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const std::vector<std::int32_t> lengths = {7, 9, 8, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1, 3};
  for (std::size_t k = 0; k < accepted.size(); ++k) {
    rule.update(accepted[k]);
    CHECK(rule.length() == lengths[k]);
  }
  CHECK(rule.stop_after(0.39));
  CHECK_FALSE(rule.stop_after(0.4));
  CHECK_THROWS_WITH(rule.update(4), Catch::StartsWith("accepted"));
  CHECK_THROWS_WITH(rule.stop_after(-0.1), Catch::StartsWith("draft_probability"));
  CHECK_THROWS_WITH(HeuristicLength({.initial = 0}), Catch::StartsWith("initial"));
}

TEST_CASE("Average per batch size: each batch size keeps its own moving average",
          "[length][batch]") {
  BatchAverageLength rule(
      {.initial = 4, .min_length = 1, .max_length = 8, .smoothing = 0.5, .headroom = 1});
  CHECK(rule.length(1) == 4);  // nothing seen yet
  rule.update(1, 6.0);         // the first step sets the average
  CHECK(rule.average(1) == 6.0);
  CHECK(rule.length(1) == 7);
  rule.update(1, 2.0);  // 6 + 0.5 (2 - 6) = 4
  CHECK(rule.average(1) == 4.0);
  CHECK(rule.length(1) == 5);
  rule.update(1, 3.0);  // 3.5 -> ceil 4, + 1
  CHECK(rule.length(1) == 5);
  rule.update(16, 0.2);  // a large batch accepts little: it drafts short
  CHECK(rule.length(16) == 2);
  CHECK(rule.length(1) == 5);  // untouched by batch size 16
  CHECK(rule.length(8) == 4);  // still unseen
  rule.update(16, 40.0);
  rule.update(16, 40.0);
  CHECK(rule.length(16) == 8);  // capped at max_length
  CHECK_THROWS_WITH(rule.update(0, 1.0), Catch::StartsWith("batch_size"));
  CHECK_THROWS_WITH(rule.update(2, -1.0), Catch::StartsWith("mean_accepted"));
  CHECK_THROWS_WITH(BatchAverageLength({.smoothing = 0.0}), Catch::StartsWith("smoothing"));
}

TEST_CASE("Goodput: the k maximising expected tokens over the cost of k drafts and a verify",
          "[length][goodput]") {
  // Brute force over k against the formula, for a few acceptance rates and costs.
  for (double rate : {0.0, 0.3, 0.6, 0.8, 0.95, 1.0}) {
    for (double draft : {0.05, 0.2, 1.0}) {
      const GoodputCosts costs{
          .draft_cost = draft, .verify_cost = 1.0, .min_length = 0, .max_length = 12};
      const std::vector<double> acceptance = {rate};
      std::int32_t best = 0;
      double best_rate = 0.0;
      for (std::int32_t k = 0; k <= 12; ++k) {
        const double tokens = (rate == 1.0) ? k + 1.0 : (1 - std::pow(rate, k + 1)) / (1 - rate);
        const double goodput = tokens / (k * draft + 1.0);
        if (goodput > best_rate * (1 + 1e-12)) {
          best_rate = goodput;
          best = k;
        }
      }
      INFO("rate " << rate << ", draft cost " << draft);
      CHECK(goodput_length(acceptance, costs) == best);
    }
  }
  // By depth: a first token that is always accepted and nothing after it.
  CHECK(goodput_length(std::vector<double>{1.0, 0.0}, {.draft_cost = 0.1, .verify_cost = 1}) == 1);
  CHECK(expected_chain_tokens(std::vector<double>{0.5, 0.5}, 3) == 1.875);
}

TEST_CASE("Goodput controller follows the measured acceptance", "[length][goodput]") {
  GoodputLength rule({.draft_cost = 0.1, .verify_cost = 1.0, .min_length = 1, .max_length = 16});
  CHECK(rule.length() == goodput_length(std::vector<double>{0.5},
                                        {.draft_cost = 0.1, .verify_cost = 1.0, .max_length = 16}));
  // A stream of full acceptances: the estimate rises and the length with it.
  const auto before = rule.length();
  for (int step = 0; step < 50; ++step) rule.update(4, 4);
  CHECK(rule.acceptance() == Approx(200.5 / 201.0));
  CHECK(rule.length() > before);
  CHECK(rule.length() == 16);
  // Then a stream of immediate rejections: it falls to the minimum.
  for (int step = 0; step < 2000; ++step) rule.update(4, 0);
  CHECK(rule.acceptance() < 0.1);
  CHECK(rule.length() == 1);
  CHECK_THROWS_WITH(rule.update(2, 3), Catch::StartsWith("accepted"));
  CHECK_THROWS_WITH(rule.update(-1, 0), Catch::StartsWith("drafted"));
  CHECK_THROWS_WITH(GoodputLength({.draft_cost = -1}), Catch::StartsWith("draft_cost"));
  CHECK_THROWS_WITH(goodput_length(std::vector<double>{1.2}, {}),
                    Catch::StartsWith("acceptance_by_depth[0]"));
}
