// SPDX-License-Identifier: MIT
// Block verification, greedy matching and typical acceptance on constrained logits, in the
// V = 6 world of constraints_law.hpp (each transform alone and all together, the draft
// transformed and not, two warps). Block: the emitted law, enumerated from the rows the library
// transforms, extended by sampling the target equals the constrained target's law, and the
// verifier passes a chi-square test against it at 1e-6. Greedy: the argmax of every transformed
// row, on every chain of 3 tokens. Typical: bit for bit verify_chain(Typical) on rows transformed
// and warped by hand, and the threshold it claims. Rows after a draft token the target forbids
// hold a mask allowing nothing: never read. The CPU batches equal the single calls.
#include <cmath>
#include <map>

#include "constraints_law.hpp"
#include "helpers.hpp"
#include "specdec/backend/cpu/constrained_batch.hpp"
#include "specdec/verify/constrained_chain_rules.hpp"

using namespace specdec;
using namespace specdec::test::exact_law;

namespace {

// The law of block verification's emitted tokens: every draft of kLength tokens with its
// probability, the stopping point tau = the largest i with u_i <= h_i, then the final token
// from p_L (tau = L) or the normalised residual [w_tau p_tau - q_tau]+ (p_tau without mass).
Law block_law(Rows& rows) {
  Law law;
  const auto each_draft = [&](auto&& self, const std::vector<Token>& drafted,
                              double weight) -> void {
    if (drafted.size() < static_cast<std::size_t>(kLength)) {
      const auto q = normalised(rows.draft_row(drafted));
      for (Token x = 0; x < kVocab; ++x) {
        if (q[static_cast<std::size_t>(x)] > 0.0) self(self, plus(drafted, x), weight * q[x]);
      }
      return;
    }
    std::vector<std::vector<double>> p, q;
    std::vector<Token> prefix;
    for (int i = 0; i <= kLength; ++i) {
      p.push_back(normalised(rows.target_library(prefix)));
      if (i == kLength) break;
      q.push_back(normalised(rows.draft_row(prefix)));
      prefix.push_back(drafted[static_cast<std::size_t>(i)]);
    }
    std::vector<double> w(kLength + 1, 1.0), h(kLength + 1, 0.0);
    for (int i = 1; i <= kLength; ++i) {
      const auto x = static_cast<std::size_t>(drafted[static_cast<std::size_t>(i - 1)]);
      w[i] = std::min(1.0, w[i - 1] * p[i - 1][x] / q[i - 1][x]);
    }
    const auto residual_mass = [&](int i) {
      double m = 0.0;
      for (std::size_t y = 0; y < kV; ++y) m += std::max(0.0, w[i] * p[i][y] - q[i][y]);
      return m;
    };
    for (int i = 1; i < kLength; ++i) {
      const double m = residual_mass(i), denominator = m + 1.0 - w[i];
      h[i] = denominator > 0.0 ? m / denominator : 0.0;
    }
    h[kLength] = w[kLength];
    for (int tau = kLength; tau >= 0; --tau) {
      double reach = weight * (tau > 0 ? h[tau] : 1.0);
      for (int j = tau + 1; j <= kLength; ++j) reach *= 1.0 - h[j];
      if (!(reach > 0.0)) continue;
      const std::vector<Token> kept(drafted.begin(), drafted.begin() + tau);
      std::vector<double> last = p[tau];
      if (tau < kLength && residual_mass(tau) > 0.0) {
        const double m = residual_mass(tau);
        for (std::size_t y = 0; y < kV; ++y)
          last[y] = std::max(0.0, w[tau] * p[tau][y] - q[tau][y]) / m;
      }
      for (Token y = 0; y < kVocab; ++y) {
        if (last[static_cast<std::size_t>(y)] > 0.0) law[plus(kept, y)] += reach * last[y];
      }
    }
  };
  each_draft(each_draft, {}, 1.0);
  return law;
}

// Mask rows allowing nothing after the first draft token its own row's mask forbids (the request
// must have a grammar): such rows are never read. Returns whether there was one.
bool garbage_after_forbidden(DrawnChain& d) {
  for (std::size_t i = 0; i < d.tokens.size(); ++i) {
    if (((static_cast<std::uint32_t>(d.mask[i]) >> d.tokens[i]) & 1u) == 0) {
      std::fill(d.mask.begin() + static_cast<std::ptrdiff_t>(i) + 1, d.mask.end(), 0);
      return true;
    }
  }
  return false;
}

// The target logits of a drafted chain transformed densely by the reference, row by row.
std::vector<float> dense_target(const Rows& rows, const std::vector<Token>& tokens) {
  std::vector<float> out;
  for (std::size_t i = 0; i <= tokens.size(); ++i) {
    const auto row = rows.reference_logits(
        {tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(i)}, false);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// Every draft of kLength tokens.
std::vector<std::vector<Token>> every_chain() {
  std::vector<std::vector<Token>> out;
  for (Token a = 0; a < kVocab; ++a) {
    for (Token b = 0; b < kVocab; ++b) {
      for (Token c = 0; c < kVocab; ++c) out.push_back({a, b, c});
    }
  }
  return out;
}

std::vector<Token> emitted(const std::vector<Token>& out, const ChainVerdict& v) {
  return {out.begin(), out.begin() + v.emitted};
}

}  // namespace

TEST_CASE("constrained block verification emits the constrained target's law: enumeration",
          "[verify][logits][constraints][block]") {
  std::int32_t compared = 0;
  for_each_exact_setting([&](Rows& rows, int) {
    test::check_close(extended(rows, block_law(rows)), extended(rows, {{{}, 1.0}}), 1e-9);
    ++compared;
  });
  CHECK(compared == 32);
}

TEST_CASE("constrained block verification passes a chi-square test against the enumeration",
          "[verify][logits][constraints][block][mc]") {
  // False-failure probability test::kFalseFailureProbability per case; fixed seeds.
  const std::uint32_t runs = test::monte_carlo_runs(20000);
  Workspace ws;
  for (const bool transformed : {false, true}) {
    const Request q = make_request(kAll);
    Rows rows{.q = q, .warp = Warp{.temperature = 0.8f}, .draft_transformed = transformed};
    const Law law = block_law(rows);
    toy::ToyRandom rng(93, transformed ? 1 : 0);
    std::map<std::vector<Token>, std::int64_t> counts;
    std::vector<Token> out(kLength + 1);
    for (std::uint32_t n = 0; n < runs; ++n) {
      const DrawnChain d = draw_chain(rows, rng);
      const auto v = constrained::verify_block_logits(
          rows.warp, d.target, d.draft, d.tokens, kVocab, d.constraints(q),
          RandomStream{393u, n, transformed ? 7u : 0u}, out, ws);
      ++counts[emitted(out, v)];
    }
    INFO("draft transformed " << transformed);
    check_counts_follow(law, counts);
  }
}

TEST_CASE("constrained block verification equals verify_block_logits on dense transforms",
          "[verify][logits][constraints][block]") {
  // Drafts drawn from the draft rows; where a draft token is forbidden by its row's mask, the
  // mask rows after it allow nothing (never read).
  Workspace ws;
  std::int32_t garbage = 0, short_blocks = 0;
  for_each_exact_setting([&](Rows& rows, int which) {
    toy::ToyRandom rng(94, static_cast<std::uint64_t>(which));
    for (std::uint32_t seed = 0; seed < 8; ++seed) {
      DrawnChain d = draw_chain(rows, rng);
      const auto dense = dense_target(rows, d.tokens);
      if (rows.q.grammar) garbage += garbage_after_forbidden(d) ? 1 : 0;
      const RandomStream stream{seed, 3};
      std::vector<Token> want(kLength + 1), got(kLength + 1);
      const auto expected =
          verify_block_logits<float>(rows.warp, dense, d.draft, d.tokens, kVocab, stream, want, ws);
      const auto verdict = constrained::verify_block_logits(
          rows.warp, d.target, d.draft, d.tokens, kVocab, d.constraints(rows.q), stream, got, ws);
      INFO("seed " << seed);
      REQUIRE(verdict.accepted == expected.accepted);
      CHECK(emitted(got, verdict) == emitted(want, expected));
      short_blocks += expected.accepted < kLength ? 1 : 0;
    }
  });
  CHECK(garbage > 4);
  CHECK(short_blocks > 50);
}

TEST_CASE("constrained greedy matching takes the argmax of every transformed row",
          "[verify][logits][constraints][greedy]") {
  // Every chain of 3 tokens; a chain through a token its row's mask forbids has mask rows
  // allowing nothing after it.
  Workspace ws;
  std::int32_t garbage = 0, bonuses = 0;
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    Rows rows{.q = q, .warp = Warp{}, .draft_transformed = false};
    for (const auto& tokens : every_chain()) {
      DrawnChain d = chain_along(tokens);
      if (q.grammar) garbage += garbage_after_forbidden(d) ? 1 : 0;
      std::vector<Token> want;
      for (std::size_t i = 0; i <= tokens.size(); ++i) {
        const auto row = rows.reference_logits(want, false);
        const auto best =
            static_cast<Token>(std::max_element(row.begin(), row.end()) - row.begin());
        want.push_back(best);
        if (i == tokens.size() || best != tokens[i]) break;
      }
      std::vector<Token> out(kLength + 1);
      const auto v = constrained::verify_chain_greedy_logits(d.target, tokens, kVocab,
                                                             d.constraints(q), out, ws);
      INFO("transforms " << which << " chain " << tokens[0] << tokens[1] << tokens[2]);
      CHECK(v.accepted + 1 == v.emitted);
      CHECK(emitted(out, v) == want);
      bonuses += v.accepted == kLength ? 1 : 0;
    }
  }
  CHECK(garbage > 100);
  CHECK(bonuses == 8);  // one chain of argmaxes per request
}

TEST_CASE("constrained typical acceptance is verify_chain(Typical) on rows transformed by hand",
          "[verify][logits][constraints][typical]") {
  // Bit for bit: the tokens and verdicts of verify_chain on the reference's transformed rows,
  // warped (the draft rows, never read by typical acceptance, uniform). And the rule it claims:
  // draft token i passes iff its probability exceeds min(epsilon, delta exp(-H)) of its row.
  Workspace ws;
  const std::vector<float> uniform(kLength * kV, 1.0f / kV);
  std::int32_t garbage = 0, rejections = 0, bonuses = 0;
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    for (const auto& warp : exact_warps()) {
      Rows rows{.q = q, .warp = warp, .draft_transformed = false};
      for (const Typical rule : {Typical{}, Typical{.epsilon = 0.2f, .delta = 0.9f}}) {
        for (const auto& tokens : every_chain()) {
          DrawnChain d = chain_along(tokens);
          if (q.grammar) garbage += garbage_after_forbidden(d) ? 1 : 0;
          std::vector<float> warped_rows;
          std::int32_t passing = 0;
          bool passed = true;
          for (std::size_t i = 0; i <= tokens.size(); ++i) {
            const auto row = rows.target_reference(
                {tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(i)});
            warped_rows.insert(warped_rows.end(), row.begin(), row.end());
            if (i == tokens.size() || !passed) continue;
            const float h = detail::row_entropy(row.data(), kVocab);
            passed = row[static_cast<std::size_t>(tokens[i])] >
                     std::min(rule.epsilon, rule.delta * std::exp(-h));
            passing += passed ? 1 : 0;
          }
          const RandomStream stream{static_cast<std::uint32_t>(which), 5};
          std::vector<Token> want(kLength + 1), got(kLength + 1);
          const auto expected =
              verify_chain<float>(rule, warped_rows, uniform, tokens, kVocab, stream, want, ws);
          const auto verdict = constrained::verify_chain_typical_logits(
              warp, rule, d.target, tokens, kVocab, d.constraints(q), stream, got, ws);
          INFO("transforms " << which << " chain " << tokens[0] << tokens[1] << tokens[2]);
          REQUIRE(verdict.accepted == expected.accepted);
          CHECK(emitted(got, verdict) == emitted(want, expected));
          CHECK(verdict.accepted == passing);
          rejections += verdict.accepted < kLength ? 1 : 0;
          bonuses += verdict.accepted == kLength ? 1 : 0;
        }
      }
    }
  }
  CHECK(garbage > 100);
  CHECK(rejections > 1000);
  CHECK(bonuses > 300);
}

TEST_CASE("constrained block, greedy and typical chain batches equal the single calls",
          "[verify][logits][constraints][batch]") {
  // Three sequences of 3, 0 and 2 draft tokens, each with its own request and the batch's mask
  // rows, a warp each. Form 3 is block verification with the draft rows given as probabilities
  // (warp_logits of the draft logits, whose bits the from-logits walk computes): the same tokens.
  const std::vector<int> which = {kAll, kGrammar | kRepetition, kBanned | kGrammar};
  const std::vector<std::int32_t> offsets = {0, 3, 3, 5};
  const std::vector<Warp> warps = {Warp{}, Warp{.temperature = 0.8f, .top_p = 0.9f},
                                   Warp{.temperature = 0.7f}};
  std::vector<Request> requests;
  requests.reserve(3);  // their constraints view their own vectors
  std::vector<DrawnChain> chains;
  std::vector<constrained::LogitConstraints> sequences;
  std::vector<float> target, draft;
  std::vector<Token> drafted;
  std::vector<std::int32_t> mask;
  toy::ToyRandom rng(95);
  for (std::size_t b = 0; b < which.size(); ++b) requests.push_back(make_request(which[b]));
  for (std::size_t b = 0; b < which.size(); ++b) {
    Rows rows{.q = requests[b], .warp = warps[b], .draft_transformed = false};
    DrawnChain d = draw_chain(rows, rng);
    const auto gamma = static_cast<std::size_t>(offsets[b + 1] - offsets[b]);
    d.tokens.resize(gamma);
    d.target.resize((gamma + 1) * kV);
    d.draft.resize(gamma * kV);
    d.mask.resize(gamma + 1);
    if (requests[b].grammar) garbage_after_forbidden(d);
    target.insert(target.end(), d.target.begin(), d.target.end());
    draft.insert(draft.end(), d.draft.begin(), d.draft.end());
    drafted.insert(drafted.end(), d.tokens.begin(), d.tokens.end());
    // Rows without a grammar allow every token in the batch's mask.
    for (const std::int32_t m : d.mask) mask.push_back(requests[b].grammar ? m : -1);
    sequences.push_back(requests[b].c);
    chains.push_back(std::move(d));
  }
  const auto rows = static_cast<std::int64_t>(mask.size());
  const Typical rule{.epsilon = 0.2f, .delta = 0.9f};
  const backend::Cpu cpu{};
  Workspace ws;
  std::vector<float> draft_probs(draft.size());
  for (std::size_t b = 0; b < 3; ++b) {
    for (auto i = static_cast<std::size_t>(offsets[b]); i < static_cast<std::size_t>(offsets[b + 1]);
         ++i) {
      warp_logits(warps[b], std::span<const float>(draft).subspan(i * kV, kV),
                  std::span(draft_probs).subspan(i * kV, kV), ws);
    }
  }
  for (std::uint32_t seed = 0; seed < 4; ++seed) {
    const std::vector<RandomStream> streams = {{seed, 0}, {seed, 1}, {seed, 2}};
    for (const int form : {0, 1, 2, 3}) {
      INFO("form " << form << " seed " << seed);
      std::vector<Token> out(static_cast<std::size_t>(rows), -1);
      std::vector<std::int32_t> accepted(3, -1);
      const ChainBatchLogitsArgs<float> args{
          .draft_offsets = offsets,
          .target_logits = MatrixView<const float>(target.data(), rows, kVocab),
          .draft_logits = form == 0   ? MatrixView<const float>(draft.data(), 5, kVocab)
                          : form == 3 ? MatrixView<const float>(draft_probs.data(), 5, kVocab)
                                      : MatrixView<const float>{},
          .warps = warps,
          .draft_tokens = drafted,
          .streams = streams,
          .emitted = out,
          .accepted = accepted};
      const constrained::ChainBatchConstraints constraints{.bitmask = mask, .sequences = sequences};
      if (form == 0) constrained::verify_block_batch_logits(cpu, args, constraints, ws);
      if (form == 1) constrained::verify_chain_batch_greedy_logits(cpu, args, constraints, ws);
      if (form == 2)
        constrained::verify_chain_batch_typical_logits(cpu, args, rule, constraints, ws);
      if (form == 3) constrained::verify_block_batch_draft_probs(cpu, args, constraints, ws);
      for (std::size_t b = 0; b < 3; ++b) {
        const DrawnChain& d = chains[b];
        const constrained::LogitConstraints c = d.constraints(requests[b]);
        std::vector<Token> single(d.tokens.size() + 1);
        const ChainVerdict v =
            form == 0 || form == 3
                ? constrained::verify_block_logits(warps[b], d.target, d.draft, d.tokens, kVocab, c,
                                                   streams[b], single, ws)
            : form == 1
                ? constrained::verify_chain_greedy_logits(d.target, d.tokens, kVocab, c, single, ws)
                : constrained::verify_chain_typical_logits(warps[b], rule, d.target, d.tokens,
                                                           kVocab, c, streams[b], single, ws);
        const auto first = static_cast<std::ptrdiff_t>(offsets[b] + static_cast<std::int32_t>(b));
        CHECK(accepted[b] == v.accepted);
        CHECK(std::vector<Token>(out.begin() + first, out.begin() + first + v.emitted) ==
              emitted(single, v));
      }
    }
  }
  // A drafted token of draft probability 0 is named for its sequence.
  draft_probs[static_cast<std::size_t>(drafted[0])] = 0.0f;
  std::vector<Token> out(static_cast<std::size_t>(rows), -1);
  std::vector<std::int32_t> accepted(3, -1);
  const std::vector<RandomStream> streams = {{0, 0}, {0, 1}, {0, 2}};
  CHECK_THROWS_WITH(constrained::verify_block_batch_draft_probs(
                        cpu,
                        {.draft_offsets = offsets,
                         .target_logits = MatrixView<const float>(target.data(), rows, kVocab),
                         .draft_logits = MatrixView<const float>(draft_probs.data(), 5, kVocab),
                         .warps = warps,
                         .draft_tokens = drafted,
                         .streams = streams,
                         .emitted = out,
                         .accepted = accepted},
                        {.bitmask = mask, .sequences = sequences}, ws),
                    Catch::Contains("draft_tokens[0]"));
}

TEST_CASE("constrained block, greedy and typical chains name bad arguments",
          "[verify][logits][constraints][bad_input]") {
  const DrawnChain d = chain_along({1, 2, 3});
  const std::vector<float> draft(kLength * kV, 0.0f);
  const std::vector<std::int32_t> short_mask(kLength, -1);
  const constrained::LogitConstraints bad_mask{.bitmask = short_mask};
  const constrained::LogitConstraints bad_penalty{.penalties = {.repetition = 0.0f}};
  std::vector<Token> out(kLength + 1), short_out(kLength);
  Workspace ws;
  const RandomStream stream{1};
  CHECK_THROWS_WITH(constrained::verify_block_logits(Warp{}, d.target, draft, d.tokens, kVocab,
                                                     bad_mask, stream, out, ws),
                    Catch::StartsWith("bitmask"));
  CHECK_THROWS_WITH(constrained::verify_block_logits(Warp{}, d.target, draft, d.tokens, kVocab, {},
                                                     stream, short_out, ws),
                    Catch::StartsWith("out"));
  CHECK_THROWS_WITH(
      constrained::verify_chain_greedy_logits(d.target, d.tokens, kVocab, bad_penalty, out, ws),
      Catch::StartsWith("penalties.repetition"));
  CHECK_THROWS_WITH(constrained::verify_chain_greedy_logits(
                        std::span<const float>(d.target).first(kV), d.tokens, kVocab, {}, out, ws),
                    Catch::StartsWith("target_logits"));
  CHECK_THROWS_WITH(
      constrained::verify_chain_typical_logits(Warp{}, Typical{.epsilon = 1.5f}, d.target, d.tokens,
                                               kVocab, {}, stream, out, ws),
      Catch::StartsWith("epsilon"));
  CHECK_THROWS_WITH(
      constrained::verify_chain_typical_logits(Warp{.top_p = 2.0f}, Typical{}, d.target, d.tokens,
                                               kVocab, {}, stream, out, ws),
      Catch::StartsWith("top_p"));
}
