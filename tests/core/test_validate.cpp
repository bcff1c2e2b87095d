// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "specdec/core/validate.hpp"
#include "specdec/core/warp.hpp"

using namespace specdec;

TEST_CASE("probability rows: finite, non-negative, normalised", "[core][validate]") {
  const std::vector<float> good = {0.25f, 0.75f};
  CHECK_NOTHROW(check_probability_row<float>("target", good));
  const std::vector<float> nan = {0.5f, std::nanf("")};
  CHECK_THROWS_WITH(check_probability_row<float>("target", nan),
                    Catch::Contains("target[1]") && Catch::Contains("nan"));
  const std::vector<float> negative = {1.5f, -0.5f};
  CHECK_THROWS_WITH(check_probability_row<float>("draft", negative),
                    Catch::Contains("draft[1]") && Catch::Contains("-0.5"));
  const std::vector<float> unnormalised = {0.5f, 0.6f};
  CHECK_THROWS_WITH(check_probability_row<float>("draft", unnormalised),
                    Catch::Contains("draft") && Catch::Contains("sums to 1.1"));
  CHECK_THROWS_WITH(check_probability_row<float>("draft", std::span<const float>{}),
                    Catch::Contains("empty"));
  const std::vector<float> inf = {std::numeric_limits<float>::infinity(), 0.0f};
  CHECK_THROWS_AS(check_probability_row<float>("x", inf), Error);
}

TEST_CASE("logit rows: no NaN, no +inf, not all -inf", "[core][validate]") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> good = {-inf, 3.0f};
  CHECK_NOTHROW(check_logits_row<float>("logits", good));
  const std::vector<float> plus_inf = {0.0f, inf};
  CHECK_THROWS_WITH(check_logits_row<float>("logits", plus_inf), Catch::Contains("logits[1]"));
  const std::vector<float> all_minus = {-inf, -inf};
  CHECK_THROWS_WITH(check_logits_row<float>("logits", all_minus), Catch::Contains("-inf"));
}

TEST_CASE("sizes, tokens and ranges name the argument", "[core][validate]") {
  CHECK_THROWS_WITH(
      detail::check_size("draft", 3, 4),
      Catch::Contains("draft has 3 elements, expected 4") || Catch::Contains("draft: has 3"));
  CHECK_THROWS_WITH(detail::check_token("candidates[2]", 9, 8),
                    Catch::Contains("candidates[2]") && Catch::Contains("token 9"));
  CHECK_THROWS_WITH(detail::check_token("token", -1, 8), Catch::Contains("-1"));
  CHECK_THROWS_WITH(detail::check_in_half_open("alpha", 1.0, 0.0, 1.0), Catch::Contains("alpha"));
  CHECK_THROWS_WITH(detail::check_positive("width", 0), Catch::Contains("width"));
  const std::vector<int> tokens = {1, 2, 8};
  CHECK_THROWS_WITH(detail::check_tokens<int>("prompt", tokens, 8), Catch::Contains("prompt[2]"));
  try {
    detail::check_positive("depth", -2);
    FAIL("no exception");
  } catch (const Error& e) {
    CHECK(e.argument() == "depth");
  }
}

TEST_CASE("Error keeps the argument and the problem apart", "[core][validate]") {
  const Error e("rows[3]", "nan is not a probability: a row: of logits");
  CHECK(e.argument() == "rows[3]");
  CHECK(e.problem() == "nan is not a probability: a row: of logits");
  CHECK(std::string(e.what()) == "rows[3]: nan is not a probability: a row: of logits");
  // A warp list renames the field of the bad warp and keeps its problem word for word.
  const std::vector<Warp> warps = {Warp{}, Warp{.top_p = 1.5f}};
  try {
    detail::check_warp_list(warps, 2, 10, "row");
    FAIL("no exception");
  } catch (const Error& bad) {
    CHECK(bad.argument() == "warps[1].top_p");
    CHECK(bad.problem().find("1.5") != std::string::npos);
    CHECK(std::string(bad.what()) == bad.argument() + ": " + bad.problem());
  }
}

TEST_CASE("an error of one item of a batch puts the item's index first", "[core][validate]") {
  const auto renamed = [](const std::string& argument, std::int64_t item) {
    try {
      detail::rethrow_for_sequence(Error(argument, "bad"), item);
    } catch (const Error& e) {
      CHECK(e.problem() == "bad");
      return e.argument();
    }
    return std::string("not rethrown");
  };
  CHECK(renamed("target_rows[2]", 5) == "target_rows[5][2]");
  CHECK(renamed("beams[1][3]", 0) == "beams[0][1][3]");
  CHECK(renamed("vocab", 5) == "vocab (sequence 5)");
}
