// SPDX-License-Identifier: MIT
// specdec-sim verify, run as a process: JSON in, JSON out; bad input gives exit status 2, one
// line on stderr and nothing on stdout.
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../support/stats.hpp"
#include "run_sim.hpp"

namespace {

using specdec::test::SimRun;

SimRun run_verify(const std::string& request) { return specdec::test::run_sim("verify", request); }

void check_verify_usage_error(const std::string& request, const std::string& field) {
  specdec::test::check_sim_usage_error("verify", request, field);
}

}  // namespace

TEST_CASE("specdec-sim verify reports counts and exact distributions", "[tools][sim]") {
  const SimRun r = run_verify(
      R"({"method": "spectr", "target": [0.2, 0.3, 0.5], "draft": [0.6, 0.3, 0.1],
          "candidates": 3, "samples": 100000, "seed": 7})");
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["method"] == "spectr");
  CHECK(j["vocab"] == 3);
  CHECK(j["samples"] == 100000);
  CHECK(j["gamma"].get<double>() == Catch::Detail::Approx(2.100031).margin(1e-5));
  CHECK(j["exact_accept_rate"].get<double>() == Catch::Detail::Approx(0.710003).margin(1e-5));
  const auto exact = j["exact"].get<std::vector<double>>();
  const auto expected = j["expected"].get<std::vector<double>>();
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(exact[i] == Catch::Detail::Approx(expected[i]).margin(1e-6));
  const auto counts = j["counts"].get<std::vector<std::int64_t>>();
  // False-failure probability: kFalseFailureProbability.
  CHECK(specdec::test::chi_square_test(counts, expected).p_value >
        specdec::test::kFalseFailureProbability);
  CHECK(j["accept_rate"].get<double>() == Catch::Detail::Approx(0.71).margin(0.01));
}

TEST_CASE("specdec-sim verify runs every method", "[tools][sim]") {
  const std::string rows =
      R"("target": [0.2, 0.3, 0.5], "draft": [0.6, 0.3, 0.1], "samples": 2000)";
  for (const std::string extra :
       {R"("method": "rejection")", R"("method": "multi_round", "candidates": 2)",
        R"("method": "recursive", "candidates": 5)",
        R"("method": "spectr", "gamma": 3, "candidates": 3)",
        R"("method": "lossy", "alpha": 0.2, "beta": "tuned")",
        R"("method": "lossy", "alpha": 0.2, "temperature": 0)",
        R"("method": "cascade", "rule": "token_v3", "alpha": 0.5, "top_k": 2)",
        R"("method": "typical", "epsilon": 0.2, "delta": 0.5)", R"("method": "greedy")"}) {
    INFO(extra);
    const SimRun r = run_verify("{" + extra + ", " + rows + "}");
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(r.out);
    std::int64_t total = 0;
    for (auto c : j["counts"]) total += c.get<std::int64_t>();
    CHECK(total == 2000);
    CHECK(j["exact"].is_array());
    CHECK(j["expected"].is_null() == (j["method"] == "typical"));
    CHECK(j.contains("gamma") == (j["method"] == "spectr"));
  }
}

TEST_CASE("specdec-sim verify rejects bad input with exit status 2", "[tools][sim]") {
  const std::string rows = R"("target": [0.2, 0.3, 0.5], "draft": [0.6, 0.3, 0.1])";
  check_verify_usage_error("{not json", "malformed JSON");
  check_verify_usage_error(R"({"method": "magic", )" + rows + "}", "method");
  check_verify_usage_error(R"({"method": "rejection", "colour": 1, )" + rows + "}", "colour");
  check_verify_usage_error(R"({"method": 3, )" + rows + "}", "method");
  check_verify_usage_error(R"({"method": "rejection", "draft": [0.5, 0.5]})", "target");
  check_verify_usage_error(R"({"method": "rejection", "target": [0.5, 0.5], "draft": [0.5, 0.5, 0]})",
                    "draft");
  check_verify_usage_error(R"({"method": "rejection", "target": [0.5, "x"], "draft": [0.5, 0.5]})",
                    "target[1]");
  check_verify_usage_error(
      R"({"method": "rejection", "target": [0.5, -0.5, 1], "draft": [0.6, 0.3, 0.1]})",
      "target[1]");
  check_verify_usage_error(R"({"method": "rejection", "target": [0.5, 0.6], "draft": [0.5, 0.5]})",
                    "target");
  check_verify_usage_error(R"({"method": "rejection", "candidates": 2, )" + rows + "}", "candidates");
  check_verify_usage_error(R"({"method": "multi_round", "candidates": 0, )" + rows + "}", "candidates");
  check_verify_usage_error(R"({"method": "lossy", "alpha": 1, )" + rows + "}", "alpha");
  check_verify_usage_error(R"({"method": "lossy", "alpha": 0.5, "beta": 0.2, )" + rows + "}", "beta");
  check_verify_usage_error(R"({"method": "spectr", "gamma": 1, "candidates": 3, )" + rows + "}", "gamma");
  check_verify_usage_error(R"({"method": "spectr", "gamma": "big", )" + rows + "}", "gamma");
  check_verify_usage_error(R"({"method": "cascade", "rule": "nope", )" + rows + "}", "rule");
  check_verify_usage_error(R"({"method": "cascade", )" + rows + "}", "rule");
  check_verify_usage_error(R"({"method": "typical", "epsilon": 2, )" + rows + "}", "epsilon");
  check_verify_usage_error(R"({"method": "rejection", "top_p": 0, )" + rows + "}", "top_p");
  check_verify_usage_error(R"({"method": "rejection", "samples": -1, )" + rows + "}", "samples");
  check_verify_usage_error(R"({"method": "rejection", "seed": 1.5, )" + rows + "}", "seed");
}
