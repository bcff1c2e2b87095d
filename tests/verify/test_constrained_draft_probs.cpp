// SPDX-License-Identifier: MIT
// Constrained chains with draft probabilities (verify/constrained_draft_probs.hpp and its CPU
// batch): bit for bit verify_chain(Rejection) on target rows transformed and warped here with the
// same draft rows; the emitted law, enumerated at V = 6 over every draft of 3 tokens, extended by
// sampling equals the constrained target's; a chi-square test of the verifier against the
// enumeration of one chain with a placeholder (rejected with certainty); the batch equals the
// single call; bad input named.
#include <cmath>

#include "constraints_law.hpp"
#include "helpers.hpp"
#include "specdec/backend/cpu/constrained_draft_probs_batch.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/constrained_draft_probs.hpp"
#include "support/stats.hpp"

// A namespace of its own: the batch tests' executable is a unity build.
namespace specdec::test::draft_probs_chains {

using namespace exact_law;
using Catch::Contains;

// The draft rows (warped, as the drafter samples them) after each prefix of `tokens`; a
// placeholder's row is the one after the prefix before it.
std::vector<float> draft_probs(Rows& rows, const std::vector<Token>& tokens) {
  std::vector<float> out;
  std::vector<Token> prefix;
  for (const Token x : tokens) {
    const auto& q = rows.draft_row(prefix);
    out.insert(out.end(), q.begin(), q.end());
    prefix.push_back(x);
  }
  return out;
}

// The law of the tokens emitted for the drafted `tokens` (weight `w`): rejection at each
// position on the library's transformed rows, a token outside the vocabulary or of draft
// probability 0 rejected with certainty.
void chain_law(Rows& rows, const std::vector<Token>& tokens, double w, Law& law) {
  std::vector<Token> prefix;
  for (const Token x : tokens) {
    const auto p = normalised(rows.target_library(prefix));
    const auto q = normalised(rows.draft_row(prefix));
    const bool usable = x >= 0 && x < kVocab && q[static_cast<std::size_t>(x)] > 0.0;
    const double accept = usable ? std::min(1.0, p[x] / q[x]) : 0.0;
    double mass = 0.0;
    for (std::size_t y = 0; y < kV; ++y) mass += std::max(p[y] - q[y], 0.0);
    for (Token y = 0; y < kVocab; ++y) {
      const double r = mass > 0.0 ? std::max(p[y] - q[y], 0.0) / mass : p[y];
      if (r > 0.0) law[plus(prefix, y)] += w * (1.0 - accept) * r;
    }
    w *= accept;
    if (w == 0.0) return;
    prefix.push_back(x);
  }
  const auto bonus = normalised(rows.target_library(prefix));
  for (Token y = 0; y < kVocab; ++y) {
    if (bonus[static_cast<std::size_t>(y)] > 0.0) law[plus(prefix, y)] += w * bonus[y];
  }
}

std::vector<Token> run(const Warp& warp, const DrawnChain& d, const std::vector<float>& q,
                       const constrained::LogitConstraints& c, const RandomStream& stream,
                       Workspace& ws) {
  std::vector<Token> out(d.tokens.size() + 1, -1);
  const auto v = constrained::verify_chain_draft_probs(warp, d.target, q, d.tokens, kVocab, c,
                                                       stream, out, ws);
  out.resize(static_cast<std::size_t>(v.emitted));
  return out;
}

TEST_CASE("draft-probability chains equal verify_chain on rows transformed and warped here",
          "[verify][constraints][draft_probs]") {
  Workspace ws;
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    for (const Warp& warp : exact_warps()) {
      Rows rows{.q = q, .warp = warp, .draft_transformed = false};
      toy::ToyRandom rng(static_cast<std::uint64_t>(which), 4);
      for (std::uint32_t n = 0; n < 40; ++n) {
        const DrawnChain d = draw_chain(rows, rng);
        const auto probs = draft_probs(rows, d.tokens);
        const constrained::LogitConstraints c = d.constraints(q);
        // Every target row transformed and warped densely, then the rows' verifier.
        std::vector<float> target(d.target.size()), row(kV);
        for (std::size_t i = 0; i <= d.tokens.size(); ++i) {
          detail::transform_logit_row(c, static_cast<std::int64_t>(i), d.target.data() + i * kV,
                                      d.tokens.data(), static_cast<std::int64_t>(i), kVocab,
                                      row.data());
          const auto w = warped(warp, row);
          std::copy(w.begin(), w.end(), target.begin() + static_cast<std::ptrdiff_t>(i * kV));
        }
        const RandomStream stream{77, n, static_cast<std::uint32_t>(which)};
        std::vector<Token> want(d.tokens.size() + 1, -1);
        const auto v = verify_chain(Rejection{}, target, probs, d.tokens, kVocab, stream, want, ws);
        want.resize(static_cast<std::size_t>(v.emitted));
        INFO("transforms " << which << " draw " << n);
        CHECK(run(warp, d, probs, c, stream, ws) == want);
      }
    }
  }
}

TEST_CASE("draft-probability chains emit the constrained target's law: enumeration",
          "[verify][constraints][draft_probs]") {
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    for (const Warp& warp : exact_warps()) {
      Rows rows{.q = q, .warp = warp, .draft_transformed = which % 2 == 0};
      Law law;
      const auto every = [&](auto&& self, const std::vector<Token>& s, double w) -> void {
        if (s.size() == static_cast<std::size_t>(kLength)) return chain_law(rows, s, w, law);
        const auto qd = normalised(rows.draft_row(s));
        for (Token x = 0; x < kVocab; ++x) {
          if (qd[static_cast<std::size_t>(x)] > 0.0) self(self, plus(s, x), w * qd[x]);
        }
      };
      every(every, {}, 1.0);
      const auto got = extended(rows, law);
      const auto want = extended(rows, Law{{{}, 1.0}});
      INFO("transforms " << which);
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) < 1e-9);
    }
  }
}

TEST_CASE("a placeholder ends the chain with a draw from the residual: chi-square",
          "[verify][constraints][draft_probs][mc]") {
  // False-failure probability test::kFalseFailureProbability; fixed seeds. The chain's second
  // token is vLLM's placeholder -1: the second emitted token follows [p - q]+ when the first is
  // accepted.
  const std::uint32_t runs = test::monte_carlo_runs(20000);
  const Request q = make_request(kAll);
  Rows rows{.q = q, .warp = Warp{.temperature = 0.8f}, .draft_transformed = false};
  const std::vector<Token> tokens = {1, -1, 2};
  const DrawnChain d = chain_along(tokens);
  auto probs = draft_probs(rows, tokens);
  Law law;
  chain_law(rows, tokens, 1.0, law);
  Workspace ws;
  std::map<std::vector<Token>, std::int64_t> counts;
  for (std::uint32_t n = 0; n < runs; ++n) {
    ++counts[run(rows.warp, d, probs, d.constraints(q), RandomStream{93, n, 1}, ws)];
  }
  check_counts_follow(law, counts);
}

TEST_CASE("a draft token of draft probability 0 is rejected with certainty",
          "[verify][constraints][draft_probs]") {
  const Request q = make_request(kAll);
  Rows rows{.q = q, .warp = Warp{}, .draft_transformed = false};
  const DrawnChain d = chain_along({1, 2});
  auto probs = draft_probs(rows, d.tokens);
  probs[kV + 2] = 0.0f;  // token 2 at position 1
  Workspace ws;
  for (std::uint32_t n = 0; n < 200; ++n) {
    const auto out = run(rows.warp, d, probs, d.constraints(q), RandomStream{5, n, 0}, ws);
    CHECK(out.size() <= 2);
  }
}

TEST_CASE("the draft-probability batch equals the single call per sequence",
          "[verify][constraints][draft_probs][batch]") {
  const Request q = make_request(kAll);
  const Warp warp{.temperature = 0.9f};
  Rows rows{.q = q, .warp = warp, .draft_transformed = false};
  toy::ToyRandom rng(8);
  // Three chains (the second with a placeholder), one ragged batch of them.
  std::vector<DrawnChain> chains = {draw_chain(rows, rng), chain_along({2, -1, 1}),
                                    draw_chain(rows, rng)};
  chains[2].tokens.resize(1);
  chains[2].target.resize(2 * kV);
  chains[2].mask.resize(2);
  std::vector<std::int32_t> offsets = {0}, bitmask;
  std::vector<float> target, probs;
  std::vector<Token> tokens;
  for (const DrawnChain& d : chains) {
    offsets.push_back(offsets.back() + static_cast<std::int32_t>(d.tokens.size()));
    target.insert(target.end(), d.target.begin(), d.target.end());
    const auto p = draft_probs(rows, d.tokens);
    probs.insert(probs.end(), p.begin(), p.end());
    tokens.insert(tokens.end(), d.tokens.begin(), d.tokens.end());
    bitmask.insert(bitmask.end(), d.mask.begin(), d.mask.end());
  }
  const std::vector<Warp> warps = {warp};
  const std::vector<RandomStream> streams = {{4, 0, 0}, {4, 1, 0}, {4, 2, 0}};
  const std::vector<constrained::LogitConstraints> sequences = {q.c};
  std::vector<Token> emitted(tokens.size() + chains.size(), -1);
  std::vector<std::int32_t> accepted(chains.size());
  const auto rows_of = [&](std::int64_t n) {
    return MatrixView<const float>{target.data(), n, kVocab, kVocab};
  };
  const ChainBatchLogitsArgs<float> args{
      .draft_offsets = offsets,
      .target_logits = rows_of(std::ssize(target) / kVocab),
      .draft_logits = {probs.data(), std::ssize(probs) / kVocab, kVocab, kVocab},
      .warps = warps,
      .draft_tokens = tokens,
      .streams = streams,
      .emitted = emitted,
      .accepted = accepted};
  Workspace ws;
  constrained::verify_chain_batch_draft_probs(backend::cpu, args,
                                              {.bitmask = bitmask, .sequences = sequences}, ws);
  for (std::size_t b = 0; b < chains.size(); ++b) {
    const auto p = draft_probs(rows, chains[b].tokens);
    const auto want = run(warp, chains[b], p, chains[b].constraints(q), streams[b], ws);
    const auto first = static_cast<std::size_t>(offsets[b]) + b;
    INFO("sequence " << b);
    CHECK(accepted[b] + 1 == std::ssize(want));
    CHECK(std::equal(want.begin(), want.end(), emitted.begin() + static_cast<std::ptrdiff_t>(first)));
  }
}

TEST_CASE("draft-probability chains name bad input", "[verify][constraints][draft_probs]") {
  const Request q = make_request(kMinTokens);
  const DrawnChain d = chain_along({1, 2});
  const std::vector<float> probs(2 * kV, 1.0f / kVocab);
  std::vector<Token> out(3);
  Workspace ws;
  const auto call = [&](std::span<const float> target, std::span<const float> draft,
                        std::span<Token> o) {
    constrained::verify_chain_draft_probs(Warp{}, target, draft, d.tokens, kVocab, q.c,
                                          RandomStream{}, o, ws);
  };
  CHECK_THROWS_WITH(call(std::span(d.target).first(kV), probs, out), Contains("target_logits"));
  CHECK_THROWS_WITH(call(d.target, std::span(probs).first(kV), out), Contains("draft_probs"));
  CHECK_THROWS_WITH(call(d.target, probs, std::span(out).first(2)), Contains("out"));
}

}  // namespace specdec::test::draft_probs_chains
