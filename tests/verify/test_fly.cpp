// SPDX-License-Identifier: MIT
// FLy (verify/fly.hpp): the exact law of the rule by enumerating which positions pass natively,
// the lossless rule at an infinite threshold, and never a token the target forbids.
#include <cmath>

#include "helpers.hpp"
#include "specdec/backend/cpu/lossy_chain_batch.hpp"

using namespace specdec;

namespace fly_tests {

constexpr std::int64_t kVocab = 4;
constexpr std::size_t kLength = 4;

/// Position 0 flat (entropy ln 4), 1 peaked away from the draft (low entropy), 2 forbids its
/// draft token (flat on the rest), 3 flat; row 4 gives the bonus.
const std::vector<float> kRows = {0.25f, 0.25f, 0.25f, 0.25f,  //
                                  0.05f, 0.85f, 0.05f, 0.05f,  //
                                  0.0f, 0.4f, 0.3f, 0.3f,      //
                                  0.3f, 0.2f, 0.3f, 0.2f,      //
                                  0.1f, 0.2f, 0.3f, 0.4f};
const std::vector<Token> kDrafts = {3, 0, 0, 1};

double entropy_of(std::size_t i) {
  double h = 0.0;
  for (std::int64_t y = 0; y < kVocab; ++y) {
    const double p = kRows[i * kVocab + static_cast<std::size_t>(y)];
    if (p > 0.0) h -= p * std::log(p);
  }
  return h;
}

std::size_t bin(std::int32_t accepted, Token last) {
  return static_cast<std::size_t>(accepted) * kVocab + static_cast<std::size_t>(last);
}

/// The rule's law over (accepted length, last token): position i passes natively with
/// probability p_i(x_i), independently (its own draw 0); for each of the 2^L patterns the walk
/// keeps a failed x_i when p_i(x_i) > 0, H(p_i) > threshold and i + 1 .. i + window pass, else
/// stops with the correction from p_i without x_i.
std::vector<double> claimed_law(FlyParams params) {
  std::vector<double> law((kLength + 1) * kVocab, 0.0);
  for (unsigned pattern = 0; pattern < (1u << kLength); ++pattern) {
    double weight = 1.0;
    for (std::size_t i = 0; i < kLength; ++i) {
      const double p = kRows[i * kVocab + static_cast<std::size_t>(kDrafts[i])];
      weight *= (pattern >> i & 1u) ? p : 1.0 - p;
    }
    const auto passes = [&](std::size_t i) { return (pattern >> i & 1u) != 0; };
    std::size_t n = 0;
    for (; n < kLength; ++n) {
      if (passes(n)) continue;
      bool keep = kRows[n * kVocab + static_cast<std::size_t>(kDrafts[n])] > 0.0f &&
                  n + static_cast<std::size_t>(params.window) < kLength &&
                  entropy_of(n) > params.entropy_threshold;
      for (std::size_t j = n + 1; keep && j <= n + static_cast<std::size_t>(params.window); ++j) {
        keep = passes(j);
      }
      if (!keep) break;
    }
    std::vector<double> row(kRows.begin() + static_cast<std::ptrdiff_t>(n * kVocab),
                            kRows.begin() + static_cast<std::ptrdiff_t>((n + 1) * kVocab));
    if (n < kLength) row[static_cast<std::size_t>(kDrafts[n])] = 0.0;
    double mass = 0.0;
    for (double p : row) mass += p;
    for (std::int64_t y = 0; y < kVocab; ++y) {
      law[bin(static_cast<std::int32_t>(n), static_cast<Token>(y))] +=
          weight * row[static_cast<std::size_t>(y)] / mass;
    }
  }
  return law;
}

TEST_CASE("fly: accepted length and last token follow the enumerated law (chi-square)", "[fly]") {
  for (const FlyParams params : {FlyParams{.window = 1, .entropy_threshold = 1.0f},
                                 FlyParams{.window = 0, .entropy_threshold = 0.5f},
                                 FlyParams{.window = 2, .entropy_threshold = 0.0f}}) {
    const auto law = claimed_law(params);
    std::vector<std::int64_t> counts(law.size(), 0);
    Workspace ws;
    std::vector<Token> out(kLength + 1);
    const std::uint32_t runs = test::monte_carlo_runs(100000);
    for (std::uint32_t s = 0; s < runs; ++s) {
      const auto v = verify_chain_fly<float>(kRows, {}, kDrafts, kVocab, params,
                                             RandomStream{31, s, 0, 0, Domain::kVerify}, out, ws);
      for (std::int32_t i = 0; i < v.accepted; ++i) {
        REQUIRE(out[static_cast<std::size_t>(i)] == kDrafts[static_cast<std::size_t>(i)]);
      }
      ++counts[bin(v.accepted, out[static_cast<std::size_t>(v.accepted)])];
    }
    // Each case fails with probability kFalseFailureProbability (1e-6) for a correct rule.
    const auto chi = test::chi_square_test(counts, law);
    INFO("window " << params.window << " threshold " << params.entropy_threshold << " chi-square "
                   << chi.statistic << " df " << chi.df);
    REQUIRE(chi.p_value > test::kFalseFailureProbability);
  }
}

TEST_CASE("fly: the enumerated law keeps more than the lossless rule", "[fly]") {
  // Guards the test above against a law that never keeps: at window 0 and threshold 0.5 the
  // flat position 0 is always kept, so the walk never stops there.
  const auto law = claimed_law({.window = 0, .entropy_threshold = 0.5f});
  double stop_at_0 = 0.0;
  for (std::int64_t y = 0; y < kVocab; ++y) stop_at_0 += law[bin(0, static_cast<Token>(y))];
  REQUIRE(stop_at_0 == 0.0);
  const auto lossless = claimed_law({.window = 0, .entropy_threshold = INFINITY});
  double lossless_stop_at_0 = 0.0;
  for (std::int64_t y = 0; y < kVocab; ++y) lossless_stop_at_0 += lossless[bin(0, static_cast<Token>(y))];
  REQUIRE(lossless_stop_at_0 == Approx(0.75));
}

TEST_CASE("fly: an infinite threshold is the lossless rule token for token", "[fly]") {
  Workspace ws;
  const std::int64_t vocab = 16;
  const std::size_t length = 5;
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    std::vector<float> target, draft;
    std::vector<Token> tokens;
    for (std::size_t i = 0; i <= length; ++i) {
      const auto p = test::make_pair(vocab, seed * 16 + i);
      target.insert(target.end(), p.target.begin(), p.target.end());
      if (i < length) {
        draft.insert(draft.end(), p.draft.begin(), p.draft.end());
        tokens.push_back(test::draw_candidates(p.draft, 1, false,
                                                RandomStream{6, static_cast<std::uint32_t>(seed), 0, static_cast<std::uint32_t>(i), Domain::kVerify})[0]);
      }
    }
    const RandomStream s{7, static_cast<std::uint32_t>(seed), 0, 0, Domain::kVerify};
    const FlyParams off{.window = 0, .entropy_threshold = INFINITY};
    std::vector<Token> fly(length + 1), lossless(length + 1);
    const auto a = verify_chain_fly<float>(target, {}, tokens, vocab, off, s, fly, ws);
    const auto b = verify_chain_target_only<float>(target, tokens, vocab, s, lossless, ws);
    REQUIRE(a.accepted == b.accepted);
    REQUIRE(fly == lossless);
    const auto c = verify_chain_fly<float>(target, draft, tokens, vocab, off, s, fly, ws);
    const auto d = verify_chain<float>(Rejection{}, target, draft, tokens, vocab, s, lossless, ws);
    REQUIRE(c.accepted == d.accepted);
    REQUIRE(fly == lossless);
  }
}

TEST_CASE("fly: a token the target forbids is never emitted", "[fly]") {
  // Top-k rows forbid most of the vocabulary; drafts are drawn from the untruncated draft, so
  // many are forbidden, and threshold 0 with window 0 keeps every allowed mismatch.
  Workspace ws;
  const std::int64_t vocab = 12;
  const std::size_t length = 4;
  int forbidden_drafts = 0;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    std::vector<float> target;
    std::vector<Token> tokens;
    for (std::size_t i = 0; i <= length; ++i) {
      const auto p = test::make_pair(vocab, seed * 8 + i, Warp{.top_k = 3});
      target.insert(target.end(), p.target.begin(), p.target.end());
      if (i < length) {
        tokens.push_back(test::draw_candidates(p.raw_draft, 1, false,
                                                RandomStream{9, static_cast<std::uint32_t>(seed), 0, static_cast<std::uint32_t>(i), Domain::kVerify})[0]);
        forbidden_drafts += p.target[static_cast<std::size_t>(tokens.back())] == 0.0f;
      }
    }
    std::vector<Token> out(length + 1);
    const auto v = verify_chain_fly<float>(target, {}, tokens, vocab,
                                           {.window = 0, .entropy_threshold = 0.0f},
                                           RandomStream{8, static_cast<std::uint32_t>(seed), 0, 0, Domain::kVerify}, out, ws);
    for (std::int32_t i = 0; i <= v.accepted; ++i) {
      const auto at = static_cast<std::size_t>(i);
      REQUIRE(target[at * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(out[at])] > 0.0f);
    }
  }
  REQUIRE(forbidden_drafts > 50);
}

TEST_CASE("fly: the batch is the single chain bit for bit, with and without draft rows", "[fly]") {
  const std::int64_t vocab = 8;
  const std::vector<std::int32_t> offsets = {0, 3, 3, 5};  // 3, 0 and 2 drafts
  std::vector<float> target, draft;
  for (std::uint64_t r = 0; r < 8; ++r) {
    const auto p = test::make_pair(vocab, 100 + r);
    target.insert(target.end(), p.target.begin(), p.target.end());
  }
  for (std::uint64_t r = 0; r < 5; ++r) {
    const auto p = test::make_pair(vocab, 200 + r);
    draft.insert(draft.end(), p.draft.begin(), p.draft.end());
  }
  const std::vector<Token> tokens = {1, 2, 3, 4, 5};
  const std::vector<RandomStream> streams = {RandomStream{4, 1, 0, 0, Domain::kVerify},
                                             RandomStream{4, 2, 0, 0, Domain::kVerify},
                                             RandomStream{4, 3, 0, 0, Domain::kVerify}};
  const FlyParams params{.window = 1, .entropy_threshold = 0.5f};
  Workspace ws;
  for (const bool with_draft : {false, true}) {
    std::vector<Token> emitted(8, -7);
    std::vector<std::int32_t> accepted(3, -7);
    verify_chain_batch_fly(
        backend::cpu,
        ChainBatchArgs{.draft_offsets = offsets,
                       .target_rows = MatrixView<const float>(target.data(), 8, vocab),
                       .draft_rows = with_draft ? MatrixView<const float>(draft.data(), 5, vocab)
                                                : MatrixView<const float>{},
                       .draft_tokens = tokens,
                       .streams = streams,
                       .emitted = emitted,
                       .accepted = accepted},
        params, ws);
    for (std::size_t b = 0; b < 3; ++b) {
      const auto first = static_cast<std::size_t>(offsets[b]);
      const auto g = static_cast<std::size_t>(offsets[b + 1]) - first;
      const auto v = static_cast<std::size_t>(vocab);
      std::vector<Token> out(g + 1, -1);
      const auto verdict = verify_chain_fly<float>(
          std::span<const float>(target).subspan((first + b) * v, (g + 1) * v),
          with_draft ? std::span<const float>(draft).subspan(first * v, g * v)
                     : std::span<const float>{},
          std::span<const Token>(tokens).subspan(first, g), vocab, params, streams[b], out, ws);
      REQUIRE(accepted[b] == verdict.accepted);
      for (std::int32_t i = 0; i <= verdict.accepted; ++i) {
        REQUIRE(emitted[first + b + static_cast<std::size_t>(i)] == out[static_cast<std::size_t>(i)]);
      }
    }
  }
}

TEST_CASE("fly: bad parameters name fly_window_size and fly_entropy_threshold", "[fly]") {
  Workspace ws;
  std::vector<Token> out(kLength + 1);
  const RandomStream s{1, 0, 0, 0, Domain::kVerify};
  REQUIRE_THROWS_WITH(verify_chain_fly<float>(kRows, {}, kDrafts, kVocab, {.window = -1}, s, out, ws),
                      Catch::Contains("fly_window_size"));
  REQUIRE_THROWS_WITH(verify_chain_fly<float>(kRows, {}, kDrafts, kVocab,
                                              {.window = 1, .entropy_threshold = NAN}, s, out, ws),
                      Catch::Contains("fly_entropy_threshold"));
}

}  // namespace fly_tests
