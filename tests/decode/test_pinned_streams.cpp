// SPDX-License-Identifier: MIT
// Pinned token streams: a few seeded runs of every decoding method and every ReDrafter mode,
// recorded once in pinned_streams.txt, so a change to the decoding loop that moves any random
// stream fails here.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/redrafter_strategy.hpp"
#include "specdec/toy/toy.hpp"

using namespace specdec;

namespace {

// The tokens, then the metrics that count calls and accepted drafts.
std::string summary(const DecodeResult& result) {
  std::string out;
  for (const auto t : result.tokens) out += std::to_string(t) + ' ';
  const auto& m = result.metrics;
  std::int64_t accepted = 0;
  for (const auto a : m.accepted_per_level) accepted += a;
  return out + fmt::format("| target {} draft {} nodes {} accepted {}", m.target_calls,
                           m.draft_calls, m.target_tree_tokens, accepted);
}

// Sequence 5 stops at an end token; sequence 0 runs to max_new_tokens.
Token end_token_of(std::uint32_t sequence, Token end) { return sequence == 5 ? end : kNoToken; }

toy::NGramModel ngram_target() { return toy::NGramModel({.vocab = 12, .order = 2, .seed = 3}); }

DecodeOptions method_options(Method method, bool warped, std::uint32_t sequence) {
  DecodeOptions o{.method = method,
                  .depth = 3,
                  .width = 2,
                  .branching = {2, 3},
                  .cascade = {.alpha = 0.3f},
                  .lossy = {.alpha = 0.2f},
                  .max_new_tokens = 24,
                  .seed = 2024};
  if (warped) o.warp = {.temperature = 0.8f, .top_k = 6, .top_p = 0.95f};
  o.end_token = end_token_of(sequence, warped ? 4 : 0);
  return o;
}

// One run of `method` on the V = 12 n-gram pair (warped) or the V = 4 Markov pair (plain).
std::string run_method(Method method, bool warped, std::uint32_t sequence) {
  const auto options = method_options(method, warped, sequence);
  const std::vector<Token> prompt{1, 2};
  if (warped) {
    const auto target_model = ngram_target();
    const auto draft_model = toy::NGramModel::draft_of(target_model, 0.4f, 1.3f);
    toy::NGramProvider target(target_model), draft(draft_model);
    return summary(decode(target, draft, prompt, options, sequence));
  }
  auto target = test::markov_target();
  auto draft = test::markov_draft();
  return summary(decode(target, draft, prompt, options, sequence));
}

std::string run_redrafter(ReDrafterVerification mode, bool ngram, std::uint32_t sequence) {
  ReDrafterOptions options;
  options.verification = mode;
  options.width = 3;
  options.depth = 3;
  options.max_new_tokens = 24;
  options.seed = 99;
  options.end_token = end_token_of(sequence, ngram ? 4 : 0);
  const std::vector<Token> prompt{1, 2};
  if (ngram) {
    const auto model = ngram_target();
    toy::NGramProvider target(model, {.hidden_size = 6, .hidden_probabilities = true});
    const auto head = ReDrafterHead::random({.hidden = 18, .exit_dim = 20, .vocab = 12}, 9, 0.3f);
    options.warp = {.temperature = 0.9f, .top_p = 0.9f};
    return summary(decode_redrafter(target, head, prompt, options, sequence));
  }
  const auto model = toy::MarkovModel::from_rows(test::target_table());
  toy::MarkovProvider target(model, {.hidden_size = 0, .hidden_probabilities = true});
  const auto head = toy::markov_head(toy::MarkovModel::from_rows(test::draft_table()), 4);
  return summary(decode_redrafter(target, head, prompt, options, sequence));
}

// The recorded streams of pinned_streams.txt: what ran ("sd plain 0", "redrafter exact ngram 5")
// to its output.
using Pins = std::map<std::string, std::string>;

Pins pinned_streams() {
  std::ifstream in(SPECDEC_PINNED_STREAMS);
  REQUIRE(in);
  Pins pins;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(": ");
    REQUIRE(colon != std::string::npos);
    REQUIRE(pins.emplace(line.substr(0, colon), line.substr(colon + 2)).second);
  }
  CHECK(pins.size() == 56);  // the 40 method runs and 16 ReDrafter runs below, nothing stale
  return pins;
}

const std::string& recorded(const Pins& pins, const std::string& run) {
  const auto it = pins.find(run);
  REQUIRE(it != pins.end());
  return it->second;
}

}  // namespace

TEST_CASE("Every method keeps its pinned seeded stream", "[decode][pinned]") {
  const auto pins = pinned_streams();
  for (const bool warped : {false, true}) {
    for (const Method method : kAllMethods) {
      for (const std::uint32_t sequence : {0u, 5u}) {
        const auto run =
            fmt::format("{} {} {}", method_name(method), warped ? "warped" : "plain", sequence);
        INFO(run);
        CHECK(run_method(method, warped, sequence) == recorded(pins, run));
      }
    }
  }
}

TEST_CASE("Every ReDrafter mode keeps its pinned seeded stream", "[decode][pinned][redrafter]") {
  const auto pins = pinned_streams();
  for (const bool ngram : {false, true}) {
    for (const auto mode : {ReDrafterVerification::kExact, ReDrafterVerification::kGreedy,
                            ReDrafterVerification::kTypical, ReDrafterVerification::kParity}) {
      for (const std::uint32_t sequence : {0u, 5u}) {
        const auto run = fmt::format("redrafter {} {} {}", redrafter_verification_name(mode),
                                     ngram ? "ngram" : "markov", sequence);
        INFO(run);
        CHECK(run_redrafter(mode, ngram, sequence) == recorded(pins, run));
      }
    }
  }
}
