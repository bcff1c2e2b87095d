// SPDX-License-Identifier: MIT
// Verification from logits (verify_chain_logits, verify_block_logits, verify_tree_logits,
// verify_tree_target_only_logits, verify_chain_target_only_logits and their unchecked forms): the
// same verdicts and tokens
// as the row-based entries on the warped rows, for the same streams, and bad input named.
#include <cmath>
#include <limits>
#include <tuple>

#include "helpers.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/unchecked.hpp"
#include "specdec/verify/block_logits.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/tree_logits.hpp"

using namespace specdec;
using Catch::Contains;

namespace {

/// The first `n` tokens of `v` (the ones a verdict emitted).
std::vector<Token> head(const std::vector<Token>& v, std::size_t n) {
  return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)};
}

// Sizes: short rows (the plain kernels), rows past kSmallRow (the rough bounds) and rows past
// kFilledRowMin (residuals and bonus rows drawn a block at a time).
constexpr std::int64_t kLogitVocabs[] = {40, 300, 9000};

std::vector<Warp> logit_warps() {
  return {Warp{},
          Warp{.temperature = 0.7f},
          Warp{.temperature = 1.3f, .top_k = 5},
          Warp{.top_p = 0.8f},
          Warp{.temperature = 0.9f, .top_k = 20, .top_p = 0.9f},
          Warp{.min_p = 0.05f},
          Warp{.temperature = 0.0f}};
}

// `rows` rows of logits: normal(0, 2), about one entry in 50 at -inf (never a whole row).
std::vector<float> random_logit_rows(std::int64_t rows, std::int64_t vocab, toy::ToyRandom& rng) {
  std::vector<float> out(static_cast<std::size_t>(rows * vocab));
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = rng.uniform() < 0.02 && i % static_cast<std::size_t>(vocab) != 0
                 ? -std::numeric_limits<float>::infinity()
                 : static_cast<float>(2.0 * rng.normal());
  }
  return out;
}

// Draft logits near the target's: noise of `spread`, so that both acceptance and rejection occur.
std::vector<float> nearby_logits(const std::vector<float>& target, std::size_t count, double spread,
                                 toy::ToyRandom& rng) {
  std::vector<float> out(target.begin(), target.begin() + static_cast<std::ptrdiff_t>(count));
  for (float& x : out) {
    if (std::isfinite(x)) x += static_cast<float>(spread * rng.normal());
  }
  return out;
}

// A token drawn from a warped row (positive probability).
Token draw_from(const float* row, std::int64_t vocab, toy::ToyRandom& rng) {
  return detail::sample_row(row, vocab, static_cast<float>(rng.uniform()));
}

struct LogitChain {
  std::vector<float> target, draft;            // logits
  std::vector<float> target_rows, draft_rows;  // their warps
  std::vector<Token> tokens;
};

LogitChain make_logit_chain(const Warp& warp, std::int64_t vocab, std::size_t length,
                            toy::ToyRandom& rng) {
  const auto v = static_cast<std::size_t>(vocab);
  LogitChain c;
  c.target = random_logit_rows(static_cast<std::int64_t>(length) + 1, vocab, rng);
  c.draft = nearby_logits(c.target, length * v, 0.7, rng);
  c.target_rows = test::warp_rows(warp, c.target, vocab);
  c.draft_rows = test::warp_rows(warp, c.draft, vocab);
  for (std::size_t i = 0; i < length; ++i) {
    c.tokens.push_back(draw_from(c.draft_rows.data() + i * v, vocab, rng));
  }
  return c;
}

/// For every vocabulary size and warp, a chain of length 4 from make_logit_chain (tokens drawn
/// from nearby draft rows: accepted and rejected positions both occur) and the streams {seed
/// 0..11, `stream`'s sequence and position}: `verdicts(c, warp, vocab, stream, want, got, fast,
/// scratch)` verifies on the warped rows (tokens into `want`), from logits (`got`) and unchecked
/// (`fast`, with 64-byte aligned scratch). The three agree on the verdict and tokens, and both
/// outcomes (a rejection, every draft accepted) were compared.
template <class Verdicts>
void check_chain_verdicts(std::uint64_t seed_of_cases, const RandomStream& stream,
                          Verdicts verdicts) {
  toy::ToyRandom rng(seed_of_cases);
  const std::size_t length = 4;
  std::int32_t rejections = 0, full = 0;
  for (const auto vocab : kLogitVocabs) {
    for (const auto& warp : logit_warps()) {
      const auto c = make_logit_chain(warp, vocab, length, rng);
      std::vector<std::byte> scratch(verify_chain_logits_workspace_size(vocab) + 64);
      auto* aligned = reinterpret_cast<std::byte*>(
          (reinterpret_cast<std::uintptr_t>(scratch.data()) + 63) / 64 * 64);
      for (std::uint32_t seed = 0; seed < 12; ++seed) {
        INFO("vocab " << vocab << " temperature " << warp.temperature << " top_k " << warp.top_k
                      << " top_p " << warp.top_p << " min_p " << warp.min_p << " seed " << seed);
        const RandomStream s{seed, stream.sequence, stream.position};
        std::vector<Token> want(length + 1), got(length + 1), fast(length + 1);
        const auto [expected, verdict, unchecked_verdict] =
            verdicts(c, warp, vocab, s, want, got, fast, aligned);
        CHECK(verdict.accepted == expected.accepted);
        CHECK(verdict.emitted == expected.emitted);
        CHECK(unchecked_verdict.accepted == expected.accepted);
        const auto emitted = static_cast<std::size_t>(expected.emitted);
        CHECK(head(got, emitted) == head(want, emitted));
        CHECK(head(fast, emitted) == head(want, emitted));
        rejections += expected.accepted < static_cast<std::int32_t>(length) ? 1 : 0;
        full += expected.accepted == static_cast<std::int32_t>(length) ? 1 : 0;
      }
    }
  }
  CHECK(rejections > 20);
  CHECK(full > 5);
}

}  // namespace

TEST_CASE("verify_chain_logits equals verify_chain on the warped rows", "[verify][logits]") {
  Workspace ws;
  check_chain_verdicts(
      41, {.sequence = 3, .position = 7},
      [&](const LogitChain& c, const Warp& warp, std::int64_t vocab, const RandomStream& stream,
          std::vector<Token>& want, std::vector<Token>& got, std::vector<Token>& fast,
          std::byte* aligned) {
        return std::tuple{
            verify_chain<float>(Rejection{}, c.target_rows, c.draft_rows, c.tokens, vocab, stream,
                                want, ws),
            verify_chain_logits<float>(warp, c.target, c.draft, c.tokens, vocab, stream, got, ws),
            unchecked::verify_chain_logits(warp,
                                           ChainLogits<float>{.target = c.target.data(),
                                                              .draft = c.draft.data(),
                                                              .draft_tokens = c.tokens.data(),
                                                              .length = c.tokens.size(),
                                                              .vocab = vocab},
                                           stream, fast.data(), aligned)};
      });
}

TEST_CASE("verify_block_logits equals verify_block on the warped rows", "[verify][logits]") {
  toy::ToyRandom rng(42);
  Workspace ws;
  const std::size_t length = 5;
  std::int32_t partial = 0;
  for (const auto vocab : kLogitVocabs) {
    for (const auto& warp : logit_warps()) {
      const auto c = make_logit_chain(warp, vocab, length, rng);
      for (std::uint32_t seed = 0; seed < 10; ++seed) {
        INFO("vocab " << vocab << " temperature " << warp.temperature << " top_k " << warp.top_k
                      << " top_p " << warp.top_p << " seed " << seed);
        const RandomStream stream{seed, 1};
        std::vector<Token> want(length + 1), got(length + 1);
        const auto expected =
            verify_block<float>(c.target_rows, c.draft_rows, c.tokens, vocab, stream, want, ws);
        const auto verdict =
            verify_block_logits<float>(warp, c.target, c.draft, c.tokens, vocab, stream, got, ws);
        CHECK(verdict.accepted == expected.accepted);
        const auto emitted = static_cast<std::size_t>(expected.emitted);
        CHECK(head(got, emitted) == head(want, emitted));
        partial += expected.accepted < static_cast<std::int32_t>(length) ? 1 : 0;
      }
    }
  }
  CHECK(partial > 20);
}

namespace {

// A random level-order tree of about `nodes` nodes: each node of a level gets 0 to
// `max_children` children (the root at least one), tokens drawn from the parent's warped draft
// row; `distinct` draws siblings without replacement, otherwise about one sibling in four
// repeats an earlier one's token.
struct LogitTree {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
};

LogitTree make_logit_tree(const std::vector<float>& draft_rows, std::int64_t vocab,
                          std::int32_t nodes, std::int32_t max_children, bool distinct,
                          toy::ToyRandom& rng) {
  const auto v = static_cast<std::size_t>(vocab);
  LogitTree t;
  std::vector<std::int32_t> level{-1};
  while (!level.empty() && static_cast<std::int32_t>(t.tokens.size()) < nodes) {
    std::vector<std::int32_t> next;
    for (const auto parent : level) {
      const auto row = static_cast<std::size_t>(parent + 1);
      std::vector<float> q(draft_rows.begin() + static_cast<std::ptrdiff_t>(row * v),
                           draft_rows.begin() + static_cast<std::ptrdiff_t>((row + 1) * v));
      auto children = static_cast<std::int32_t>(rng.uniform() * (max_children + 1));
      if (parent == -1) children = std::max(children, 1);
      for (std::int32_t k = 0; k < children; ++k) {
        if (static_cast<std::int32_t>(t.tokens.size()) >= nodes) break;
        float total = 0.0f;
        for (float x : q) total += x;
        if (!(total > 0.0f)) break;
        Token x = static_cast<Token>(
            detail::sample_weights(q.data(), vocab, total, static_cast<float>(rng.uniform())));
        if (!distinct && k > 0 && rng.uniform() < 0.25) x = t.tokens.back();
        if (distinct) q[static_cast<std::size_t>(x)] = 0.0f;
        t.tokens.push_back(x);
        t.parents.push_back(parent);
        next.push_back(static_cast<std::int32_t>(t.tokens.size()) - 1);
      }
    }
    level = next;
  }
  return t;
}

std::vector<Rule> logit_rules() {
  return {Rejection{},
          MultiRound{},
          Recursive{},
          SpecTr{},
          Lossy{.alpha = 0.2f, .beta = 1.0f},
          Lossy{.alpha = 0.3f, .greedy = true},
          Cascade{.deferral = Deferral::kChow, .alpha = 0.3f},
          Typical{},
          Greedy{}};
}

}  // namespace

TEST_CASE("verify_tree_logits equals verify_tree for every rule on random trees",
          "[verify][logits]") {
  toy::ToyRandom rng(43);
  Workspace ws;
  std::int32_t rejections = 0, bonuses = 0;
  for (const auto vocab : {std::int64_t{40}, std::int64_t{9000}}) {
    for (const auto& warp : logit_warps()) {
      const std::int32_t nodes = 12;
      const auto target = random_logit_rows(nodes + 1, vocab, rng);
      const auto draft = nearby_logits(target, target.size(), 0.7, rng);
      const auto target_rows = test::warp_rows(warp, target, vocab);
      const auto draft_rows = test::warp_rows(warp, draft, vocab);
      // The cascade deferral and the greedy lossy test read the plain softmax of the logits.
      const auto raw_target_rows = test::warp_rows(Warp{}, target, vocab);
      const auto raw_draft_rows = test::warp_rows(Warp{}, draft, vocab);
      for (std::size_t index = 0; const auto& rule : logit_rules()) {
        ++index;
        const bool single = max_candidates(rule, vocab) == 1;
        const auto tree = make_logit_tree(draft_rows, vocab, nodes, single ? 1 : 3,
                                          draws_without_replacement(rule), rng);
        const TreeView view{tree.tokens, tree.parents};
        const auto size = (tree.tokens.size() + 1) * static_cast<std::size_t>(vocab);
        const auto first = [size](const std::vector<float>& rows) {
          return std::span<const float>(rows).first(size);
        };
        for (std::uint32_t seed = 0; seed < 6; ++seed) {
          INFO("vocab " << vocab << " temperature " << warp.temperature << " top_k " << warp.top_k
                        << " top_p " << warp.top_p << " rule " << index << " seed " << seed);
          const RandomStream stream{seed, 2};
          std::vector<std::int32_t> want(tree.tokens.size() + 1), got(tree.tokens.size() + 1);
          const auto expected = verify_tree<float>(rule, view,
                                                   {first(target_rows), first(draft_rows),
                                                    first(raw_target_rows), first(raw_draft_rows)},
                                                   vocab, stream, want, ws);
          const auto verdict = verify_tree_logits<float>(
              rule, warp, view, {first(target), first(draft)}, vocab, stream, got, ws);
          test::check_same_tree_verdict(verdict, expected, got, want);
          rejections += expected.bonus ? 0 : 1;
          bonuses += expected.bonus ? 1 : 0;
        }
      }
    }
  }
  CHECK(rejections > 50);
  CHECK(bonuses > 20);
}

TEST_CASE("verify_tree_target_only_logits equals verify_tree_target_only", "[verify][logits]") {
  toy::ToyRandom rng(44);
  Workspace ws;
  for (const auto vocab : kLogitVocabs) {
    for (const auto& warp : logit_warps()) {
      const std::int32_t nodes = 16;
      const auto target = random_logit_rows(nodes + 1, vocab, rng);
      const auto target_rows = test::warp_rows(warp, target, vocab);
      // Children drawn from the target itself (often accepted), repeats included.
      const auto tree = make_logit_tree(target_rows, vocab, nodes, 3, false, rng);
      const TreeView view{tree.tokens, tree.parents};
      const auto size = (tree.tokens.size() + 1) * static_cast<std::size_t>(vocab);
      for (std::uint32_t seed = 0; seed < 8; ++seed) {
        INFO("vocab " << vocab << " top_k " << warp.top_k << " top_p " << warp.top_p << " seed "
                      << seed);
        const RandomStream stream{seed, 4};
        std::vector<std::int32_t> want(tree.tokens.size() + 1), got(tree.tokens.size() + 1);
        const auto expected = verify_tree_target_only<float>(
            view, std::span<const float>(target_rows).first(size), vocab, stream, want, ws);
        const auto verdict = verify_tree_target_only_logits<float>(
            warp, view, std::span<const float>(target).first(size), vocab, stream, got, ws);
        test::check_same_tree_verdict(verdict, expected, got, want);
      }
    }
  }
}

TEST_CASE("verify_chain_target_only_logits equals verify_chain_target_only on the warped rows",
          "[verify][logits]") {
  Workspace ws;
  check_chain_verdicts(45, {.sequence = 5, .position = 2},
                       [&](const LogitChain& c, const Warp& warp, std::int64_t vocab,
                           const RandomStream& stream, std::vector<Token>& want,
                           std::vector<Token>& got, std::vector<Token>& fast, std::byte* aligned) {
                         return std::tuple{verify_chain_target_only<float>(c.target_rows, c.tokens,
                                                                           vocab, stream, want, ws),
                                           verify_chain_target_only_logits<float>(
                                               warp, c.target, c.tokens, vocab, stream, got, ws),
                                           unchecked::verify_chain_target_only_logits(
                                               warp,
                                               ChainLogits<float>{.target = c.target.data(),
                                                                  .draft_tokens = c.tokens.data(),
                                                                  .length = c.tokens.size(),
                                                                  .vocab = vocab},
                                               stream, fast.data(), aligned)};
                       });
}

TEST_CASE("verify_chain_target_only_logits draws a correction other than the rejected token",
          "[verify][logits]") {
  // Token 3 holds 0.9 of row 0 at every size (uncut rows, written or drawn a block at a time):
  // a correction that kept it would repeat it nine times in ten.
  Workspace ws;
  for (const auto vocab : kLogitVocabs) {
    std::vector<float> target(static_cast<std::size_t>(2 * vocab), 0.0f);
    target[3] = static_cast<float>(std::log(9.0 * static_cast<double>(vocab - 1)));
    const auto target_rows = test::warp_rows(Warp{}, target, vocab);
    const std::vector<Token> tokens = {3};
    std::int32_t rejections = 0;
    for (std::uint32_t seed = 0; seed < 200; ++seed) {
      INFO("vocab " << vocab << " seed " << seed);
      const RandomStream stream{seed, 6};
      std::vector<Token> want(2), got(2);
      const auto expected =
          verify_chain_target_only<float>(target_rows, tokens, vocab, stream, want, ws);
      const auto verdict =
          verify_chain_target_only_logits<float>(Warp{}, target, tokens, vocab, stream, got, ws);
      CHECK(verdict.accepted == expected.accepted);
      CHECK(got[0] == want[0]);
      if (expected.accepted == 0) {
        ++rejections;
        CHECK(got[0] != 3);
      } else {
        CHECK(got[1] == want[1]);
      }
    }
    CHECK(rejections > 5);
  }
}

TEST_CASE("verify_chain_target_only_logits accepts a token that holds the nucleus alone",
          "[verify][logits]") {
  // Row 0 gives token 5 about 0.97 of its softmax mass, above top_p = 0.9: the nucleus is token
  // 5 alone and its warped probability 1 (to rounding), decided on the rough pass.
  Workspace ws;
  const std::int64_t vocab = 9000;
  toy::ToyRandom rng(47);
  auto target = random_logit_rows(2, vocab, rng);
  target[5] = static_cast<float>(std::log(9000.0 * 30.0)) + 6.0f;
  const std::vector<Token> tokens = {5};
  for (const auto& warp : {Warp{.top_p = 0.9f}, Warp{.temperature = 1.2f, .top_p = 0.5f}}) {
    const auto target_rows = test::warp_rows(warp, target, vocab);
    REQUIRE(target_rows[5] > 0.999f);
    for (std::uint32_t seed = 0; seed < 20; ++seed) {
      const RandomStream stream{seed, 8};
      std::vector<Token> want(2), got(2);
      const auto expected =
          verify_chain_target_only<float>(target_rows, tokens, vocab, stream, want, ws);
      const auto verdict =
          verify_chain_target_only_logits<float>(warp, target, tokens, vocab, stream, got, ws);
      CHECK(verdict.accepted == expected.accepted);
      CHECK(got == want);
    }
  }
}

TEST_CASE("verify_chain_batch_target_only_logits equals the single-sequence calls",
          "[verify][logits][batch]") {
  // Three sequences of 3, 0 and 2 drafts at V = 9000, a warp each, on two threads.
  toy::ToyRandom rng(46);
  const std::int64_t vocab = 9000;
  const auto v = static_cast<std::size_t>(vocab);
  const std::vector<std::int32_t> offsets = {0, 3, 3, 5};
  const std::vector<Warp> warps = {Warp{.top_p = 0.8f}, Warp{.temperature = 0.7f},
                                   Warp{.temperature = 0.9f, .top_k = 20, .top_p = 0.9f}};
  std::vector<float> logits;
  std::vector<Token> tokens;
  for (std::size_t b = 0; b < 3; ++b) {
    const auto gamma = static_cast<std::size_t>(offsets[b + 1] - offsets[b]);
    const auto c = make_logit_chain(warps[b], vocab, gamma, rng);
    logits.insert(logits.end(), c.target.begin(), c.target.end());
    tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
  }
  Workspace ws;
  // The batch of the three sequences' `x` on `target` rows (and `draft` rows, which it refuses).
  const auto run_batch = [&](const backend::Cpu& cpu, std::span<const Token> x,
                             MatrixView<const float> draft, std::span<const float> target,
                             std::span<const RandomStream> streams, std::span<Token> emitted,
                             std::span<std::int32_t> accepted) {
    verify_chain_batch_target_only_logits(
        cpu,
        ChainBatchLogitsArgs<float>{.draft_offsets = offsets,
                                    .target_logits = {target.data(), 8, vocab},
                                    .draft_logits = draft,
                                    .warps = warps,
                                    .draft_tokens = x,
                                    .streams = streams,
                                    .emitted = emitted,
                                    .accepted = accepted},
        ws);
  };
  for (std::uint32_t seed = 0; seed < 6; ++seed) {
    std::vector<RandomStream> streams;
    for (std::uint32_t b = 0; b < 3; ++b) streams.push_back(RandomStream{seed, b});
    std::vector<Token> emitted(8, 99);
    std::vector<std::int32_t> accepted(3, -5);
    run_batch(backend::cpu.with_threads(2), tokens, {}, logits, streams, emitted, accepted);
    INFO("seed " << seed);
    test::check_chain_batch_sequences(
        offsets, emitted, accepted,
        [&](std::size_t b, std::size_t first, std::size_t gamma, std::span<Token> want) {
          return verify_chain_target_only_logits<float>(
              warps[b], std::span<const float>(logits).subspan((first + b) * v, (gamma + 1) * v),
              std::span<const Token>(tokens).subspan(first, gamma), vocab, streams[b], want, ws);
        });
  }
  // Bad input named: draft logits given, a placeholder token, a bad row of sequence 2.
  const auto run = [&](std::vector<Token> x, MatrixView<const float> draft,
                       std::vector<float> target) {
    const std::vector<RandomStream> streams = {RandomStream{1}, RandomStream{2}, RandomStream{3}};
    std::vector<Token> emitted(8);
    std::vector<std::int32_t> accepted(3);
    run_batch(backend::cpu, x, draft, target, streams, emitted, accepted);
  };
  CHECK_THROWS_WITH(run(tokens, {logits.data(), 5, vocab}, logits),
                    Catch::StartsWith("draft_logits"));
  auto placeholder = tokens;
  placeholder[4] = -1;
  CHECK_THROWS_WITH(run(placeholder, {}, logits), Contains("draft_tokens[2][1]"));
  auto nan_logits = logits;
  nan_logits[5 * v + 1] = std::numeric_limits<float>::quiet_NaN();  // row 5: sequence 2's first
  CHECK_THROWS_WITH(run(tokens, {}, nan_logits), Contains("target_logits[5]"));
}

TEST_CASE("verification from logits names bad input", "[verify][logits][bad]") {
  Workspace ws;
  const std::int64_t vocab = 4;
  const std::vector<float> target = {0, 1, 2, 3, 1, 1, 1, 1, 3, 2, 1, 0};  // 3 rows
  const std::vector<float> draft = {1, 0, 0, 1, 0, 2, 0, 1};               // 2 rows
  const std::vector<Token> tokens = {1, 2};
  std::vector<Token> out(3);
  const RandomStream stream{1};
  const Warp warp{};
  const auto chain = [&](const Warp& w, std::span<const float> t, std::span<const float> d,
                         std::span<const Token> x, std::int64_t v, std::span<Token> o) {
    return verify_chain_logits<float>(w, t, d, x, v, stream, o, ws);
  };
  CHECK_THROWS_WITH(chain(warp, target, draft, tokens, 0, out), Contains("vocab"));
  CHECK_THROWS_WITH(chain(Warp{.top_p = 1.5f}, target, draft, tokens, vocab, out),
                    Contains("top_p"));
  CHECK_THROWS_WITH(chain(warp, std::span<const float>(target).first(8), draft, tokens, vocab, out),
                    Contains("target_logits"));
  CHECK_THROWS_WITH(chain(warp, target, std::span<const float>(draft).first(4), tokens, vocab, out),
                    Contains("draft_logits"));
  CHECK_THROWS_WITH(chain(warp, target, draft, std::vector<Token>{1, 4}, vocab, out),
                    Contains("draft_tokens[1]"));
  CHECK_THROWS_WITH(chain(warp, target, draft, tokens, vocab, std::span<Token>(out).first(2)),
                    Contains("out"));
  auto nan_target = target;
  nan_target[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(chain(warp, nan_target, draft, tokens, vocab, out),
                    Contains("target_logits[0]"));
  auto banned = draft;
  banned[1] = -std::numeric_limits<float>::infinity();  // token 1 has draft probability 0
  CHECK_THROWS_WITH(chain(warp, target, banned, tokens, vocab, out), Contains("draft_tokens[0]"));
  CHECK_THROWS_WITH(
      verify_block_logits<float>(warp, target, banned, tokens, vocab, stream, out, ws),
      Contains("draft_tokens[0]"));
  CHECK_THROWS_WITH(
      verify_block_logits<float>(warp, nan_target, draft, tokens, vocab, stream, out, ws),
      Contains("target_logits[0]"));

  const auto target_only = [&](const Warp& w, std::span<const float> t, std::span<const Token> x,
                               std::int64_t v, std::span<Token> o) {
    return verify_chain_target_only_logits<float>(w, t, x, v, stream, o, ws);
  };
  CHECK_THROWS_WITH(target_only(warp, target, tokens, 0, out), Contains("vocab"));
  CHECK_THROWS_WITH(target_only(Warp{.min_p = -1.0f}, target, tokens, vocab, out),
                    Contains("min_p"));
  CHECK_THROWS_WITH(target_only(warp, std::span<const float>(target).first(8), tokens, vocab, out),
                    Contains("target_logits"));
  CHECK_THROWS_WITH(target_only(warp, target, std::vector<Token>{1, -1}, vocab, out),
                    Contains("draft_tokens[1]"));
  CHECK_THROWS_WITH(target_only(warp, target, tokens, vocab, std::span<Token>(out).first(2)),
                    Contains("out"));
  CHECK_THROWS_WITH(target_only(warp, nan_target, tokens, vocab, out),
                    Contains("target_logits[0]"));

  // Trees: two children of the root with the same token, then a child of node 0.
  const std::vector<Token> tree_tokens = {1, 1, 2};
  const std::vector<std::int32_t> parents = {-1, -1, 0};
  std::vector<float> rows(4 * 4, 0.5f);
  std::vector<std::int32_t> accepted(3);
  const TreeView tree{tree_tokens, parents};
  CHECK_THROWS_WITH(
      verify_tree_logits<float>(Recursive{}, warp, tree, {rows, rows}, vocab, stream, accepted, ws),
      Contains("tokens[1]"));
  CHECK_THROWS_WITH(
      verify_tree_logits<float>(Rejection{}, warp, tree, {rows, rows}, vocab, stream, accepted, ws),
      Contains("parents"));
  CHECK_THROWS_WITH(verify_tree_logits<float>(MultiRound{}, warp, tree,
                                              {std::span<const float>(rows).first(12), rows}, vocab,
                                              stream, accepted, ws),
                    Contains("target_logits"));
  CHECK_THROWS_WITH(verify_tree_logits<float>(MultiRound{}, warp, tree,
                                              {rows, std::span<const float>(rows).first(12)}, vocab,
                                              stream, accepted, ws),
                    Contains("draft_logits"));
  CHECK_THROWS_WITH(verify_tree_logits<float>(MultiRound{}, warp, tree, {rows, rows}, vocab, stream,
                                              std::span<std::int32_t>(accepted).first(1), ws),
                    Contains("accepted_nodes"));
  CHECK_THROWS_WITH(
      verify_tree_logits<float>(MultiRound{}, warp,
                                TreeView{tree_tokens, std::vector<std::int32_t>{-1, 2, 0}},
                                {rows, rows}, vocab, stream, accepted, ws),
      Contains("parents[1]"));
  auto nan_rows = rows;
  nan_rows[2] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(verify_tree_logits<float>(MultiRound{}, warp, tree, {nan_rows, rows}, vocab,
                                              stream, accepted, ws),
                    Contains("target_logits[0]"));
  auto banned_rows = rows;
  banned_rows[1] = -std::numeric_limits<float>::infinity();  // token 1 banned at the root
  CHECK_THROWS_WITH(verify_tree_logits<float>(MultiRound{}, warp, tree, {rows, banned_rows}, vocab,
                                              stream, accepted, ws),
                    Contains("tokens[0]"));
  CHECK_THROWS_WITH(verify_tree_target_only_logits<float>(Warp{.top_k = 9}, tree, rows, vocab,
                                                          stream, accepted, ws),
                    Contains("top_k"));
  CHECK_THROWS_WITH(
      verify_tree_target_only_logits<float>(warp, tree, nan_rows, vocab, stream, accepted, ws),
      Contains("target_logits[0]"));
}
