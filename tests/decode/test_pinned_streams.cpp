// SPDX-License-Identifier: MIT
// Pinned token streams: a few seeded runs of every decoding method and every ReDrafter mode,
// recorded once, so a change to the decoding loop that moves any random stream fails here.
#include <array>
#include <catch2/catch.hpp>
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

}  // namespace

struct PinnedMethodRun {
  Method method;
  bool warped;
  std::uint32_t sequence;
  const char* expected;
};

struct PinnedReDrafterRun {
  ReDrafterVerification verification;
  bool ngram;
  std::uint32_t sequence;
  const char* expected;
};

TEST_CASE("Every method keeps its pinned seeded stream", "[decode][pinned]") {
  const PinnedMethodRun runs[] = {
      {Method::kAutoregressive, false, 0,
       "3 0 0 0 0 3 3 0 0 0 1 2 3 0 2 2 3 2 3 0 0 2 1 2 | target 24 draft 0 nodes 0 accepted 0"},
      {Method::kAutoregressive, false, 5, "0 | target 1 draft 0 nodes 0 accepted 0"},
      {Method::kSd, false, 0,
       "1 3 2 2 3 3 0 1 2 3 0 0 0 1 3 1 1 1 1 1 1 3 2 0 | target 9 draft 27 nodes 27 accepted 18"},
      {Method::kSd, false, 5, "0 | target 1 draft 3 nodes 3 accepted 0"},
      {Method::kSdBlock, false, 0,
       "0 1 3 1 3 1 1 1 2 1 1 0 0 0 3 1 1 2 3 0 1 2 3 0 | target 9 draft 27 nodes 27 accepted 18"},
      {Method::kSdBlock, false, 5, "0 | target 1 draft 3 nodes 3 accepted 0"},
      {Method::kSpecInfer, false, 0,
       "1 3 0 1 2 3 0 1 3 0 1 2 1 0 2 0 2 3 1 1 0 2 1 2 | target 8 draft 24 nodes 48 accepted 16"},
      {Method::kSpecInfer, false, 5, "0 | target 1 draft 3 nodes 6 accepted 3"},
      {Method::kSpecTr, false, 0,
       "1 3 0 1 2 3 0 1 3 0 1 2 3 2 3 0 0 1 0 1 0 2 1 2 | target 11 draft 33 nodes 66 accepted 13"},
      {Method::kSpecTr, false, 5, "0 | target 1 draft 3 nodes 6 accepted 3"},
      {Method::kRsdC, false, 0,
       "1 2 3 3 0 0 0 0 2 3 2 3 2 2 1 2 0 1 1 1 1 3 2 1 | target 9 draft 18 nodes 72 accepted 15"},
      {Method::kRsdC, false, 5, "3 3 1 0 | target 2 draft 4 nodes 16 accepted 4"},
      {Method::kRsdS, false, 0,
       "1 1 2 3 3 1 0 2 0 0 2 3 0 0 3 0 0 3 0 1 1 3 2 3 | target 8 draft 24 nodes 48 accepted 16"},
      {Method::kRsdS, false, 5, "3 3 0 | target 1 draft 3 nodes 6 accepted 3"},
      {Method::kMtad, false, 0,
       "1 1 2 3 0 0 1 3 2 1 1 3 0 1 3 2 2 3 0 1 1 1 1 1 | target 10 draft 30 nodes 30 accepted 17"},
      {Method::kMtad, false, 5, "3 3 0 | target 1 draft 3 nodes 3 accepted 3"},
      {Method::kCascade, false, 0,
       "1 3 2 2 3 3 0 1 2 3 0 0 0 1 3 1 1 1 1 1 1 3 2 0 | target 9 draft 27 nodes 27 accepted 18"},
      {Method::kCascade, false, 5, "0 | target 1 draft 3 nodes 3 accepted 0"},
      {Method::kLossy, false, 0,
       "1 3 2 2 3 3 0 1 2 3 0 0 0 1 3 1 1 1 3 0 1 1 1 1 | target 8 draft 24 nodes 24 accepted 17"},
      {Method::kLossy, false, 5, "0 | target 1 draft 3 nodes 3 accepted 0"},
      {Method::kAutoregressive, true, 0,
       "11 2 9 5 0 11 11 4 5 3 5 10 8 3 9 8 7 8 3 2 2 11 2 11 | target 24 draft 0 nodes 0 accepted "
       "0"},
      {Method::kAutoregressive, true, 5, "3 11 3 9 5 5 11 4 | target 8 draft 0 nodes 0 accepted 0"},
      {Method::kSd, true, 0,
       "3 11 9 10 11 7 0 6 4 9 8 5 4 9 10 5 3 5 7 3 5 11 10 1 | target 12 draft 36 nodes 36 "
       "accepted 12"},
      {Method::kSd, true, 5,
       "10 1 7 3 11 5 9 7 2 2 11 2 9 4 | target 6 draft 18 nodes 18 accepted 8"},
      {Method::kSdBlock, true, 0,
       "3 11 9 6 3 2 0 7 10 7 0 7 4 6 9 2 6 11 0 0 2 6 6 1 | target 6 draft 18 nodes 18 accepted "
       "18"},
      {Method::kSdBlock, true, 5,
       "10 1 7 3 11 3 7 11 6 1 1 1 1 5 4 | target 7 draft 21 nodes 21 accepted 8"},
      {Method::kSpecInfer, true, 0,
       "3 11 3 7 11 6 1 1 11 0 0 11 5 5 10 4 3 9 8 5 4 7 4 11 | target 10 draft 30 nodes 60 "
       "accepted 14"},
      {Method::kSpecInfer, true, 5, "10 1 4 | target 1 draft 3 nodes 6 accepted 2"},
      {Method::kSpecTr, true, 0,
       "3 11 3 7 11 6 1 1 11 0 4 2 0 7 10 4 3 4 7 11 6 2 11 2 | target 10 draft 30 nodes 60 "
       "accepted 14"},
      {Method::kSpecTr, true, 5, "10 1 4 | target 1 draft 3 nodes 6 accepted 2"},
      {Method::kRsdC, true, 0,
       "11 0 1 0 5 10 5 2 0 7 10 8 3 8 10 5 5 6 0 11 4 5 6 8 | target 10 draft 20 nodes 80 "
       "accepted 14"},
      {Method::kRsdC, true, 5,
       "8 10 5 5 6 9 9 1 7 3 5 2 5 4 | target 6 draft 12 nodes 48 accepted 9"},
      {Method::kRsdS, true, 0,
       "11 0 4 2 7 7 5 8 3 2 2 4 1 1 5 1 7 3 11 3 7 10 8 8 | target 7 draft 21 nodes 42 accepted "
       "17"},
      {Method::kRsdS, true, 5,
       "8 10 5 9 6 8 6 9 9 1 8 3 6 8 6 5 4 | target 6 draft 18 nodes 36 accepted 11"},
      {Method::kMtad, true, 0,
       "3 11 5 5 10 8 8 11 2 9 8 0 1 11 11 8 1 9 2 3 11 3 6 0 | target 6 draft 18 nodes 18 "
       "accepted 18"},
      {Method::kMtad, true, 5,
       "3 5 7 6 9 2 3 8 6 1 7 9 9 1 8 5 4 | target 5 draft 15 nodes 15 accepted 13"},
      {Method::kCascade, true, 0,
       "3 11 9 10 11 7 0 6 4 9 8 5 4 9 10 5 3 5 7 3 5 11 10 1 | target 12 draft 36 nodes 36 "
       "accepted 12"},
      {Method::kCascade, true, 5,
       "10 1 7 3 11 5 9 7 2 2 11 2 9 4 | target 6 draft 18 nodes 18 accepted 8"},
      {Method::kLossy, true, 0,
       "3 11 9 10 11 7 0 6 4 9 8 0 1 10 11 8 1 2 11 2 3 8 6 6 | target 9 draft 27 nodes 27 "
       "accepted 17"},
      {Method::kLossy, true, 5,
       "10 1 7 3 11 5 9 7 2 2 11 2 9 8 0 3 6 1 1 1 5 3 5 7 | target 11 draft 33 nodes 33 accepted "
       "16"},
  };
  for (const auto& run : runs) {
    INFO(method_name(run.method) << (run.warped ? " warped" : " plain") << " sequence "
                                 << run.sequence);
    CHECK(run_method(run.method, run.warped, run.sequence) == run.expected);
  }
}

TEST_CASE("Every ReDrafter mode keeps its pinned seeded stream", "[decode][pinned][redrafter]") {
  const PinnedReDrafterRun runs[] = {
      {ReDrafterVerification::kExact, false, 0,
       "3 2 3 2 2 3 0 0 2 3 2 0 0 0 2 3 2 3 3 0 0 1 0 1 | target 9 draft 24 nodes 72 accepted 17"},
      {ReDrafterVerification::kExact, false, 5, "2 3 0 | target 2 draft 3 nodes 9 accepted 3"},
      {ReDrafterVerification::kGreedy, false, 0,
       "3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 | target 24 draft 69 nodes 138 accepted 0"},
      {ReDrafterVerification::kGreedy, false, 5,
       "3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 3 2 | target 24 draft 69 nodes 138 accepted 0"},
      {ReDrafterVerification::kTypical, false, 0,
       "3 0 2 1 2 1 3 0 1 3 0 0 2 1 3 0 0 2 1 0 1 3 0 0 | target 7 draft 18 nodes 33 accepted 18"},
      {ReDrafterVerification::kTypical, false, 5, "2 1 3 0 | target 2 draft 3 nodes 6 accepted 3"},
      {ReDrafterVerification::kParity, false, 0,
       "3 0 1 1 2 1 1 1 2 1 1 1 3 1 3 0 1 0 2 1 1 2 1 1 | target 8 draft 21 nodes 39 accepted 17"},
      {ReDrafterVerification::kParity, false, 5,
       "2 1 1 1 1 3 2 1 1 3 0 | target 5 draft 12 nodes 22 accepted 8"},
      {ReDrafterVerification::kExact, true, 0,
       "11 2 9 10 4 3 4 11 7 0 2 10 11 6 10 11 6 9 2 3 8 6 1 1 | target 16 draft 45 nodes 135 "
       "accepted 8"},
      {ReDrafterVerification::kExact, true, 5, "11 4 | target 2 draft 3 nodes 9 accepted 2"},
      {ReDrafterVerification::kGreedy, true, 0,
       "11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 | target 22 draft 63 nodes 117 "
       "accepted 2"},
      {ReDrafterVerification::kGreedy, true, 5,
       "11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 11 2 | target 22 draft 63 nodes 117 "
       "accepted 2"},
      {ReDrafterVerification::kTypical, true, 0,
       "11 2 11 2 11 2 9 3 7 10 7 0 2 7 1 1 8 10 0 9 9 9 8 7 | target 13 draft 36 nodes 75 "
       "accepted 11"},
      {ReDrafterVerification::kTypical, true, 5,
       "11 2 9 8 3 9 3 8 10 1 9 2 6 11 11 11 11 4 | target 11 draft 30 nodes 66 accepted 7"},
      {ReDrafterVerification::kParity, true, 0,
       "11 4 5 9 6 8 8 11 4 10 5 5 5 5 2 11 7 8 10 5 9 7 0 6 | target 16 draft 45 nodes 103 "
       "accepted 9"},
      {ReDrafterVerification::kParity, true, 5,
       "11 2 11 2 11 2 9 8 3 9 11 11 6 1 1 1 11 9 10 11 11 11 4 | target 13 draft 36 nodes 80 "
       "accepted 10"},
  };
  for (const auto& run : runs) {
    INFO(redrafter_verification_name(run.verification)
         << (run.ngram ? " n-gram" : " markov") << " sequence " << run.sequence);
    CHECK(run_redrafter(run.verification, run.ngram, run.sequence) == run.expected);
  }
}
