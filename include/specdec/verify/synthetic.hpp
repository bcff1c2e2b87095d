// SPDX-License-Identifier: MIT
// vLLM's "synthetic" rejection method, a benchmarking rule: draft position i is accepted with a
// preset probability whatever the rows say, so an engine can be timed at a chosen acceptance
// length without a matching draft. Lossy: the output follows the draft, not the target.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/verify/target_only.hpp"

namespace specdec {
namespace detail {

/// The correction after a forced rejection of `candidate`: drawn with `u` from the target row with
/// the candidate removed (the row itself when the candidate holds all but the residual floor of
/// it, which only a point mass does). `scratch` holds `vocab` floats.
template <class T>
SPECDEC_HOST_DEVICE Token target_without(const T* target, std::int64_t vocab, Token candidate,
                                         float u, float* scratch) {
  const double mass = copy_row(target, vocab, scratch);
  if (mass - static_cast<double>(scratch[candidate]) < kResidualFloor) {
    return sample_row(target, vocab, u);
  }
  scratch[candidate] = 0.0f;
  return sample_row(scratch, vocab, u);
}

/// Position i of a synthetic chain: accepted iff draw 0 < `rate` (the conditional acceptance
/// probability of the position); otherwise the correction is drawn with draw 1 from the target
/// without the candidate.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict synthetic_row(const T* target, std::int64_t vocab, Token candidate,
                                              float rate, const U& uniforms, float* scratch) {
  if (uniforms.uniform(0u) < rate) return {0, candidate};
  return {-1, target_without(target, vocab, candidate, uniforms.uniform(1u), scratch)};
}

/// Rates are probabilities, one per position the longest chain reaches.
inline void check_synthetic_rates(std::span<const float> rates, std::size_t length) {
  if (rates.size() < length) {
    fail("synthetic_acceptance_rates", "has {} entries; the chain has {} draft positions",
         rates.size(), length);
  }
  for (std::size_t i = 0; i < length; ++i) {
    if (!(rates[i] >= 0.0f && rates[i] <= 1.0f)) {
      fail(ArgName("synthetic_acceptance_rates", static_cast<std::int64_t>(i)),
           "{} is outside [0, 1]", rates[i]);
    }
  }
}

/// verify_chain_synthetic without validation (same draws) on `rows` (its target rows and draft
/// tokens; draft and raw rows unused): `rates` rows.length probabilities, `out` length + 1
/// tokens, `scratch` vocab floats.
template <class T, class Check = NoRowChecks>
ChainVerdict verify_chain_synthetic_unchecked(const specdec::ChainRows<T>& rows, const float* rates,
                                              const RandomStream& stream, Token* out,
                                              float* scratch, const Check& check = {}) {
  const std::int64_t vocab = rows.vocab;
  const auto v = static_cast<std::size_t>(vocab);
  const auto verify = [&](std::size_t i, const RandomStream& s) {
    return synthetic_row(rows.target + i * v, vocab, rows.draft_tokens[i], rates[i], s, scratch);
  };
  const auto bonus = [&](const RandomStream& s) {
    return sample_row(rows.target + rows.length * v, vocab, s.uniform(0));
  };
  return walk_chain(rows.length, stream, out, check, verify, bonus);
}

}  // namespace detail

/// vLLM's synthetic acceptance on a chain of L draft tokens with L + 1 warped target rows: draft
/// token i, reached, is accepted with probability `rates[i]` whatever the rows hold, so the
/// accepted length N has P(N >= n) = rates[0] * ... * rates[n - 1]. At the first rejection the
/// token is drawn from the target row without the draft token; all accepted: the bonus is drawn
/// from row L. Lossy (for benchmarking engines only). Throws specdec::Error naming a bad argument
/// (a rate outside [0, 1], fewer rates than positions, a bad token or row).
template <class T = float>
ChainVerdict verify_chain_synthetic(std::type_identity_t<std::span<const T>> target_rows,
                                    std::span<const Token> draft_tokens, std::int64_t vocab,
                                    std::span<const float> rates, const RandomStream& stream,
                                    std::span<Token> out, Workspace& ws) {
  detail::check_target_only_chain<T>(target_rows, draft_tokens, vocab, out.size());
  detail::check_synthetic_rates(rates, draft_tokens.size());
  auto scope = ws.scope();
  auto scratch = ws.take<float>(static_cast<std::size_t>(vocab));
  return detail::verify_chain_synthetic_unchecked<T>(
      {.target = target_rows.data(),
       .draft_tokens = draft_tokens.data(),
       .length = draft_tokens.size(),
       .vocab = vocab},
      rates.data(), stream, out.data(), scratch.data(),
      detail::TargetRowChecks<T>{target_rows, static_cast<std::size_t>(vocab)});
}

}  // namespace specdec
