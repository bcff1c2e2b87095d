// SPDX-License-Identifier: MIT
// Block verification (Sun et al. 2024, "Block Verification Accelerates Speculative Decoding";
// docs/algorithms.md §2.4): lossless chain verification that accepts at least as many tokens in
// expectation as token-by-token rejection sampling.
#pragma once

#include "specdec/verify/chain.hpp"

namespace specdec {

namespace detail {

/// h_i = m_i / (m_i + 1 - w_i), m_i = sum [w_i p - q]+ over the rows p = p_(i+1), q = q_(i+1)
/// (0 when the denominator is not positive): one function for every path, so all round alike.
template <class T>
SPECDEC_HOST_DEVICE double block_stop_probability(const T* p, const T* q, double weight,
                                                  std::int64_t vocab) {
  const float w = static_cast<float>(weight);
  const double m = blocked_sum(
      [=](std::int64_t v) { return positive_part(w * to_float(p[v]) - to_float(q[v])); }, 0, vocab);
  const double denominator = m + 1.0 - weight;
  return denominator > 0.0 ? m / denominator : 0.0;
}

/// The row function. target rows i = 0..L (row i = p_(i+1), the target after i draft tokens), draft
/// rows i = 0..L-1, all warped and `vocab` wide, contiguous. w_0 = 1,
/// w_i = min(1, w_(i-1) p_i(x_i) / q_i(x_i)); h_i = m_i / (m_i + 1 - w_i) with
/// m_i = sum [w_i p_(i+1) - q_(i+1)]+ (i < L), h_L = w_L; tau = the largest i >= 1 with
/// u_i <= h_i (0 if none). Emits x_1..x_tau, then a token from p_(L+1) if tau = L, else from
/// norm([w_tau p_(tau+1) - q_(tau+1)]+) (p_(tau+1) if that has no mass).
/// Draws: draw i-1 is u_i (i = 1..L), draw L the final token. `rows` as ChainRows documents (L =
/// rows.length; raw rows not read), `weights` holds L + 1 doubles, `scratch` `vocab` floats.
/// Returns tau; writes tau + 1 tokens to `out`.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE std::int32_t block_verify_row(const specdec::ChainRows<T>& rows,
                                                  const U& uniforms, double* weights,
                                                  float* scratch, Token* out) {
  const T* target_rows = rows.target;
  const T* draft_rows = rows.draft;
  const Token* draft_tokens = rows.draft_tokens;
  const auto length = static_cast<std::int32_t>(rows.length);
  const std::int64_t vocab = rows.vocab;
  weights[0] = 1.0;
  for (std::int32_t i = 1; i <= length; ++i) {
    const Token x = draft_tokens[i - 1];
    const double p = to_float(target_rows[(i - 1) * vocab + x]);
    const double q = to_float(draft_rows[(i - 1) * vocab + x]);
    const double w = weights[i - 1] * p;
    weights[i] = q > 0.0 && w < q ? w / q : 1.0;
    if (weights[i - 1] == 0.0) weights[i] = 0.0;
  }
  std::int32_t tau = 0;
  for (std::int32_t i = 1; i <= length; ++i) {
    double h;
    if (i == length) {
      h = weights[length];
    } else {
      h = block_stop_probability(target_rows + i * vocab, draft_rows + i * vocab, weights[i], vocab);
    }
    if (uniforms.uniform(static_cast<std::uint32_t>(i - 1)) <= h) tau = i;
  }
  for (std::int32_t i = 0; i < tau; ++i) out[i] = draft_tokens[i];
  const float u = uniforms.uniform(static_cast<std::uint32_t>(length));
  const T* p = target_rows + tau * vocab;
  if (tau == length) {
    out[tau] = sample_row(p, vocab, u);
    return tau;
  }
  const double mass = weights[tau] > 0.0 ? residual_update(p, draft_rows + tau * vocab,
                                                           1.0f / static_cast<float>(weights[tau]),
                                                           vocab, scratch, kResidualFloor)
                                         : -1.0;
  out[tau] = mass < 0.0 ? sample_row(p, vocab, u) : sample_row(scratch, vocab, u);
  return tau;
}

}  // namespace detail

/// Block verification of L draft tokens with rows laid out as in verify_chain (warped rows;
/// target_rows has L + 1 rows). Draws from `stream` only (one stream for the whole block):
/// draw i-1 is the uniform u_i of position i (i = 1..L), draw L the final token.
/// Writes accepted tokens then the final token to `out` (>= L + 1 entries).
template <class T = float, UniformSource U>
ChainVerdict verify_block(std::type_identity_t<std::span<const T>> target_rows,
                          std::type_identity_t<std::span<const T>> draft_rows,
                          std::span<const Token> draft_tokens, std::int64_t vocab,
                          const U& uniforms, std::span<Token> out, Workspace& ws) {
  if (vocab < 1) detail::fail("vocab", "{} must be >= 1", vocab);
  const auto length = draft_tokens.size();
  const auto v = static_cast<std::size_t>(vocab);
  detail::check_size("target_rows", target_rows.size(),
             detail::checked_mul<std::size_t>("vocab", length + 1, v));
  detail::check_size("draft_rows", draft_rows.size(), length * v);
  if (out.size() < length + 1) {
    detail::fail("out", "has {} entries, needs L + 1 = {}", out.size(), length + 1);
  }
  for (std::size_t i = 0; i <= length; ++i) {
    check_probability_row<T>(ArgName("target_rows", i), target_rows.subspan(i * v, v));
  }
  for (std::size_t i = 0; i < length; ++i) {
    const auto draft = draft_rows.subspan(i * v, v);
    check_probability_row<T>(ArgName("draft_rows", i), draft);
    const ArgName name("draft_tokens", static_cast<std::int64_t>(i));
    detail::check_token(name, draft_tokens[i], vocab);
    if (!(static_cast<float>(draft[static_cast<std::size_t>(draft_tokens[i])]) > 0.0f)) {
      detail::fail(name, "token {} has draft probability 0", draft_tokens[i]);
    }
  }
  auto scope = ws.scope();
  auto weights = ws.take<double>(length + 1);
  auto scratch = ws.take<float>(v);
  const ChainRows<T> rows{.target = target_rows.data(),
                          .draft = draft_rows.data(),
                          .draft_tokens = draft_tokens.data(),
                          .length = length,
                          .vocab = vocab};
  const auto tau = detail::block_verify_row(rows, uniforms, weights.data(), scratch.data(),
                                            out.data());
  return {tau, tau + 1};
}

}  // namespace specdec
