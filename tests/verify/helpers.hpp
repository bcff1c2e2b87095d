// SPDX-License-Identifier: MIT
// Test helpers for the verifiers: random small pairs, warps, candidate drawing and comparisons.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "../support/stats.hpp"
#include "specdec/specdec.hpp"
#include "specdec/toy/toy.hpp"

namespace specdec::test {

struct Pair {
  std::vector<float> target, draft;          // warped
  std::vector<float> raw_target, raw_draft;  // raw
};

inline std::vector<float> warped(const std::vector<float>& row, const Warp& warp) {
  Workspace ws;
  std::vector<float> out(row.size());
  warp_probabilities<float>(warp, row, out, ws);
  return out;
}

/// A tree verdict equals the expected one, its accepted nodes (`got`, `want`) included.
template <class Verdict>
void check_same_tree_verdict(const Verdict& verdict, const Verdict& expected,
                             const std::vector<std::int32_t>& got,
                             const std::vector<std::int32_t>& want) {
  CHECK(verdict.accepted == expected.accepted);
  CHECK(verdict.token == expected.token);
  CHECK(verdict.bonus == expected.bonus);
  const auto kept = static_cast<std::size_t>(expected.accepted);
  CHECK(std::vector<std::int32_t>(got.begin(), got.begin() + kept) ==
        std::vector<std::int32_t>(want.begin(), want.begin() + kept));
}

// Every row of a [rows, vocab] matrix warped (the row-based entries' input).
inline std::vector<float> warp_rows(const Warp& warp, const std::vector<float>& logits,
                                    std::int64_t vocab) {
  Workspace ws;
  std::vector<float> out(logits.size());
  const auto v = static_cast<std::size_t>(vocab);
  for (std::size_t r = 0; r * v < logits.size(); ++r) {
    warp_logits<float>(warp, std::span<const float>(logits).subspan(r * v, v),
                       std::span<float>(out).subspan(r * v, v), ws);
  }
  return out;
}

inline Pair make_pair(std::int64_t vocab, std::uint64_t seed, Warp warp = {}, float noise = 0.5f) {
  warp.top_k = static_cast<std::int32_t>(std::min<std::int64_t>(warp.top_k, vocab));
  auto raw = toy::make_categorical_pair(vocab, seed, 1.0, 1.3f, noise);
  Pair p;
  p.raw_target = raw.target;
  p.raw_draft = raw.draft;
  p.target = warped(raw.target, warp);
  p.draft = warped(raw.draft, warp);
  return p;
}

/// The warps every exactness test runs under.
inline std::vector<Warp> test_warps() {
  return {Warp{}, Warp{.temperature = 0.7f}, Warp{.top_k = 3}, Warp{.top_p = 0.8f},
          Warp{.temperature = 1.5f, .top_k = 4, .top_p = 0.9f}};
}

/// Candidates from `draft`: i.i.d., or without replacement (sequentially) when `distinct`.
/// Draws come from `stream` (Domain::kDraft): draw k for candidate k.
inline std::vector<Token> draw_candidates(const std::vector<float>& draft, std::int32_t count,
                                          bool distinct, const RandomStream& stream) {
  std::vector<Token> out;
  std::vector<float> row = draft;
  for (std::int32_t k = 0; k < count; ++k) {
    float total = 0.0f;
    for (float v : row) total += v;
    if (!(total > 0.0f)) break;
    const auto x = static_cast<Token>(
        detail::sample_weights(row.data(), static_cast<std::int64_t>(row.size()), total,
                               stream.uniform(static_cast<std::uint32_t>(k))));
    out.push_back(x);
    if (distinct) row[static_cast<std::size_t>(x)] = 0.0f;
  }
  return out;
}

inline void check_close(const std::vector<double>& a, std::span<const float> b, double tol = 1e-6) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("index " << i);
    CHECK(a[i] == Catch::Detail::Approx(b[i]).margin(tol));
  }
}
inline void check_close(const std::vector<double>& a, const std::vector<double>& b,
                        double tol = 1e-6) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("index " << i);
    CHECK(a[i] == Catch::Detail::Approx(b[i]).margin(tol));
  }
}

/// Exact output distribution and acceptance of a rule.
struct Exact {
  std::vector<double> distribution;
  double accept = 0.0;
};
inline Exact exact(const Rule& rule, const Pair& p, std::int32_t count) {
  Exact e;
  e.distribution.assign(p.target.size(), 0.0);
  e.accept = exact_node_distribution(rule, p.target, p.draft, count, e.distribution, p.raw_target,
                                     p.raw_draft);
  return e;
}

/// Each sequence b of a chain batch (offsets, emitted and accepted as ChainBatchArgs lays them
/// out: b's gamma + 1 output slots start at offsets[b] + b) against its single-sequence call:
/// single(b, first, gamma, want) returns the verdict and writes its tokens to `want`; the batch
/// fills the slots after them with kNoToken.
template <class Single>
void check_chain_batch_sequences(std::span<const std::int32_t> offsets,
                                 std::span<const Token> emitted,
                                 std::span<const std::int32_t> accepted, Single&& single) {
  for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
    INFO("sequence " << b);
    const auto first = static_cast<std::size_t>(offsets[b]);
    const auto gamma = static_cast<std::size_t>(offsets[b + 1]) - first;
    std::vector<Token> want(gamma + 1);
    const auto verdict = single(b, first, gamma, std::span<Token>(want));
    std::fill(want.begin() + verdict.emitted, want.end(), kNoToken);
    CHECK(accepted[b] == verdict.accepted);
    const auto slots = emitted.subspan(first + b, gamma + 1);
    CHECK(std::vector<Token>(slots.begin(), slots.end()) == want);
  }
}

}  // namespace specdec::test
