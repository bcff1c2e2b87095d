// SPDX-License-Identifier: MIT
// specdec-sim decode, run as a process: metrics and histograms out; bad input gives exit status
// 2, one line on stderr naming the field and nothing on stdout.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../support/stats.hpp"
#include "run_sim.hpp"

namespace {

using specdec::test::SimRun;

SimRun run_decode(const std::string& request) { return specdec::test::run_sim("decode", request); }

const std::vector<std::vector<double>> kTarget = {
    {0.4, 0.3, 0.2, 0.1}, {0.1, 0.5, 0.25, 0.15}, {0.25, 0.25, 0.05, 0.45}, {0.3, 0.1, 0.35, 0.25}};
const std::vector<std::vector<double>> kDraft = {
    {0.25, 0.25, 0.25, 0.25}, {0.3, 0.3, 0.1, 0.3}, {0.1, 0.4, 0.3, 0.2}, {0.5, 0.05, 0.25, 0.2}};

std::string markov_model() {
  return R"("model": {"kind": "markov_table", "target": {"transition": )" +
         nlohmann::json(kTarget).dump() + R"(}, "draft": {"transition": )" +
         nlohmann::json(kDraft).dump() + "}}";
}

void check_decode_usage_error(const std::string& request, const std::string& field) {
  specdec::test::check_sim_usage_error("decode", request, field);
}

}  // namespace

TEST_CASE("specdec-sim decode histogram follows the target", "[tools][sim]") {
  for (const std::string method : {"sd", "rsd_c"}) {
    const SimRun r =
        run_decode(R"({"method": ")" + method + R"(", )" + markov_model() +
                   R"(, "prompt": [0, 2], "max_new_tokens": 2, "runs": 40000, "seed": 3,
                       "depth": 2, "branching": [2, 2], "draft_cost_ratio": 0.1,
                       "histogram": true})");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["runs"] == 40000);
    CHECK(j["tokens"] == 80000);
    CHECK(j["target_calls"].get<std::int64_t>() >= 40000);
    CHECK(j["draft_calls"] == 2 * j["target_calls"].get<std::int64_t>());
    const double eta = j["block_efficiency"].get<double>();
    CHECK(eta == Catch::Detail::Approx(80000.0 / j["target_calls"].get<double>()));
    CHECK(j["mbsu"].get<double>() == Catch::Detail::Approx(eta / 1.2));
    CHECK(j["accept_per_level"].size() == 2);
    std::vector<std::int64_t> counts(16, 0);
    std::vector<double> expected(16, 0.0);
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 4; ++b) {
        const auto key = std::to_string(a) + " " + std::to_string(b);
        counts[a * 4 + b] = j["histogram"].value(key, std::int64_t{0});
        expected[a * 4 + b] = kTarget[2][a] * kTarget[a][b];
      }
    }
    // False-failure probability: kFalseFailureProbability per method.
    CHECK(specdec::test::chi_square_test(counts, expected).p_value >
          specdec::test::kFalseFailureProbability);
  }
}

TEST_CASE("specdec-sim decode runs exact ReDrafter on a Markov table", "[tools][sim]") {
  // The draft table becomes the drafter head; exact mode is lossless, so the first two tokens
  // follow the target. False-failure probability: kFalseFailureProbability.
  const SimRun r =
      run_decode(R"({"method": "redrafter", "verification": "exact", )" + markov_model() +
                 R"(, "prompt": [0, 2], "max_new_tokens": 2, "runs": 40000,
                                     "seed": 5, "width": 3, "depth": 2, "histogram": true})");
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["method"] == "redrafter");
  CHECK(j["tokens"] == 80000);
  std::vector<std::int64_t> counts(16, 0);
  std::vector<double> expected(16, 0.0);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      counts[a * 4 + b] =
          j["histogram"].value(std::to_string(a) + " " + std::to_string(b), std::int64_t{0});
      expected[a * 4 + b] = kTarget[2][a] * kTarget[a][b];
    }
  }
  CHECK(specdec::test::chi_square_test(counts, expected).p_value >
        specdec::test::kFalseFailureProbability);
}

TEST_CASE("specdec-sim decode runs every method and the ngram model", "[tools][sim]") {
  const std::string ngram =
      R"("model": {"kind": "ngram", "vocab": 12, "order": 2, "seed": 5, "concentration": 0.4,
                   "draft_noise": 0.3, "draft_temperature": 1.2})";
  for (const std::string m : {"autoregressive", "sd", "sd_block", "specinfer", "spectr", "rsd_c",
                              "rsd_s", "mtad", "cascade", "lossy"}) {
    INFO(m);
    const SimRun r = run_decode(R"({"method": ")" + m + R"(", )" + ngram +
                                R"(, "prompt": [1, 2], "max_new_tokens": 10, "runs": 20, "depth": 3,
                       "width": 2, "branching": [2, 1], "alpha": 0.2, "rule": "diff",
                       "tau": 0.3, "top_p": 0.9})");
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["tokens"] == 200);
    CHECK(!j.contains("histogram"));
    CHECK((m == "autoregressive") == (j["draft_calls"] == 0));
  }
}

TEST_CASE("specdec-sim decode runs the top-k tree, n-gram and length-controlled drafters",
          "[tools][sim]") {
  const std::string ok = R"(, "prompt": [1, 2, 1, 3, 1], "max_new_tokens": 12, "runs": 30,
                              "width": 2, "depth": 3, "budget": 5, "min_gain": 0.05,
                              "draft_cost_ratio": 0.1, "seed": 4})";
  std::vector<std::string> requests;
  for (const std::string shape : {"fixed", "sequoia", "eagle2", "specexec", "opt_tree"}) {
    requests.push_back(R"({"method": "topk_tree", "shape": ")" + shape + R"(", )" +
                       markov_model() + ok);
  }
  // The hardware-aware plan: costs per tree size of 0 .. 5 nodes, draft_cost_ratio per level.
  requests.push_back(R"({"method": "topk_tree", "shape": "sequoia_planned",
                         "verify_cost": [1, 1, 1.05, 1.1, 1.2, 1.3], )" +
                     markov_model() + ok);
  requests.push_back(R"({"method": "ngram", "ngram": 2, )" + markov_model() + ok);
  for (const std::string length : {"cumulative", "heuristic", "batch_average", "goodput"}) {
    requests.push_back(R"({"method": "sd", "length": ")" + length + R"(", )" + markov_model() +
                       ok);
  }
  for (const auto& request : requests) {
    INFO(request);
    const SimRun r = run_decode(request);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["tokens"] == 360);
    CHECK(j["block_efficiency"].get<double>() >= 1.0);
    CHECK(j["block_efficiency"].get<double>() ==
          Catch::Detail::Approx(360.0 / j["target_calls"].get<double>()));
  }
  // The n-gram drafter calls no draft model; the response names the shape and the controller.
  const auto ngram = nlohmann::json::parse(run_decode(requests[6]).out);
  CHECK(ngram["draft_calls"] == 0);
  CHECK(nlohmann::json::parse(run_decode(requests[1]).out)["shape"] == "sequoia");
  CHECK(nlohmann::json::parse(run_decode(requests[5]).out)["shape"] == "sequoia_planned");
  CHECK(nlohmann::json::parse(run_decode(requests[10]).out)["length"] == "goodput");
}

TEST_CASE("specdec-sim decode rejects bad drafter options with exit status 2", "[tools][sim]") {
  const std::string model = markov_model();
  const std::string ok = R"("prompt": [1], "runs": 2)";
  check_decode_usage_error(R"({"method": "topk_tree", "shape": "kary", )" + model + ", " + ok + "}",
                           "shape");
  check_decode_usage_error(R"({"method": "topk_tree", "width": 5, )" + model + ", " + ok + "}",
                           "width");
  check_decode_usage_error(R"({"method": "topk_tree", "shape": "sequoia", "budget": -1, )" + model +
                               ", " + ok + "}",
                           "budget");
  check_decode_usage_error(R"({"method": "topk_tree", "shape": "opt_tree", "min_gain": 0, )" +
                               model + ", " + ok + "}",
                           "min_gain");
  check_decode_usage_error(R"({"method": "topk_tree", "shape": "sequoia_planned",
                               "verify_cost": [1, -2], )" +
                               model + ", " + ok + "}",
                           "verify_cost[1]");
  check_decode_usage_error(R"({"method": "topk_tree", "shape": "sequoia",
                               "verify_cost": [1, 1], )" +
                               model + ", " + ok + "}",
                           "verify_cost");
  check_decode_usage_error(R"({"method": "topk_tree", "shape": "sequoia_planned",
                               "verify_cost": [], )" +
                               model + ", " + ok + "}",
                           "verify_cost");
  check_decode_usage_error(R"({"method": "ngram", "ngram": 0, )" + model + ", " + ok + "}",
                           "ngram");
  check_decode_usage_error(R"({"method": "sd", "length": "adaptive", )" + model + ", " + ok + "}",
                           "length");
  check_decode_usage_error(R"({"method": "specinfer", "length": "goodput", )" + model + ", " + ok +
                               "}",
                           "length");
  check_decode_usage_error(R"({"method": "sd", "length": "cumulative", "threshold": 2, )" + model +
                               ", " + ok + "}",
                           "threshold");
}

TEST_CASE("specdec-sim decode does not depend on the thread count", "[tools][sim]") {
  const std::string base = R"({"method": "spectr", )" + markov_model() +
                           R"(, "prompt": [1], "max_new_tokens": 6, "runs": 500, "width": 3,
                               "depth": 2, "histogram": true, "seed": 9, "threads": )";
  const auto one = run_decode(base + "1}"), four = run_decode(base + "4}");
  REQUIRE(one.status == 0);
  REQUIRE(four.status == 0);
  auto a = nlohmann::json::parse(one.out), b = nlohmann::json::parse(four.out);
  a.erase("wall_seconds");
  b.erase("wall_seconds");
  CHECK(a == b);
}

TEST_CASE("specdec-sim decode rejects bad input with exit status 2", "[tools][sim]") {
  const std::string model = markov_model();
  const std::string ok = R"("prompt": [1], "runs": 2)";
  check_decode_usage_error("{not json", "malformed JSON");
  check_decode_usage_error(R"({"method": "magic", )" + model + ", " + ok + "}", "method");
  check_decode_usage_error(
      R"({"method": "redrafter", "verification": "magic", )" + model + ", " + ok + "}",
      "verification");
  check_decode_usage_error(
      R"({"method": "redrafter", "model": {"kind": "ngram", "vocab": 8}, )" + ok + "}",
      "model.kind");
  check_decode_usage_error(R"({"method": "sd", "colour": 1, )" + model + ", " + ok + "}", "colour");
  check_decode_usage_error(R"({"method": "sd", )" + ok + "}", "model");
  check_decode_usage_error(R"({"method": "sd", "model": {"kind": "lstm"}, )" + ok + "}", "model.kind");
  check_decode_usage_error(R"({"method": "sd", "model": {"kind": "ngram", "vocab": 0}, )" + ok + "}",
                    "model.vocab");
  check_decode_usage_error(R"({"method": "sd", "model": {"kind": "ngram", "size": 3}, )" + ok + "}",
                    "model.size");
  check_decode_usage_error(
      R"({"method": "sd", "model": {"kind": "markov_table", "target": {"transition": [[0.5, 0.6], [0.5, 0.5]]}, "draft": {"transition": [[0.5, 0.5], [0.5, 0.5]]}}, )" +
          ok + "}",
      "model.target.transition[0]");
  check_decode_usage_error(
      R"({"method": "sd", "model": {"kind": "markov_table", "target": {"transition": [[0.5, 0.5], [0.5, 0.5]]}, "draft": {"transition": [[1]]}}, )" +
          ok + "}",
      "model.draft");
  check_decode_usage_error(
      R"({"method": "sd", "model": {"kind": "markov_table", "target": {"transition": [[0.5, 0.5], [0.5, 0.5]]}}, )" +
          ok + "}",
      "model.draft");
  check_decode_usage_error(R"({"method": "sd", )" + model + R"(, "prompt": [], "runs": 2})", "prompt");
  check_decode_usage_error(R"({"method": "sd", )" + model + R"(, "prompt": [4], "runs": 2})", "prompt[0]");
  check_decode_usage_error(R"({"method": "sd", )" + model + R"(, "prompt": [1, -2]})", "prompt[1]");
  check_decode_usage_error(R"({"method": "sd", "depth": 0, )" + model + ", " + ok + "}", "depth");
  check_decode_usage_error(R"({"method": "spectr", "width": 0, )" + model + ", " + ok + "}", "width");
  check_decode_usage_error(R"({"method": "rsd_c", )" + model + ", " + ok + "}", "branching");
  check_decode_usage_error(R"({"method": "rsd_c", "branching": [2, 9], )" + model + ", " + ok + "}",
                    "branching[1]");
  check_decode_usage_error(R"({"method": "cascade", "rule": "best", )" + model + ", " + ok + "}", "rule");
  check_decode_usage_error(R"({"method": "mtad", "tau": 2, )" + model + ", " + ok + "}", "tau");
  check_decode_usage_error(R"({"method": "sd", "top_p": 0, )" + model + ", " + ok + "}", "top_p");
  check_decode_usage_error(R"({"method": "sd", "runs": 0, "prompt": [1], )" + model + "}", "runs");
  check_decode_usage_error(R"({"method": "sd", "draft_cost_ratio": -1, )" + model + ", " + ok + "}",
                    "draft_cost_ratio");
}
