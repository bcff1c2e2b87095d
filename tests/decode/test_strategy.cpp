// SPDX-License-Identifier: MIT
// The DraftStrategy seam: a user-written drafter (prompt lookup) runs in the same Decoder loop as
// the built-in methods, stays lossless, and the built-in MethodStrategy can be built by hand.
#include <catch2/catch.hpp>
#include <numeric>
#include <vector>

#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/verify/chain.hpp"
#include "support/stats.hpp"

using namespace specdec;

namespace {

// Prompt lookup: propose the `length` tokens that followed the latest earlier occurrence of the
// last token. A deterministic draft is a one-hot row, so standard rejection keeps it lossless.
class PromptLookup {
 public:
  explicit PromptLookup(std::int32_t length) : length_(length) {}

  void prepare(std::int64_t vocab, Workspace& /*workspace*/) {
    if (length_ < 1) detail::fail("length", "{} must be >= 1", length_);
    vocab_ = vocab;
  }
  void reset(std::span<const Token> /*prompt*/) {}

  const DraftTree& draft(const StepContext& context) {
    chain_.clear();
    const auto& tokens = context.sequence.tokens;
    for (auto i = static_cast<std::int64_t>(tokens.size()) - 2; i >= 0; --i) {
      if (tokens[static_cast<std::size_t>(i)] != tokens.back()) continue;
      for (std::int32_t k = 0; k < length_; ++k) {
        const auto at = static_cast<std::size_t>(i + 1 + k);
        if (at >= tokens.size()) break;
        chain_.add(tokens[at], k - 1);
      }
      break;
    }
    return chain_;
  }

  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    const auto length = static_cast<std::size_t>(chain_.size());
    const auto v = static_cast<std::size_t>(vocab_);
    draft_rows_.assign(length * v, 0.0f);
    for (std::size_t i = 0; i < length; ++i) draft_rows_[i * v + chain_.tokens[i]] = 1.0f;
    out_.resize(length + 1);
    const auto verdict = verify_chain<float>(
        Rejection{}, std::span<const float>(scores.rows.data, (length + 1) * v), draft_rows_,
        chain_.tokens, vocab_, context.sequence.verify_stream(), out_, context.workspace);
    // The accepted drafts are the chain's first nodes; the token after them is the verdict's.
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    std::iota(kept_.begin(), kept_.end(), 0);
    return {kept_, out_[kept_.size()], 0};
  }

  void commit(const TreeBatch& /*batch*/, std::span<const std::int32_t> /*accepted*/,
              Token /*next*/) {}

 private:
  std::int32_t length_;
  std::int64_t vocab_ = 0;
  DraftTree chain_;
  std::vector<float> draft_rows_;
  std::vector<std::int32_t> kept_;
  std::vector<Token> out_;
};

static_assert(DraftStrategy<PromptLookup>);
static_assert(DraftStrategy<MethodStrategy<toy::MarkovProvider>>);
static_assert(!uses_hidden_states<PromptLookup>);

}  // namespace

TEST_CASE("A user strategy at temperature 0 reproduces greedy target decoding", "[strategy]") {
  const std::vector<Token> prompt{1, 3, 1};
  DecodeOptions greedy;
  greedy.method = Method::kAutoregressive;
  greedy.warp.temperature = 0.0f;
  greedy.max_new_tokens = 40;
  auto t0 = test::markov_target(), d0 = test::markov_draft();
  const auto expected = decode(t0, d0, prompt, greedy).tokens;

  auto target = test::markov_target();
  const auto result = decode(target, PromptLookup(4), greedy.loop(), prompt, 3);
  CHECK(result.tokens == expected);
  // Greedy decoding of this table repeats token 1, so from the third step on every lookup
  // proposes a 1 and it is kept: two tokens per target call.
  CHECK(result.metrics.target_calls <= 22);
  CHECK(result.metrics.acceptance_rate(1) > 0.5);
}

TEST_CASE("A user strategy with a lossless rule samples the target", "[strategy]") {
  // Chi-square over the first three tokens of 100000 sequences; false-failure probability 1e-6.
  constexpr Token kLast = 2;
  auto target = test::markov_target();
  LoopOptions loop;
  loop.max_new_tokens = 3;
  loop.seed = 5;
  Decoder decoder(target, PromptLookup(3), loop);
  const std::vector<Token> prompt{2, 0, 1, kLast};  // the lookup proposes 0 1 2 at first
  std::vector<std::int64_t> counts(64, 0);
  std::int64_t drafted = 0;
  for (std::uint32_t s = 0; s < 100000; ++s) {
    decoder.reset(prompt, s);
    while (!decoder.finished()) decoder.step();
    const auto t = decoder.generated();
    REQUIRE(t.size() == 3);
    ++counts[static_cast<std::size_t>((t[0] * 4 + t[1]) * 4 + t[2])];
    drafted += decoder.metrics().target_tree_tokens;
  }
  CHECK(drafted > 100000);
  const auto expected = test::target_sequence_distribution(kLast, Warp{});
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("A user strategy's bad option is named by the Decoder", "[strategy][errors]") {
  auto target = test::markov_target();
  CHECK_THROWS_WITH(Decoder(target, PromptLookup(0), LoopOptions{}), Catch::Contains("length"));
  LoopOptions loop;
  loop.end_token = 9;
  CHECK_THROWS_WITH(Decoder(target, PromptLookup(2), loop), Catch::Contains("end_token"));
}

TEST_CASE("A hand-built MethodStrategy decodes as decode() does", "[strategy]") {
  DecodeOptions options;
  options.method = Method::kRsdS;
  options.max_new_tokens = 30;
  options.seed = 8;
  const std::vector<Token> prompt{0, 3};
  auto t1 = test::markov_target(), d1 = test::markov_draft();
  const auto expected = decode(t1, d1, prompt, options, 2).tokens;
  auto t2 = test::markov_target(), d2 = test::markov_draft();
  Decoder<toy::MarkovProvider, MethodStrategy<toy::MarkovProvider>> decoder(
      t2, MethodStrategy(d2, options), options.loop());
  decoder.reset(prompt, 2);
  CHECK(decoder.run().tokens == expected);
  CHECK(decoder.strategy().options().method == Method::kRsdS);
}
