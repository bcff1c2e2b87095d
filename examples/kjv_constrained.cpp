// SPDX-License-Identifier: MIT
// Structured output with speculative decoding on the trained pair of examples/models: the text
// must follow a grammar of verse references ("Genesis 1:3 text\n", kjv_constrained.hpp's
// character-level automaton), whose mask after each draft node's prefix constrains that node's
// target row (xgrammar's packed bitmask, verify/constrained_logits.hpp). Decodes with SD chains,
// Sequoia and EAGLE-2 trees, the draft masked by the same grammar or not, reports tokens per
// target call and tokens per second against plain constrained decoding of the target, and checks
// that every output parses (exit status 1 if one does not).
//
// Usage: kjv_constrained [--models DIR] [--prompt TEXT] [--tokens N] [--temperature T]
//                        [--seed S] [--methods a,b,...] [--repeats R]
// Methods: plain, sd, sequoia, eagle (each but plain twice: draft masked and unmasked).
// Bad input: one line on stderr, exit status 2.
#include "kjv_constrained.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "kjv_model.hpp"
#include "kjv_options.hpp"
#include "kjv_provider.hpp"
#include "specdec/decode/decoder.hpp"

namespace {

using specdec::Token;
using specdec::detail::fail;

// The deepest tree any method drafts: the context must leave room for it.
constexpr std::int64_t kDeepestTree = 5;
constexpr const char* kAllMethods = "plain,sd,sequoia,eagle";

using kjv::Settings;

Settings parse_args(int argc, char** argv) {
  Settings s;
  s.prompt = "Genesis 1:3 And God said, Let there be light\n";
  s.tokens = 72;
  std::string methods = kAllMethods;
  kjv::parse_options(argc, argv, "kjv_constrained.cpp", s, methods,
                     [](std::string_view, std::string_view) { return false; });
  s.methods = kjv::parse_methods(methods, kAllMethods);
  return s;
}

// Bytes are tokens: the prompt must be ASCII text that the grammar can continue.
std::vector<Token> encode(std::string_view text, std::int64_t vocab, std::int64_t context) {
  auto tokens = kjv::encode_prompt(text, vocab, context, kDeepestTree);
  if (!kjv::VerseGrammar::parses(tokens)) {
    fail("--prompt",
         "'{}' does not begin text of the grammar (Book chapter:verse text, a line "
         "each)",
         specdec::io::escape_for_message(text));
  }
  return tokens;
}

// Printable ASCII as is, a newline as " | ": one line per sample.
std::string shown(std::span<const Token> tokens) {
  std::string out;
  for (const Token t : tokens) out += t == '\n' ? std::string(" | ") : std::string(1, char(t));
  return out;
}

kjv::ConstrainedOptions options_of(const std::string& method, float temperature) {
  kjv::ConstrainedOptions o{
      .drafting = kjv::Drafting::kChain, .warp = {.temperature = temperature}, .length = 4};
  if (method == "plain") o.drafting = kjv::Drafting::kPlain;
  if (method == "sequoia") {
    o.drafting = kjv::Drafting::kTree;
    o.tree = {.shape = specdec::TreeShapePolicy::kSequoia,
              .width = 4,
              .depth = kDeepestTree,
              .budget = 16};
  }
  if (method == "eagle") {
    o.drafting = kjv::Drafting::kTree;
    o.tree = {.shape = specdec::TreeShapePolicy::kEagle2, .width = 3, .depth = 4, .budget = 12};
  }
  return o;
}

std::string shape_of(const std::string& method) {
  if (method == "plain") return "-";
  if (method == "sequoia") return "budget 16, depth 5";
  if (method == "eagle") return "top-3, budget 12, depth 4";
  return "L=4";
}

int run(const Settings& s) {
  const auto pair = kjv::read_pair(s.models);
  const auto& target = pair.target;
  const auto& draft = pair.draft;
  const auto prompt = encode(s.prompt, target.config().vocab, pair.context());
  kjv::check_tokens_fit(s.tokens, prompt.size(), pair.context(), kDeepestTree);
  std::printf("prompt \"%s\", %lld tokens x %lld sequences per method, temperature %g, seed %llu\n",
              shown(prompt).c_str(), static_cast<long long>(s.tokens),
              static_cast<long long>(s.repeats), static_cast<double>(s.temperature),
              static_cast<unsigned long long>(s.seed));
  std::printf("grammar: Book chapter:verse text (1-%d bytes), a line each; %zu books\n\n",
              kjv::VerseGrammar::kMaxText, kjv::VerseGrammar::kBooks.size());
  kjv::ModelProvider target_provider(target), draft_provider(draft);
  std::vector<std::string> methods = {"plain"};
  for (const auto& m : s.methods) {
    if (m != "plain") methods.push_back(m);
  }
  std::printf("%-8s %-26s %-9s %12s %12s %10s %9s\n", "method", "shape", "draft", "tokens/call",
              "draft/token", "tokens/s", "vs plain");
  double plain_speed = 0.0;
  std::int64_t failures = 0;
  for (const auto& method : methods) {
    for (const bool masked : {true, false}) {
      if (method == "plain" && !masked) continue;
      kjv::GrammarDraft<kjv::ModelProvider> grammar_draft(draft_provider, masked);
      using Strategy = kjv::ConstrainedStrategy<kjv::ModelProvider>;
      const auto options = options_of(method, s.temperature);
      specdec::Decoder<kjv::ModelProvider, Strategy> decoder(
          target_provider, Strategy(grammar_draft, options),
          {.warp = options.warp,
           .max_new_tokens = static_cast<std::int32_t>(s.tokens),
           .seed = s.seed});
      specdec::DecodeMetrics total;
      std::string sample;
      for (std::int64_t r = 0; r < s.repeats; ++r) {
        decoder.reset(prompt, static_cast<std::uint32_t>(r));
        const auto result = decoder.run();
        total.merge(result.metrics);
        auto text = prompt;
        text.insert(text.end(), result.tokens.begin(), result.tokens.end());
        if (!kjv::VerseGrammar::parses(text)) {
          ++failures;
          std::fprintf(stderr, "kjv_constrained: %s sequence %lld does not parse: %s\n",
                       method.c_str(), static_cast<long long>(r), shown(text).c_str());
        }
        if (r == 0) sample = shown(result.tokens);
      }
      const double speed = static_cast<double>(total.tokens_generated) / total.wall_seconds;
      if (method == "plain") plain_speed = speed;
      std::printf(
          "%-8s %-26s %-9s %12.3f %12.3f %10.0f %8.2fx\n", method.c_str(), shape_of(method).c_str(),
          method == "plain" ? "-"
          : masked          ? "masked"
                            : "unmasked",
          total.block_efficiency(),
          static_cast<double>(total.draft_calls) / static_cast<double>(total.tokens_generated),
          speed, speed / plain_speed);
      std::printf("  text: %s\n", sample.c_str());
    }
  }
  if (failures > 0) {
    std::fprintf(stderr, "kjv_constrained: %lld outputs do not parse\n",
                 static_cast<long long>(failures));
    return 1;
  }
  std::printf("\nevery output parses\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return kjv::exit_status("kjv_constrained", [&] { return run(parse_args(argc, argv)); });
}
