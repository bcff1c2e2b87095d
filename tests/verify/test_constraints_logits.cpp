// SPDX-License-Identifier: MIT
// Constrained verification from logits (constrained::verify_chain_logits and the target-only form):
// bit for bit the plain from-logits entries on target logits transformed densely here (penalties,
// bitmask, allowed ids, min_tokens), each transform alone and together; the emitted law is the
// transformed target's; a row past a forbidden draft token is never read; bad input named.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "constraints_reference.hpp"
#include "helpers.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/constrained_logits.hpp"
#include "support/stats.hpp"

using namespace specdec;
using Catch::Contains;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> normal_rows(std::int64_t rows, std::int64_t vocab, toy::ToyRandom& rng) {
  std::vector<float> out(static_cast<std::size_t>(rows * vocab));
  for (float& x : out) x = static_cast<float>(2.0 * rng.normal());
  return out;
}

// What a request asks of its rows, with the storage the spans of LogitConstraints point into.
struct Request {
  std::vector<std::int32_t> bitmask;
  std::vector<Token> allowed, stops;
  std::vector<constrained::PenalisedToken> penalised;
  std::vector<Token> bad_words, tail;
  std::vector<std::int32_t> bad_offsets;
  constrained::LogitConstraints c;

  // Bans `word` too.
  void ban(const std::vector<Token>& word) {
    if (bad_offsets.empty()) bad_offsets.push_back(0);
    bad_words.insert(bad_words.end(), word.begin(), word.end());
    bad_offsets.push_back(static_cast<std::int32_t>(bad_words.size()));
    c.bad_words = bad_words;
    c.bad_word_offsets = bad_offsets;
  }
};

constexpr int kMask = 1, kPenalties = 2, kAllowed = 4, kMinTokens = 8, kBadWords = 16;
// With kMask: even rows allow every token (rows the constraints may leave unchanged).
constexpr int kFullRows = 32;

// A request with the transforms in `which`: a mask allowing about 60% of each row (always token
// 0), penalties on a few tokens, half the vocabulary allowed, token 0 a stop token until length 3.
Request make_request(int which, std::int64_t rows, std::int64_t vocab, toy::ToyRandom& rng) {
  Request q;
  const std::int64_t words = (vocab + 31) / 32;
  if ((which & kMask) != 0) {
    q.bitmask.resize(static_cast<std::size_t>(rows * words));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t t = 0; t < vocab; ++t) {
        if (t == 1 || rng.uniform() < 0.6) {
          auto& w = q.bitmask[static_cast<std::size_t>(r * words + t / 32)];
          w = static_cast<std::int32_t>(static_cast<std::uint32_t>(w) | (1u << (t % 32)));
        }
      }
      if ((which & kFullRows) != 0 && r % 2 == 0) {
        std::fill_n(q.bitmask.begin() + r * words, words, -1);
      }
      // Bits past the vocabulary are set in the last word: they must be ignored.
      if (vocab % 32 != 0) q.bitmask[static_cast<std::size_t>(r * words + words - 1)] |= ~0 << (vocab % 32);
    }
  }
  if ((which & kPenalties) != 0) {
    for (Token t = 0; t < vocab; t += 3) {
      q.penalised.push_back({t, static_cast<std::int32_t>(t % 4), t % 5 == 0});
    }
    q.c.penalties = {.repetition = 1.3f, .frequency = 0.4f, .presence = 0.6f, .tokens = q.penalised};
  }
  if ((which & kAllowed) != 0) {
    for (Token t = 1; t < vocab; t += 2) q.allowed.push_back(t);
  }
  if ((which & kMinTokens) != 0) {
    q.stops = {1, static_cast<Token>(vocab - 1)};
    q.c.min_tokens = 3;
    q.c.output_length = 1;
  }
  if ((which & kBadWords) != 0) {
    // The output ends with 4, 5: 3 and 7 are banned at row 0, 11 everywhere.
    q.tail = {4, 5};
    q.c.output_tail = q.tail;
    q.ban({5, 3});
    q.ban({4, 5, 7});
    q.ban({11});
  }
  q.c.bitmask = q.bitmask;
  q.c.allowed = q.allowed;
  q.c.stop_tokens = q.stops;
  return q;
}

// The transforms applied densely to every row (constraints_reference.hpp), row r's prefix
// prefixes[r].
std::vector<float> transform_rows(const Request& q, const std::vector<float>& logits,
                                  const std::vector<std::vector<Token>>& prefixes,
                                  std::int64_t vocab) {
  const auto v = static_cast<std::size_t>(vocab);
  const auto words = static_cast<std::size_t>(detail::mask_words(vocab));
  std::vector<float> out;
  for (std::size_t r = 0; r * v < logits.size(); ++r) {
    const auto row = test::transform_row_reference(
        q.c, q.bitmask.empty() ? nullptr : q.bitmask.data() + r * words,
        std::span<const float>(logits).subspan(r * v, v), prefixes[r]);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// A chain's rows: row r's prefix is the first r tokens.
std::vector<float> transform_densely(const Request& q, const std::vector<float>& logits,
                                     const std::vector<Token>& tokens, std::int64_t vocab) {
  std::vector<std::vector<Token>> prefixes;
  for (std::size_t r = 0; r * static_cast<std::size_t>(vocab) < logits.size(); ++r) {
    prefixes.emplace_back(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(std::min(r, tokens.size())));
  }
  return transform_rows(q, logits, prefixes, vocab);
}

std::vector<Warp> constraint_warps() {
  return {Warp{},
          Warp{.temperature = 0.7f},
          Warp{.temperature = 1.3f, .top_k = 5},
          Warp{.top_p = 0.8f},
          Warp{.min_p = 0.05f},
          Warp{.temperature = 0.0f}};
}

// Draft tokens drawn one position at a time from the draft rows, transformed with their prefix
// when `transformed` (so every token has positive draft probability).
struct ConstrainedChain {
  std::vector<float> target, draft, target_dense, draft_used;
  std::vector<Token> tokens;
};

ConstrainedChain make_chain(const Request& q, const Warp& warp, std::int64_t vocab,
                            std::size_t length, bool transformed, toy::ToyRandom& rng) {
  const auto v = static_cast<std::size_t>(vocab);
  ConstrainedChain c;
  c.target = normal_rows(static_cast<std::int64_t>(length) + 1, vocab, rng);
  c.draft = c.target;
  c.draft.resize(length * v);
  for (float& x : c.draft) x += static_cast<float>(0.7 * rng.normal());
  c.draft_used = c.draft;
  for (std::size_t i = 0; i < length; ++i) {
    if (transformed) {
      // Row i of the draft transformed with the prefix drawn so far.
      std::vector<float> rows(c.draft.begin(), c.draft.begin() + static_cast<std::ptrdiff_t>((i + 1) * v));
      rows.resize((i + 1) * v);
      auto t = transform_densely(q, rows, c.tokens, vocab);
      std::copy(t.begin() + static_cast<std::ptrdiff_t>(i * v), t.end(),
                c.draft_used.begin() + static_cast<std::ptrdiff_t>(i * v));
    }
    const auto row = test::warp_rows(
        warp,
        std::vector<float>(c.draft_used.begin() + static_cast<std::ptrdiff_t>(i * v),
                           c.draft_used.begin() + static_cast<std::ptrdiff_t>((i + 1) * v)),
        vocab);
    c.tokens.push_back(detail::sample_row(row.data(), vocab, static_cast<float>(rng.uniform())));
  }
  c.target_dense = transform_densely(q, c.target, c.tokens, vocab);
  return c;
}

}  // namespace

TEST_CASE("constrained chains from logits equal the plain entry on densely transformed logits",
          "[verify][logits][constraints]") {
  toy::ToyRandom rng(39);
  Workspace ws;
  const std::size_t length = 4;
  std::int32_t rejections = 0, full = 0;
  for (const std::int64_t vocab : {40, 300, 9000}) {
    for (const int which : {kMask, kPenalties, kAllowed, kMinTokens, kBadWords,
                            kMask | kPenalties | kMinTokens | kBadWords, kAllowed | kPenalties,
                            kMask | kFullRows, kMask | kFullRows | kMinTokens}) {
      for (const auto& warp : constraint_warps()) {
        for (const bool transformed : {false, true}) {
          Request q = make_request(which, static_cast<std::int64_t>(length) + 1, vocab, rng);
          auto c = make_chain(q, warp, vocab, length, transformed, rng);
          if ((which & kBadWords) != 0) {
            // A word across the output and the draft: bans draft token 1 at row 1.
            q.ban({5, c.tokens[0], c.tokens[1]});
            c.target_dense = transform_densely(q, c.target, c.tokens, vocab);
          }
          for (std::uint32_t seed = 0; seed < 4; ++seed) {
            INFO("vocab " << vocab << " transforms " << which << " temperature "
                          << warp.temperature << " top_k " << warp.top_k << " top_p " << warp.top_p
                          << " draft transformed " << transformed << " seed " << seed);
            const RandomStream stream{seed, 5, 2};
            std::vector<Token> want(length + 1), got(length + 1);
            const auto expected = verify_chain_logits<float>(warp, c.target_dense, c.draft_used,
                                                             c.tokens, vocab, stream, want, ws);
            const auto verdict = constrained::verify_chain_logits(
                warp, c.target, c.draft_used, c.tokens, vocab, q.c, stream, got, ws);
            REQUIRE(verdict.accepted == expected.accepted);
            REQUIRE(verdict.emitted == expected.emitted);
            const auto e = static_cast<std::ptrdiff_t>(expected.emitted);
            CHECK(std::vector<Token>(got.begin(), got.begin() + e) ==
                  std::vector<Token>(want.begin(), want.begin() + e));
            // The target-only walk on the same rows.
            const auto to_expected = verify_chain_target_only_logits<float>(
                warp, c.target_dense, c.tokens, vocab, stream, want, ws);
            const auto to_verdict = constrained::verify_chain_target_only_logits(
                warp, c.target, c.tokens, vocab, q.c, stream, got, ws);
            REQUIRE(to_verdict.accepted == to_expected.accepted);
            const auto te = static_cast<std::ptrdiff_t>(to_expected.emitted);
            CHECK(std::vector<Token>(got.begin(), got.begin() + te) ==
                  std::vector<Token>(want.begin(), want.begin() + te));
            rejections += expected.accepted < static_cast<std::int32_t>(length) ? 1 : 0;
            full += expected.accepted == static_cast<std::int32_t>(length) ? 1 : 0;
          }
        }
      }
    }
  }
  // Both outcomes were compared.
  CHECK(rejections > 50);
  CHECK(full > 20);
}

TEST_CASE("a constrained row's rough pass is the rough pass of the row transformed densely",
          "[verify][logits][constraints]") {
  // Read through the row's mask without making the row; the penalised entries summed as tiles of
  // their own (3,000 of them at V = 9000: several such tiles), whose rough terms are taken against
  // other tile maxima, and the mixed tiles' terms against the largest logit of the tile, masked or
  // not: each pass within 1.25e-4 of the exact sums (rough_bounds.hpp), so of each other within
  // 2.5e-4.
  toy::ToyRandom rng(41);
  const std::size_t length = 3;
  std::int32_t compared = 0;
  for (const std::int64_t vocab : {300, 9000}) {
    for (const int which : {kMask, kPenalties, kMask | kPenalties | kMinTokens | kBadWords,
                            kAllowed | kMask, kMask | kFullRows, kMinTokens | kBadWords}) {
      for (const Warp& warp : {Warp{}, Warp{.temperature = 0.7f, .top_p = 0.8f}}) {
        const Request q = make_request(which, static_cast<std::int64_t>(length) + 1, vocab, rng);
        const auto target = normal_rows(static_cast<std::int64_t>(length) + 1, vocab, rng);
        const std::vector<Token> tokens = {5, 11, 5};
        const auto dense = transform_densely(q, target, tokens, vocab);
        std::vector<std::byte> bytes(detail::constrained_rows_size(vocab, 3) + 64);
        auto* base = reinterpret_cast<std::byte*>(
            (reinterpret_cast<std::uintptr_t>(bytes.data()) + 63) / 64 * 64);
        auto rows = detail::constrained_rows(
            q.c, detail::LogitRows<float>{target.data(), vocab, "target_logits", 0},
            detail::ChainPrefix{tokens.data()}, vocab, base);
        const auto view = rows.rows_view();
        std::vector<detail::TileSum> tiles(static_cast<std::size_t>(detail::tile_count(vocab)));
        for (std::int64_t r = 0; r <= static_cast<std::int64_t>(length); ++r) {
          for (const Token x : {Token{0}, Token{1}, Token{3}, Token{5}, Token{11}, Token{299}}) {
            INFO("vocab " << vocab << " transforms " << which << " top_p " << warp.top_p
                          << " row " << r << " token " << x);
            float logit = 0.0f;
            const auto got = view.rough(warp, r, x, vocab, tiles.data(), logit);
            const float* row = dense.data() + r * vocab;
            const auto want = detail::rough_row(warp, row, vocab, row[x], tiles.data());
            REQUIRE(got.invalid == want.invalid);
            CHECK(std::bit_cast<std::uint32_t>(logit) == std::bit_cast<std::uint32_t>(row[x]));
            if (want.invalid) continue;
            // The sum relative to the largest logit read, which may lie behind the mask.
            CHECK(got.max >= want.max);
            const double sum = got.sum * std::exp(static_cast<double>(got.max - want.max) /
                                                  static_cast<double>(warp.temperature));
            CHECK(std::abs(sum - want.sum) <= 2.5e-4 * want.sum);
            CHECK(std::abs(got.above - want.above) <= 2.5e-4 * want.above + 1e-12);
            ++compared;
          }
        }
      }
    }
  }
  CHECK(compared > 250);
}

TEST_CASE("constrained chains never read the mask past a draft token its own row forbids",
          "[verify][logits][constraints]") {
  toy::ToyRandom rng(7);
  Workspace ws;
  const std::int64_t vocab = 64;
  const std::vector<Token> tokens = {3, 5, 7, 9};
  const auto target = normal_rows(5, vocab, rng);
  const auto draft = normal_rows(4, vocab, rng);
  // Rows 0 and 1 allow everything but token 5; rows 2..4 are garbage that allows nothing.
  std::vector<std::int32_t> mask(5 * 2, 0);
  for (int r = 0; r < 2; ++r) mask[static_cast<std::size_t>(2 * r)] = mask[static_cast<std::size_t>(2 * r + 1)] = -1;
  mask[2] &= ~(1 << 5);
  const constrained::LogitConstraints c{.bitmask = mask};
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    std::vector<Token> out(5);
    const auto v = constrained::verify_chain_logits(Warp{}, target, draft, tokens, vocab, c,
                                                    RandomStream{seed, 0, 0}, out, ws);
    CHECK(v.accepted <= 1);
    if (v.accepted == 1) CHECK(out[1] != 5);
  }
  // The garbage would be reported if read: with token 5 allowed at row 1 the walk may reach row 2.
  mask[2] = -1;
  bool reported = false;
  for (std::uint32_t seed = 0; seed < 20 && !reported; ++seed) {
    std::vector<Token> out(5);
    try {
      const std::vector<float> close(target.begin(), target.begin() + 4 * vocab);
      constrained::verify_chain_logits(Warp{}, target, close, tokens, vocab, c,
                                       RandomStream{seed, 0, 0}, out, ws);
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Contains("bitmask[2]"));
      reported = true;
    }
  }
  CHECK(reported);
}

TEST_CASE("constrained chains emit the transformed target's law", "[verify][logits][constraints]") {
  // V = 6, two positions; untransformed draft. The first emitted token's law is the transformed
  // row 0's softmax (computed here in double), whatever the draft: chi-square at 1e-6.
  const std::int64_t vocab = 6;
  const std::vector<float> target = {1.0f, 0.5f, -0.3f, 2.0f, 0.0f, -1.0f,
                                     0.2f, 0.1f, 0.3f,  0.4f, 0.5f, 0.6f,
                                     0.0f, 0.0f, 0.0f,  0.0f, 0.0f, 0.0f};
  const std::vector<float> draft = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
                                    0.3f, -0.2f, 0.1f, 0.0f, 1.0f, 0.0f};
  const std::vector<std::int32_t> mask = {0b101011, 0b111111, 0b111111};  // row 0: 2, 4 masked
  const std::vector<constrained::PenalisedToken> pen = {{0, 2, false}, {3, 0, true}};
  const constrained::LogitConstraints c{
      .bitmask = mask,
      .penalties = {.repetition = 1.5f, .frequency = 0.3f, .presence = 0.2f, .tokens = pen}};
  // Row 0 transformed: token 0: 1/1.5 - 0.6 - 0.2; token 3: 2/1.5; tokens 2, 4 masked.
  const std::vector<double> z = {1.0 / 1.5 - 0.6 - 0.2, 0.5, -INFINITY, 2.0 / 1.5, -INFINITY, -1.0};
  std::vector<double> expected(6);
  double sum = 0.0;
  for (std::size_t t = 0; t < 6; ++t) sum += std::exp(z[t]);
  for (std::size_t t = 0; t < 6; ++t) expected[t] = std::exp(z[t]) / sum;
  Workspace ws;
  toy::ToyRandom rng(3);
  const auto q0 =
      test::warp_rows(Warp{}, std::vector<float>(draft.begin(), draft.begin() + 6), vocab);
  const auto q1 =
      test::warp_rows(Warp{}, std::vector<float>(draft.begin() + 6, draft.end()), vocab);
  std::vector<std::int64_t> counts(6, 0);
  const int trials = 40000;
  for (int n = 0; n < trials; ++n) {
    const std::vector<Token> tokens = {
        detail::sample_row(q0.data(), vocab, static_cast<float>(rng.uniform())),
        detail::sample_row(q1.data(), vocab, static_cast<float>(rng.uniform()))};
    std::vector<Token> out(3);
    constrained::verify_chain_logits(Warp{}, target, draft, tokens, vocab, c,
                                     RandomStream{17, static_cast<std::uint32_t>(n), 0}, out, ws);
    ++counts[static_cast<std::size_t>(out[0])];
  }
  // A masked token drawn (probability 0) gives p = 0.
  const auto fit = test::chi_square_test(counts, expected);
  INFO("statistic " << fit.statistic << " df " << fit.df);
  CHECK(fit.p_value > 1e-6);
}

TEST_CASE("constrained chains name bad constraints", "[verify][logits][constraints]") {
  Workspace ws;
  const std::int64_t vocab = 40;
  const std::vector<float> target(2 * 40, 0.0f), draft(40, 0.0f);
  const std::vector<Token> tokens = {1};
  std::vector<Token> out(2);
  const auto run = [&](const constrained::LogitConstraints& c) {
    constrained::verify_chain_logits(Warp{}, target, draft, tokens, vocab, c, RandomStream{}, out,
                                     ws);
  };
  const std::vector<std::int32_t> short_mask(3, -1), empty_row = {-1, -1, 0, 0};
  CHECK_THROWS_WITH(run({.bitmask = short_mask}), Contains("bitmask"));
  CHECK_THROWS_WITH(run({.bitmask = empty_row}), Contains("bitmask[1]"));
  CHECK_THROWS_WITH(run({.penalties = {.repetition = 0.0f}}), Contains("penalties.repetition"));
  CHECK_THROWS_WITH(run({.penalties = {.frequency = NAN}}), Contains("penalties.frequency"));
  CHECK_THROWS_WITH(run({.penalties = {.presence = INFINITY}}), Contains("penalties.presence"));
  const std::vector<constrained::PenalisedToken> outside = {{40, 1, false}},
                                                 negative = {{3, -1, false}};
  CHECK_THROWS_WITH(run({.penalties = {.tokens = outside}}), Contains("penalties.tokens[0]"));
  CHECK_THROWS_WITH(run({.penalties = {.tokens = negative}}), Contains("penalties.tokens[0]"));
  const std::vector<Token> bad_ids = {2, 41};
  CHECK_THROWS_WITH(run({.allowed = bad_ids}), Contains("allowed[1]"));
  CHECK_THROWS_WITH(run({.stop_tokens = bad_ids}), Contains("stop_tokens[1]"));
  CHECK_THROWS_WITH(run({.min_tokens = -1}), Contains("min_tokens"));
  CHECK_THROWS_WITH(run({.penalties = {.repetition = -1.5f}}), Contains("penalties.repetition"));
  CHECK_THROWS_WITH(run({.penalties = {.repetition = INFINITY}}), Contains("penalties.repetition"));
  // Banned words: an empty word, a token outside the vocabulary, offsets not ending at the size.
  const std::vector<Token> words = {3, 40}, tail = {41};
  const std::vector<std::int32_t> empty_word = {0, 1, 1}, two = {0, 2}, short_end = {0, 1};
  CHECK_THROWS_WITH(run({.bad_words = std::span(words).first(1), .bad_word_offsets = empty_word}),
                    Contains("bad_word_offsets[1]"));
  CHECK_THROWS_WITH(run({.bad_words = words, .bad_word_offsets = two}), Contains("bad_words[1]"));
  CHECK_THROWS_WITH(run({.bad_words = words, .bad_word_offsets = short_end}),
                    Contains("bad_word_offsets"));
  CHECK_THROWS_WITH(run({.bad_words = words}), Contains("bad_word_offsets"));
  CHECK_THROWS_WITH(run({.output_tail = tail}), Contains("output_tail[0]"));
  // Allowed ids all banned at row 0 (one-token words), and all stop tokens before min_tokens.
  const std::vector<Token> pair = {2, 3};
  const std::vector<std::int32_t> singles = {0, 1, 2};
  CHECK_THROWS_WITH(run({.allowed = pair, .bad_words = pair, .bad_word_offsets = singles}),
                    Contains("constraints[0]"));
  CHECK_THROWS_WITH(run({.allowed = pair, .stop_tokens = pair, .min_tokens = 1}),
                    Contains("constraints[0]"));
  // A word banning the only allowed token after draft token 1: row 1 is named.
  const std::vector<Token> after_one = {1, 2};
  const std::vector<std::int32_t> one_word = {0, 2};
  const std::vector<std::int32_t> row_one = {-1, -1, 0b100, 0};
  CHECK_THROWS_WITH(run({.bitmask = row_one, .bad_words = after_one, .bad_word_offsets = one_word}),
                    Contains("bitmask[1]"));
}

namespace {

// A depth-3 tree: the root has 2 children, each of them 2, each of those 1 (10 nodes), tokens
// drawn from the parent's warped draft row (siblings distinct).
struct ConstrainedTree {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<std::vector<Token>> prefixes;  // per row: the root's empty, row i + 1's to node i
};

ConstrainedTree make_tree(const std::vector<float>& draft_rows, std::int64_t vocab,
                          toy::ToyRandom& rng) {
  const auto v = static_cast<std::size_t>(vocab);
  ConstrainedTree t;
  t.prefixes.emplace_back();
  const auto add = [&](std::int32_t parent) {
    const float* q = draft_rows.data() + static_cast<std::size_t>(parent + 1) * v;
    // Siblings distinct: redraw a taken token (every warp here keeps at least 5 tokens).
    const auto taken = [&](Token y) {
      for (std::size_t i = 0; i < t.tokens.size(); ++i) {
        if (t.parents[i] == parent && t.tokens[i] == y) return true;
      }
      return false;
    };
    Token x = detail::sample_row(q, vocab, static_cast<float>(rng.uniform()));
    while (taken(x)) x = detail::sample_row(q, vocab, static_cast<float>(rng.uniform()));
    auto prefix = t.prefixes[static_cast<std::size_t>(parent + 1)];
    prefix.push_back(x);
    t.tokens.push_back(x);
    t.parents.push_back(parent);
    t.prefixes.push_back(prefix);
    return static_cast<std::int32_t>(t.tokens.size()) - 1;
  };
  const std::int32_t a = add(-1), b = add(-1);
  const std::int32_t a1 = add(a), a2 = add(a), b1 = add(b), b2 = add(b);
  for (const auto n : {a1, a2, b1, b2}) add(n);
  return t;
}

// The rules taking two candidates per node (Rejection takes one: the chain tests cover it).
std::vector<Rule> constraint_rules() {
  return {MultiRound{}, Recursive{}, SpecTr{}, Typical{}, Greedy{}};
}

}  // namespace

TEST_CASE("constrained trees from logits equal the plain entry with per-node transforms",
          "[verify][logits][constraints]") {
  toy::ToyRandom rng(38);
  Workspace ws;
  std::int32_t rejections = 0, bonuses = 0, garbage = 0;
  for (const std::int64_t vocab : {40, 9000}) {
    for (const int which :
         {kMask, kPenalties, kMask | kPenalties | kMinTokens, kAllowed, kBadWords | kMask}) {
      for (const auto& warp : constraint_warps()) {
        if (warp.is_greedy()) continue;  // one token per row: no two distinct siblings
        const auto v = static_cast<std::size_t>(vocab);
        const auto target = normal_rows(11, vocab, rng);
        auto draft = target;
        for (float& x : draft) x += static_cast<float>(0.7 * rng.normal());
        const auto tree = make_tree(test::warp_rows(warp, draft, vocab), vocab, rng);
        Request q = make_request(which, 11, vocab, rng);
        // A word along the tree: bans node 2 (node 0's first child) at node 0's row.
        if ((which & kBadWords) != 0) q.ban({tree.tokens[0], tree.tokens[2]});
        // A node its parent's row forbids gets a garbage row (nothing allowed): never read.
        for (std::size_t i = 0; i < tree.tokens.size() && !q.bitmask.empty(); ++i) {
          const auto words = (v + 31) / 32;
          const auto parent_row = static_cast<std::size_t>(tree.parents[i] + 1);
          const auto x = static_cast<std::size_t>(tree.tokens[i]);
          if (((static_cast<std::uint32_t>(q.bitmask[parent_row * words + x / 32]) >> (x % 32)) & 1u) == 0) {
            std::fill_n(q.bitmask.begin() + static_cast<std::ptrdiff_t>((i + 1) * words), words, 0);
            ++garbage;
          }
        }
        q.c.bitmask = q.bitmask;
        const auto dense = transform_rows(q, target, tree.prefixes, vocab);
        const TreeView view{tree.tokens, tree.parents};
        for (std::size_t index = 0; const auto& rule : constraint_rules()) {
          ++index;
          for (std::uint32_t seed = 0; seed < 4; ++seed) {
            INFO("vocab " << vocab << " transforms " << which << " temperature "
                          << warp.temperature << " top_k " << warp.top_k << " top_p " << warp.top_p
                          << " rule " << index << " seed " << seed);
            const RandomStream stream{seed, 4};
            std::vector<std::int32_t> want(11), got(11);
            const auto expected = verify_tree_logits<float>(rule, warp, view, {dense, draft}, vocab,
                                                            stream, want, ws);
            const auto verdict = constrained::verify_tree_logits(rule, warp, view, {target, draft},
                                                                 vocab, q.c, stream, got, ws);
            REQUIRE(verdict.accepted == expected.accepted);
            test::check_same_tree_verdict(verdict, expected, got, want);
            rejections += expected.bonus ? 0 : 1;
            bonuses += expected.bonus ? 1 : 0;
          }
        }
        for (std::uint32_t seed = 0; seed < 4; ++seed) {
          const RandomStream stream{seed, 9};
          std::vector<std::int32_t> want(11), got(11);
          const auto expected = verify_tree_target_only_logits<float>(warp, view, dense, vocab,
                                                                      stream, want, ws);
          const auto verdict = constrained::verify_tree_target_only_logits(
              warp, view, target, vocab, q.c, stream, got, ws);
          REQUIRE(verdict.accepted == expected.accepted);
          CHECK(verdict.token == expected.token);
          const auto kept = static_cast<std::ptrdiff_t>(expected.accepted);
          CHECK(std::vector<std::int32_t>(got.begin(), got.begin() + kept) ==
                std::vector<std::int32_t>(want.begin(), want.begin() + kept));
        }
      }
    }
  }
  CHECK(rejections > 50);
  CHECK(bonuses > 10);
  CHECK(garbage > 10);
}
