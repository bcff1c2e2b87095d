// SPDX-License-Identifier: MIT
// specdec-sim never aborts: requests too large for the memory budget, values that do not fit
// their field, repeated keys and user text with control characters all give exit status 2 and
// one line on stderr naming the field; long runs report progress on stderr.
#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "run_sim.hpp"

namespace {

using specdec::test::check_sim_usage_error;
using specdec::test::run_sim;
using specdec::test::SimRun;

const std::string kVerifyRows = R"("target": [0.2, 0.3, 0.5], "draft": [0.6, 0.3, 0.1])";

std::string ngram_decode(const std::string& fields) {
  return R"({"method": "sd", "model": {"kind": "ngram", "vocab": 8}, "prompt": [1], )" + fields +
         "}";
}

}  // namespace

TEST_CASE("specdec-sim rejects a tree of nodes x vocabulary above the memory budget",
          "[tools][sim][limits]") {
  // 16.4 million RSD-C nodes x 4096 tokens: hundreds of GB of rows, an uncaught bad_alloc before.
  const std::string huge =
      R"({"method":"rsd_c","model":{"kind":"ngram","vocab":4096},"prompt":[1],)"
      R"("branching":[4096,4000]})";
  check_sim_usage_error("decode", huge, "branching: the request needs about");
  check_sim_usage_error("decode", huge, "--max-memory");
  // The budget is an option: a small one rejects what the default admits.
  const std::string wide = R"({"method":"rsd_s","model":{"kind":"ngram","vocab":1024},)"
                           R"("prompt":[1],"width":64,"depth":8,"max_new_tokens":1})";
  CHECK(run_sim("decode", wide).status == 0);
  check_sim_usage_error("decode", wide, "width: the request needs", "--max-memory 1M");
  check_sim_usage_error("decode", wide, "--max-memory", "--max-memory 12X");
  check_sim_usage_error("decode", wide, "--max-memory", "--max-memory -5");
  check_sim_usage_error("decode", wide, "--max-memory", "--max-memory 99999999999999999999G");
  check_sim_usage_error("decode", wide, "--progress", "--progress never");
}

TEST_CASE("specdec-sim rejects values that do not fit their field, naming it",
          "[tools][sim][limits]") {
  // 2^32 + 1 used to be cut to int32 (top_k = 1), 2^64 - 1 to be reported as -1.
  check_sim_usage_error("verify",
                        R"({"method": "rejection", "top_k": 4294967297, )" + kVerifyRows + "}",
                        "top_k: 4294967297 is outside [0, 3]");
  check_sim_usage_error("decode", ngram_decode(R"("top_k": 4294967297)"), "top_k: 4294967297");
  check_sim_usage_error(
      "verify", R"({"method": "rejection", "samples": 18446744073709551615, )" + kVerifyRows + "}",
      "samples: 18446744073709551615 is outside");
  check_sim_usage_error("decode", ngram_decode(R"("runs": 18446744073709551615)"),
                        "runs: 18446744073709551615 is outside");
  // A subnormal temperature made the warp produce NaN, and the error blamed target[0].
  check_sim_usage_error("verify",
                        R"({"method": "rejection", "temperature": 1e-40, )" + kVerifyRows + "}",
                        "temperature: 1e-40 must be 0 (greedy) or in");
  check_sim_usage_error("decode", ngram_decode(R"("temperature": 1e-40)"), "temperature: ");
  // Concentrations that pass "finite and > 0" but give rows of NaN or -inf logits.
  for (const char* concentration : {"1e308", "1e-300", "0.01"}) {
    check_sim_usage_error(
        "decode",
        std::string(R"({"method": "sd", "model": {"kind": "ngram", "concentration": )") +
            concentration + R"(}, "prompt": [1]})",
        "model.concentration: ");
  }
  for (const char* concentration : {"0.05", "1e6"}) {
    INFO(concentration);
    const SimRun r = run_sim(
        "decode", std::string(R"({"method": "sd", "model": {"kind": "ngram", "concentration": )") +
                      concentration + R"(}, "prompt": [1], "max_new_tokens": 64, "runs": 20})");
    CHECK(r.status == 0);
  }
}

TEST_CASE("specdec-sim rejects repeated keys", "[tools][sim][limits]") {
  check_sim_usage_error("verify",
                        R"({"method": "rejection", "method": "greedy", )" + kVerifyRows + "}",
                        "input: the key \"method\" appears twice");
  check_sim_usage_error("decode",
                        R"({"method": "sd", "model": {"kind": "ngram", "vocab": 8, "vocab": 9},)"
                        R"( "prompt": [1]})",
                        "\"vocab\" appears twice");
}

TEST_CASE("specdec-sim keeps messages quoting user text on one line", "[tools][sim][limits]") {
  // check_sim_usage_error asserts exactly one line on stderr.
  check_sim_usage_error("verify", "{\"a\\nb\": 1}", "a\\u000ab: unknown field");
  check_sim_usage_error("decode", "{\"a\\nb\": 1}", "a\\u000ab: unknown field");
  check_sim_usage_error("verify", R"({"method": "ma\ngic", )" + kVerifyRows + "}", "method: ");
  check_sim_usage_error(
      "decode",
      R"({"method": "cascade", "rule": "x\ny", "model": {"kind": "ngram"}, "prompt": [1]})",
      "rule: unknown deferral rule 'x\\u000ay'");
}

TEST_CASE("specdec-sim reports progress on stderr for long runs", "[tools][sim][limits]") {
  // --progress 0: a line at every update, so a short run shows the format.
  const SimRun r = run_sim("decode", ngram_decode(R"("max_new_tokens": 16, "runs": 4)"),
                           "--progress 0 --max-memory 64M");
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["tokens"] == 64);
  CHECK_THAT(r.err, Catch::StartsWith("specdec-sim: decode: "));
  CHECK_THAT(r.err, Catch::Contains("of 64 tokens"));
  const SimRun v =
      run_sim("verify", R"({"method": "rejection", "samples": 200000, )" + kVerifyRows + "}",
              "--progress 0");
  REQUIRE(v.status == 0);
  CHECK_THAT(v.err, Catch::Contains("specdec-sim: verify: 65536 of 200000 samples"));
  // The default waits two seconds: a short run is silent.
  const SimRun quiet = run_sim("decode", ngram_decode(R"("max_new_tokens": 16)"));
  REQUIRE(quiet.status == 0);
  CHECK(quiet.err.empty());
}
