// SPDX-License-Identifier: MIT
// The small world the exact tests of constrained verification enumerate (V = 6, chains of 3
// tokens): a request's constraints, one transform or all, the raw target and draft logits after
// any prefix with the grammar's mask row there, the rows the library transforms and the reference
// transforms (constraints_reference.hpp), and the law of emitted tokens extended by sampling the
// constrained target, to compare with that target's own law.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

#include "../support/stats.hpp"
#include "constraints_reference.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/constrained_logits.hpp"

namespace specdec::test::exact_law {

constexpr std::int64_t kVocab = 6;
constexpr std::size_t kV = 6;
constexpr int kLength = 3;  // chain draft tokens, tree depth

using Law = std::map<std::vector<Token>, double>;

inline std::uint64_t hash_of(const std::vector<Token>& prefix, std::uint64_t salt) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ salt;
  for (const Token t : prefix) h = (h ^ static_cast<std::uint64_t>(t + 1)) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

// The grammar: its mask after `prefix` allows tokens 1 and 2 always, the others as the prefix's
// hash says (one int32 word: V = 6).
inline std::int32_t grammar_mask(const std::vector<Token>& prefix) {
  return static_cast<std::int32_t>((hash_of(prefix, 17) & 0b111001u) | 0b110u);
}

// Raw logits after `prefix`: the target's, and the draft's near them.
inline std::vector<float> raw_logits(const std::vector<Token>& prefix, bool draft) {
  toy::ToyRandom rng(hash_of(prefix, 5));
  std::vector<float> row(kV);
  for (float& x : row) x = static_cast<float>(1.5 * rng.normal());
  toy::ToyRandom noise(hash_of(prefix, 11));
  for (float& x : row) x += draft ? static_cast<float>(0.9 * noise.normal()) : 0.0f;
  return row;
}

// The transforms, as bits of a setting.
constexpr int kGrammar = 1, kAllowed = 2, kBanned = 4, kMinTokens = 8, kRepetition = 16,
              kFrequency = 32, kPresence = 64, kAll = 127;

// A request's constraints with their storage; the bitmask row is the grammar's, per prefix.
struct Request {
  bool grammar = false;
  std::vector<Token> allowed, stops, words, tail;
  std::vector<std::int32_t> offsets;
  std::vector<constrained::PenalisedToken> penalised;
  constrained::LogitConstraints c;
};

// Tokens 1 and 2 survive every transform: no row is left empty.
inline Request make_request(int which) {
  Request q;
  q.grammar = (which & kGrammar) != 0;
  if ((which & kAllowed) != 0) q.allowed = {0, 1, 2, 3, 4};
  if ((which & kBanned) != 0) {
    // 4 after 2; 3 after 1, 1 (the output ends with 1); 5 everywhere.
    q.words = {2, 4, 1, 1, 3, 5};
    q.offsets = {0, 2, 5, 6};
    q.tail = {0, 1};
  }
  if ((which & kMinTokens) != 0) {
    q.stops = {0, 3};
    q.c.min_tokens = 3;
    q.c.output_length = 1;
  }
  if ((which & (kRepetition | kFrequency | kPresence)) != 0) {
    q.penalised = {{1, 2, false}, {3, 0, true}, {4, 1, false}};
    q.c.penalties = {.repetition = (which & kRepetition) != 0 ? 1.6f : 1.0f,
                     .frequency = (which & kFrequency) != 0 ? 0.5f : 0.0f,
                     .presence = (which & kPresence) != 0 ? 0.7f : 0.0f,
                     .tokens = q.penalised};
  }
  q.c.allowed = q.allowed;
  q.c.stop_tokens = q.stops;
  q.c.bad_words = q.words;
  q.c.bad_word_offsets = q.offsets;
  q.c.output_tail = q.tail;
  return q;
}

inline std::vector<float> warped(const Warp& warp, const std::vector<float>& logits) {
  Workspace ws;
  std::vector<float> out(logits.size());
  warp_logits<float>(warp, logits, out, ws);
  return out;
}

// The rows of one setting after each prefix (cached): the target's transformed by the library
// and by the reference, the draft's as the drafter samples it.
struct Rows {
  const Request& q;
  Warp warp;
  bool draft_transformed;
  std::map<std::vector<Token>, std::vector<float>> library{}, reference{}, draft{};

  // The logits the reference transform makes after `prefix`.
  std::vector<float> reference_logits(const std::vector<Token>& prefix, bool of_draft) const {
    const std::int32_t mask = grammar_mask(prefix);
    return test::transform_row_reference(q.c, q.grammar ? &mask : nullptr,
                                         raw_logits(prefix, of_draft), prefix);
  }
  const std::vector<float>& target_library(const std::vector<Token>& prefix) {
    auto [it, fresh] = library.try_emplace(prefix);
    if (!fresh) return it->second;
    // The library's transform of a one-row request whose mask row is the grammar's.
    const std::vector<std::int32_t> mask = {grammar_mask(prefix)};
    constrained::LogitConstraints c = q.c;
    if (q.grammar) c.bitmask = mask;
    std::vector<float> out(kV);
    detail::transform_logit_row(c, 0, raw_logits(prefix, false).data(), prefix.data(),
                                std::ssize(prefix), kVocab, out.data());
    return it->second = warped(warp, out);
  }
  const std::vector<float>& target_reference(const std::vector<Token>& prefix) {
    auto [it, fresh] = reference.try_emplace(prefix);
    if (fresh) it->second = warped(warp, reference_logits(prefix, false));
    return it->second;
  }
  // The draft's logits after `prefix` as the verifier is given them.
  std::vector<float> draft_logits(const std::vector<Token>& prefix) const {
    return draft_transformed ? reference_logits(prefix, true) : raw_logits(prefix, true);
  }
  const std::vector<float>& draft_row(const std::vector<Token>& prefix) {
    auto [it, fresh] = draft.try_emplace(prefix);
    if (fresh) it->second = warped(warp, draft_logits(prefix));
    return it->second;
  }
};

inline std::vector<Token> plus(std::vector<Token> s, Token t) {
  s.push_back(t);
  return s;
}

// A warped row in double, summing to 1 there: the laws below subtract rows, and float rows
// summing to 1 +- 1e-7 would put that error on a residual of small mass.
inline std::vector<double> normalised(const std::vector<float>& row) {
  std::vector<double> out(row.begin(), row.end());
  double sum = 0.0;
  for (const double x : out) sum += x;
  for (double& x : out) x /= sum;
  return out;
}

// The law over kLength + 1 tokens of `emitted` extended by sampling the reference target.
inline std::vector<double> extended(Rows& rows, const Law& emitted) {
  std::vector<double> out(static_cast<std::size_t>(std::pow(kVocab, kLength + 1)), 0.0);
  const auto extend = [&](auto&& self, const std::vector<Token>& s, double w) -> void {
    if (s.size() == static_cast<std::size_t>(kLength) + 1) {
      std::size_t index = 0;
      for (const Token t : s) index = index * kV + static_cast<std::size_t>(t);
      out[index] += w;
      return;
    }
    const auto p = normalised(rows.target_reference(s));
    for (Token y = 0; y < kVocab; ++y) {
      if (p[static_cast<std::size_t>(y)] > 0.0) self(self, plus(s, y), w * p[y]);
    }
  };
  for (const auto& [s, w] : emitted) extend(extend, s, w);
  return out;
}

inline std::vector<Warp> exact_warps() {
  return {Warp{}, Warp{.temperature = 0.8f, .top_p = 0.9f}};
}

inline std::vector<int> exact_transforms() {
  return {kGrammar, kAllowed, kBanned, kMinTokens, kRepetition, kFrequency, kPresence, kAll};
}

// Sampled counts of emitted sequences follow `law`: every sequence seen is one the enumeration
// gives positive probability, and a chi-square test passes (false-failure probability
// test::kFalseFailureProbability).
inline void check_counts_follow(const Law& law,
                                const std::map<std::vector<Token>, std::int64_t>& counts) {
  std::vector<std::int64_t> observed;
  std::vector<double> expected;
  for (const auto& [tokens, p] : law) {
    const auto seen = counts.find(tokens);
    observed.push_back(seen != counts.end() ? seen->second : 0);
    expected.push_back(p);
  }
  INFO("outcomes " << law.size());
  for (const auto& [tokens, n] : counts) CHECK(law.count(tokens) == 1);
  const auto fit = test::chi_square_test(observed, expected);
  INFO("statistic " << fit.statistic << " df " << fit.df);
  CHECK(fit.p_value > test::kFalseFailureProbability);
}

// Calls fn(rows, which) for every setting the enumerations cover: each transform set `which`,
// each of exact_warps(), the draft rows untransformed and transformed (named in INFO).
template <class Fn>
void for_each_exact_setting(Fn&& fn) {
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    for (const auto& warp : exact_warps()) {
      for (const bool transformed : {false, true}) {
        INFO("transforms " << which << " temperature " << warp.temperature << " top_p "
                           << warp.top_p << " draft transformed " << transformed);
        Rows rows{.q = q, .warp = warp, .draft_transformed = transformed};
        fn(rows, which);
      }
    }
  }
}

// A chain of kLength tokens drawn from the draft rows, with the logits and mask rows a
// constrained verifier takes for it: L + 1 target rows, L draft rows, L + 1 grammar words.
struct DrawnChain {
  std::vector<Token> tokens{};
  std::vector<float> target{}, draft{};
  std::vector<std::int32_t> mask{};

  // The request's constraints with this chain's mask rows (when it has a grammar).
  constrained::LogitConstraints constraints(const Request& q) const {
    constrained::LogitConstraints c = q.c;
    if (q.grammar) c.bitmask = mask;
    return c;
  }
};

inline DrawnChain draw_chain(Rows& rows, toy::ToyRandom& rng) {
  DrawnChain d;
  for (int i = 0; i <= kLength; ++i) {
    const auto t = raw_logits(d.tokens, false);
    d.target.insert(d.target.end(), t.begin(), t.end());
    d.mask.push_back(grammar_mask(d.tokens));
    if (i == kLength) break;
    const auto q = rows.draft_logits(d.tokens);
    d.draft.insert(d.draft.end(), q.begin(), q.end());
    d.tokens.push_back(detail::sample_row(rows.draft_row(d.tokens).data(), kVocab, rng.uniform()));
  }
  return d;
}

// The logits and mask rows a constrained verifier takes for the chain `tokens` (any tokens, not
// drawn): L + 1 raw target rows and grammar words along it, no draft rows.
inline DrawnChain chain_along(const std::vector<Token>& tokens) {
  DrawnChain d{.tokens = tokens};
  std::vector<Token> prefix;
  for (std::size_t i = 0; i <= tokens.size(); ++i) {
    const auto row = raw_logits(prefix, false);
    d.target.insert(d.target.end(), row.begin(), row.end());
    d.mask.push_back(grammar_mask(prefix));
    if (i < tokens.size()) prefix.push_back(tokens[i]);
  }
  return d;
}

}  // namespace specdec::test::exact_law
