// SPDX-License-Identifier: MIT
// MTAD's sequence-level rule (seed 002 §3.2, Alg. 1, with the fix of docs/algorithms.md §2.3):
// accept the LONGEST draft prefix whose joint target/draft ratio passes the threshold, then draw
// one token from the target row after that prefix. Not lossless; tau = 1 is plain target sampling.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "specdec/config.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"

namespace specdec {

struct MtadVerdict {
  std::int32_t accepted = 0;  // eta: draft tokens kept, in [0, L]
  Token token = kNoToken;     // drawn from the target row after the kept prefix
};

namespace detail {

/// Row function. draft_tokens[i] = x_(i+1); draft_log_probs[i] = log q(x_(i+1) | x_<=i) (the
/// draft's per-token log-probability); target_rows row i = warped target distribution after
/// x_1..x_i (rows 0..L). log_tau = log(tau), -inf for tau = 0.
/// Draws: one uniform, index 0, for the final token.
template <UniformSource U>
SPECDEC_HOST_DEVICE MtadVerdict verify_mtad_row(const Token* draft_tokens,
                                                const float* draft_log_probs, std::int64_t length,
                                                const float* target_rows, std::int64_t vocab,
                                                float log_tau, const U& uniforms) {
  double log_target = 0.0, log_draft = 0.0;
  std::int32_t eta = 0;
  for (std::int64_t i = 0; i < length; ++i) {
    const float t = target_rows[i * vocab + draft_tokens[i]];
    log_target += t > 0.0f ? log(static_cast<double>(t)) : -INFINITY;
    log_draft += static_cast<double>(draft_log_probs[i]);
    // No early exit: a later prefix may pass again.
    // min(1, r) > tau needs tau < 1 as well as r > tau.
    if (log_tau < 0.0f && log_target > -INFINITY &&
        log_target - log_draft > static_cast<double>(log_tau)) {
      eta = static_cast<std::int32_t>(i + 1);
    }
  }
  const float* row = target_rows + eta * vocab;
  float total = 0.0f;
  for (std::int64_t v = 0; v < vocab; ++v) total += row[v];
  return {eta, static_cast<Token>(sample_weights(row, vocab, total, uniforms.uniform(0)))};
}

}  // namespace detail

/// MTAD verification of one draft sequence of length L.
/// - `draft_tokens`: x_1..x_L; `draft_log_probs`: log q(x_i | x_<i) for each, as the beam
///   sampler returns them (differences of its prefix joint log-probabilities);
/// - `target_rows`: (L + 1) x V warped target rows, row i = after x_1..x_i;
/// - `tau` in [0, 1]: min(1, P_i / Q_i) > tau accepts prefix i; the longest accepted prefix wins.
/// Draws: one uniform (draw 0) for the final token. Throws specdec::Error on bad input.
template <UniformSource U>
MtadVerdict verify_mtad(std::span<const Token> draft_tokens, std::span<const float> draft_log_probs,
                        MatrixView<const float> target_rows, float tau, const U& uniforms) {
  detail::check_size("draft_log_probs", draft_log_probs.size(), draft_tokens.size());
  if (target_rows.rows != static_cast<std::int64_t>(draft_tokens.size()) + 1) {
    detail::fail("target_rows", "has {} rows, expected L + 1 = {}", target_rows.rows,
                 draft_tokens.size() + 1);
  }
  detail::check_in_closed("tau", tau, 0.0f, 1.0f);
  detail::check_tokens("draft_tokens", draft_tokens, target_rows.cols);
  for (std::size_t i = 0; i < draft_log_probs.size(); ++i) {
    if (std::isnan(draft_log_probs[i]) || draft_log_probs[i] > 0.0f) {
      detail::fail(fmt::format("draft_log_probs[{}]", i), "{} is not a log-probability",
                   draft_log_probs[i]);
    }
  }
  for (std::int64_t r = 0; r < target_rows.rows; ++r) {
    check_probability_row(ArgName("target_rows", r), target_rows.row(r));
  }
  if (target_rows.stride != target_rows.cols) {
    detail::fail("target_rows", "must be contiguous (stride {} != cols {})", target_rows.stride,
                 target_rows.cols);
  }
  return detail::verify_mtad_row(
      draft_tokens.data(), draft_log_probs.data(), static_cast<std::int64_t>(draft_tokens.size()),
      target_rows.data, target_rows.cols, tau > 0.0f ? std::log(tau) : -INFINITY, uniforms);
}

}  // namespace specdec
