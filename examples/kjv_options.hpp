// SPDX-License-Identifier: MIT
// The command-line pieces kjv_generate and kjv_constrained share: the options both take, numbers
// in a range, comma lists of known methods, and the prompt as byte tokens that leave room for a
// draft tree.
// Each names the option it reads in the specdec::Error it throws.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/io/json.hpp"

// The trained pair's directory (the build sets it to examples/models of the source tree).
#ifndef SPECDEC_KJV_MODELS
#define SPECDEC_KJV_MODELS "examples/models"
#endif

namespace kjv {

/// The settings both programs take (parse_options reads them); each program sets its own
/// default prompt and token count.
struct Settings {
  std::string models = SPECDEC_KJV_MODELS;
  std::string prompt;
  std::int64_t tokens = 0;
  float temperature = 1.0f;
  std::uint64_t seed = 2024;
  std::vector<std::string> methods;
  std::int64_t repeats = 4;
};

/// `text` as a T in [low, high]; `name` is the option.
template <class T>
T parse_number(std::string_view name, std::string_view text, T low, T high) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    specdec::detail::fail(name, "'{}' is not a number", specdec::io::escape_for_message(text));
  }
  if (!(value >= low && value <= high)) {
    specdec::detail::fail(name, "{} is outside [{}, {}]", value, low, high);
  }
  return value;
}

/// The parts of `text` between `separator`s (an empty part where two meet).
inline std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (true) {
    const auto end = text.find(separator, begin);
    out.emplace_back(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) return out;
    begin = end + 1;
  }
}

/// The comma list `methods`, each one of the comma list `known` (else an error naming --methods).
inline std::vector<std::string> parse_methods(std::string_view methods, std::string_view known) {
  auto out = split(methods, ',');
  const auto names = split(known, ',');
  for (const auto& m : out) {
    if (std::find(names.begin(), names.end(), m) == names.end()) {
      specdec::detail::fail("--methods", "'{}' is not a method ({})",
                            specdec::io::escape_for_message(m), known);
    }
  }
  return out;
}

/// `body()`'s exit status; an exception it throws becomes one line on stderr ("program: what",
/// newlines folded) and exit status 2.
template <class Body>
int exit_status(const char* program, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::fprintf(stderr, "%s: %s\n", program, message.c_str());
    return 2;
  }
}

/// Reads `--flag value` pairs into `s` (all but its methods) and `methods` (the comma list of
/// --methods); `extra` takes the program's own options (flag, value) and returns false for a flag
/// it does not know. `program` is the source file whose opening comment gives the usage.
template <class Extra>
void parse_options(int argc, char** argv, std::string_view program, Settings& s,
                   std::string& methods, Extra&& extra) {
  using specdec::detail::fail;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) fail(flag, "expects a value (see the usage at the top of {})", program);
    const std::string_view value = argv[++i];
    if (flag == "--models") {
      s.models = value;
    } else if (flag == "--prompt") {
      s.prompt = value;
    } else if (flag == "--tokens") {
      s.tokens = parse_number<std::int64_t>(flag, value, 1, 1 << 20);
    } else if (flag == "--temperature") {
      s.temperature = parse_number<float>(flag, value, 0.0f, 100.0f);
    } else if (flag == "--seed") {
      s.seed = parse_number<std::uint64_t>(flag, value, 0, UINT64_MAX);
    } else if (flag == "--methods") {
      methods = value;
    } else if (flag == "--repeats") {
      s.repeats = parse_number<std::int64_t>(flag, value, 1, 1000);
    } else if (!extra(flag, value)) {
      fail(flag, "is not an option (see the usage at the top of {})", program);
    }
  }
}

/// The prompt's bytes as tokens of a vocabulary of `vocab` (bytes are tokens), leaving room in a
/// context of `context` positions for a tree `deepest` deep.
inline std::vector<specdec::Token> encode_prompt(std::string_view text, std::int64_t vocab,
                                                 std::int64_t context, std::int64_t deepest) {
  if (text.empty()) {
    specdec::detail::fail("--prompt", "is empty: the root of every step is its last byte");
  }
  std::vector<specdec::Token> tokens;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= vocab) {
      specdec::detail::fail("--prompt", "byte {} (0x{:02x}) is outside the vocabulary of {}", i,
                            byte, vocab);
    }
    tokens.push_back(static_cast<specdec::Token>(byte));
  }
  if (static_cast<std::int64_t>(tokens.size()) + deepest >= context) {
    specdec::detail::fail("--prompt",
                          "has {} bytes; the model's context of {} positions leaves room for {}",
                          tokens.size(), context, context - deepest - 1);
  }
  return tokens;
}

/// --tokens after a prompt of `prompt` tokens must leave room in a context of `context`
/// positions for a tree `deepest` deep (else an error naming --tokens).
inline void check_tokens_fit(std::int64_t tokens, std::size_t prompt, std::int64_t context,
                             std::int64_t deepest) {
  const auto room = context - static_cast<std::int64_t>(prompt) - deepest;
  if (tokens > room) {
    specdec::detail::fail(
        "--tokens",
        "{} after a prompt of {} bytes overflows the context of {} positions (at most {})", tokens,
        prompt, context, room);
  }
}

}  // namespace kjv
