// SPDX-License-Identifier: MIT
// Strict JSON: repeated keys are errors, and messages quoting user text stay on one line.
#include <catch2/catch.hpp>
#include <string>

#include "specdec/io/json.hpp"

using namespace specdec;
using namespace specdec::io;

TEST_CASE("parse_json_strict rejects a key repeated in one object", "[io][json]") {
  CHECK(parse_json_strict(R"({"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]})", "input")["b"]["a"] == 2);
  CHECK_THROWS_WITH(parse_json_strict(R"({"a":1,"a":2})", "input"),
                    "input: the key \"a\" appears twice in one object");
  CHECK_THROWS_WITH(parse_json_strict(R"({"m":{"x":1,"y":2,"x":3}})", "input"),
                    Catch::Contains("\"x\" appears twice"));
  // Keys of sibling objects, and of an object and its parent, are independent.
  CHECK_NOTHROW(parse_json_strict(R"({"a":{"a":{"a":1}},"b":{"a":2}})", "input"));
}

TEST_CASE("parse_json_strict reports a number beyond double as malformed JSON", "[io][json]") {
  // nlohmann's parser throws out_of_range (not parse_error) for it; found by fuzz_safetensors.
  CHECK_THROWS_AS(parse_json_strict(R"({"a":[1e690]})", "file"), Error);
  CHECK_THROWS_WITH(parse_json_strict("1e690", "file"), Catch::StartsWith("file: malformed JSON"));
}

TEST_CASE("parse_json_strict reports malformed JSON on one line", "[io][json]") {
  CHECK_THROWS_WITH(parse_json_strict("{\"a\":", "input"),
                    Catch::StartsWith("input: malformed JSON"));
  try {
    (void)parse_json_strict("{\"a\\nb\":1,\"a\\nb\":2}", "input");
    FAIL("a repeated key was accepted");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find('\n') == std::string::npos);
    CHECK(what.find("a\\u000ab") != std::string::npos);
  }
}

TEST_CASE("escape_for_message keeps a message printable and on one line", "[io][json]") {
  CHECK(escape_for_message("plain") == "plain");
  CHECK(escape_for_message("a\nb\t\"c\"\\") == "a\\u000ab\\u0009\\\"c\\\"\\\\");
  CHECK(escape_for_message(std::string("\0\x7f", 2)) == "\\u0000\\u007f");
}
