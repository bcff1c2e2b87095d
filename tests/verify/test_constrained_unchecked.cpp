// SPDX-License-Identifier: MIT
// The unchecked forms of the constrained block, greedy and typical chain walks
// (constrained::unchecked::verify_block_logits and its greedy and typical siblings) equal their
// checked namesakes bit for bit on random chains of 0 to 5 drafts at V = 40 under every kind of
// constraint, on scratch of exactly the documented size.
#include <vector>

#include "helpers.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/constrained_chain_rules.hpp"

using namespace specdec;

namespace {

constexpr std::int64_t kV = 40;

// A random chain with every kind of constraint, and the storage its spans view.
struct Case {
  std::vector<float> target, draft;
  std::vector<Token> tokens, allowed, stop, bad_words, tail;
  std::vector<std::int32_t> bitmask, offsets;
  std::vector<constrained::PenalisedToken> penalised;
  constrained::LogitConstraints c;

  Case(std::int64_t length, toy::ToyRandom& rng) {
    const auto rows = static_cast<std::size_t>(length + 1);
    for (std::size_t i = 0; i < rows * kV; ++i) target.push_back(2.0f * float(rng.normal()));
    for (std::size_t i = 0; i < (rows - 1) * kV; ++i) {
      draft.push_back(target[i] + float(rng.normal()));
    }
    // Drafts: mostly the target's argmax (so chains get accepted), else any token.
    for (std::int64_t i = 0; i < length; ++i) {
      const float* row = target.data() + i * kV;
      Token best = 0;
      for (Token t = 1; t < kV; ++t) best = row[t] > row[best] ? t : best;
      tokens.push_back(rng.uniform() < 0.6f ? best : rng.below(kV));
    }
    // Token 0 is always allowed, so no row is empty.
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::int64_t w = 0; w < 2; ++w) {
        std::uint32_t bits = 0;
        for (int j = 0; j < 32; ++j) bits |= (rng.uniform() < 0.8f ? 1u : 0u) << j;
        if (w == 0) bits |= 1u;
        bitmask.push_back(static_cast<std::int32_t>(bits));
      }
    }
    for (Token t = 0; t < kV; ++t) {
      if (t == 0 || rng.uniform() < 0.7f) allowed.push_back(t);
    }
    stop = {1 + rng.below(kV - 1)};
    bad_words = {3, 4, 5 + rng.below(kV - 5)};
    offsets = {0, 2, 3};  // the words [3, 4] and [x]
    tail = {3};
    penalised = {{.token = 3, .count = 2, .in_prompt = true},
                 {.token = 7, .count = 0, .in_prompt = true}};
    c = {
        .bitmask = bitmask,
        .allowed = allowed,
        .penalties = {.repetition = 1.3f, .frequency = 0.2f, .presence = 0.4f, .tokens = penalised},
        .stop_tokens = stop,
        .min_tokens = 4,
        .output_length = 2,
        .bad_words = bad_words,
        .bad_word_offsets = offsets,
        .output_tail = tail};
  }

  [[nodiscard]] ChainLogits<float> logits() const {
    return {.target = target.data(),
            .draft = draft.data(),
            .draft_tokens = tokens.data(),
            .length = tokens.size(),
            .vocab = kV};
  }
};

void check_same(const ChainVerdict& checked, const ChainVerdict& unchecked,
                const std::vector<Token>& checked_out, const std::vector<Token>& unchecked_out) {
  CHECK(checked.accepted == unchecked.accepted);
  CHECK(checked.emitted == unchecked.emitted);
  CHECK(checked_out == unchecked_out);
}

}  // namespace

TEST_CASE("unchecked constrained block, greedy and typical walks equal the checked forms",
          "[verify][logits][constraints][unchecked]") {
  toy::ToyRandom rng(71);
  const Warp warp{.temperature = 0.9f};  // no truncation: every draft token has q > 0
  const Typical rule{.epsilon = 0.2f, .delta = 0.5f};
  std::int32_t accepted = 0;
  for (std::uint32_t seed = 0; seed < 60; ++seed) {
    const std::int64_t length = seed % 6;
    const Case k(length, rng);
    const RandomStream stream{.seed = seed, .position = 3};
    const auto n = static_cast<std::size_t>(length + 1);
    Workspace ws;
    // Scratch of the documented sizes, as a Workspace hands it out (aligned to 64).
    const std::size_t block_size = constrained::verify_block_logits_workspace_size(kV, length);
    const std::size_t chain_size = constrained::verify_chain_logits_workspace_size(kV, length);
    Workspace block_bytes(block_size), chain_bytes(chain_size);
    std::byte* block_scratch = block_bytes.take<std::byte>(block_size).data();
    std::byte* chain_scratch = chain_bytes.take<std::byte>(chain_size).data();
    INFO("seed " << seed);
    std::vector<Token> a(n, -1), b(n, -1);
    const ChainVerdict block =
        constrained::verify_block_logits(warp, k.target, k.draft, k.tokens, kV, k.c, stream, a, ws);
    check_same(block,
               constrained::unchecked::verify_block_logits(warp, k.logits(), k.c, stream, b.data(),
                                                           block_scratch),
               a, b);
    accepted += block.accepted;
    std::fill(a.begin(), a.end(), -1);
    std::fill(b.begin(), b.end(), -1);
    const ChainVerdict greedy =
        constrained::verify_chain_greedy_logits(k.target, k.tokens, kV, k.c, a, ws);
    check_same(greedy,
               constrained::unchecked::verify_chain_greedy_logits(k.logits(), k.c, b.data(),
                                                                  chain_scratch),
               a, b);
    accepted += greedy.accepted;
    std::fill(a.begin(), a.end(), -1);
    std::fill(b.begin(), b.end(), -1);
    const ChainVerdict typical = constrained::verify_chain_typical_logits(
        warp, rule, k.target, k.tokens, kV, k.c, stream, a, ws);
    check_same(typical,
               constrained::unchecked::verify_chain_typical_logits(warp, rule, k.logits(), k.c,
                                                                   stream, b.data(), chain_scratch),
               a, b);
    accepted += typical.accepted;
  }
  CHECK(accepted > 30);  // the chains are not all rejected at once
}
