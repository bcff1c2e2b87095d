// SPDX-License-Identifier: MIT
// The unchecked tier: the same results as the checked calls on valid input, and a result (any
// result) on input the checked calls reject.
#include <cmath>
#include <limits>

#include "helpers.hpp"
#include "specdec/toy/distributions.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/unchecked.hpp"

using namespace specdec;

TEST_CASE("unchecked::verify_chain and verify_tree equal the checked calls",
          "[verify][unchecked]") {
  toy::ToyRandom rng(12);
  const std::int64_t vocab = 50;
  const std::size_t gamma = 4;
  std::vector<float> target, draft;
  for (std::size_t i = 0; i <= gamma; ++i) {
    const auto row = toy::dirichlet(vocab, 0.5, rng);
    target.insert(target.end(), row.begin(), row.end());
    if (i < gamma) {
      const auto d = toy::dirichlet(vocab, 0.5, rng);
      draft.insert(draft.end(), d.begin(), d.end());
    }
  }
  std::vector<Token> tokens;
  for (std::size_t i = 0; i < gamma; ++i)
    tokens.push_back(detail::sample_row(draft.data() + i * 50, vocab, rng.uniform()));
  std::vector<float> scratch(static_cast<std::size_t>(vocab));
  Workspace ws;
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const RandomStream stream{seed};
    std::vector<Token> want(gamma + 1), got(gamma + 1);
    const auto checked =
        verify_chain<float>(MultiRound{}, target, draft, tokens, vocab, stream, want, ws);
    const auto fast =
        unchecked::verify_chain(MultiRound{},
                                ChainRows<float>{.target = target.data(),
                                                 .draft = draft.data(),
                                                 .draft_tokens = tokens.data(),
                                                 .length = gamma,
                                                 .vocab = vocab},
                                stream, got.data(), scratch.data());
    CHECK(fast.accepted == checked.accepted);
    CHECK(got == want);
  }
  // Two children of the root, the first with a child of its own (level order).
  const std::vector<Token> tree_tokens = {tokens[0], tokens[1], tokens[2]};
  const std::vector<std::int32_t> parents = {-1, -1, 0};
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    const RandomStream stream{seed};
    std::vector<std::int32_t> want(3, -1), got(4, -1);
    const auto rows = std::span<const float>(target).subspan(0, 4 * 50);
    const auto drows = std::span<const float>(target).subspan(50, 4 * 50);  // positive everywhere
    const auto checked = verify_tree<float>(MultiRound{}, {tree_tokens, parents}, rows, drows, vocab,
                                            stream, want, ws);
    std::vector<Token> candidates(4);
    std::vector<std::int32_t> ids(4);
    const auto fast = unchecked::verify_tree(
        MultiRound{}, {tree_tokens, parents},
        TreeRows<float>{.target = rows.data(), .draft = drows.data(), .vocab = vocab}, stream,
        TreeBuffers{.accepted_nodes = got.data(),
                    .candidates = candidates.data(),
                    .ids = ids.data(),
                    .scratch = scratch.data()});
    CHECK(fast.accepted == checked.accepted);
    CHECK(fast.token == checked.token);
    CHECK(std::equal(want.begin(), want.begin() + checked.accepted, got.begin()));
  }
}

TEST_CASE("unchecked calls return a token on rows the checked calls reject",
          "[verify][unchecked]") {
  // NaN and unnormalised rows: the checked call throws, the unchecked one stays inside its rows.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> target = {nan, 0.7f, 0.9f, -0.2f, nan, 2.0f};  // two rows of 3
  const std::vector<float> draft = {0.5f, nan, 0.5f};
  const std::vector<Token> tokens = {1};
  std::vector<Token> out(2, -7);
  std::vector<float> scratch(3);
  Workspace ws;
  CHECK_THROWS_AS(
      verify_chain<float>(Rejection{}, target, draft, tokens, 3, RandomStream{5}, out, ws), Error);
  for (std::uint32_t seed = 0; seed < 50; ++seed) {
    const auto verdict =
        unchecked::verify_chain(Rejection{},
                                ChainRows<float>{.target = target.data(),
                                                 .draft = draft.data(),
                                                 .draft_tokens = tokens.data(),
                                                 .length = 1,
                                                 .vocab = 3},
                                RandomStream{seed}, out.data(), scratch.data());
    REQUIRE((verdict.accepted == 0 || verdict.accepted == 1));
    for (std::int32_t i = 0; i < verdict.emitted; ++i) {
      CHECK(out[static_cast<std::size_t>(i)] >= 0);
      CHECK(out[static_cast<std::size_t>(i)] < 3);
    }
  }
}
