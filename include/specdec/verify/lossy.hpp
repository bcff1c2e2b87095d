// SPDX-License-Identifier: MIT
// Lossy speculative sampling (Tran-Thien 2023; docs/algorithms.md §1.5) and its greedy variant.
#pragma once

#include <cmath>

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Accepts `candidate` (drawn from the warped `draft`) iff u_0 * (1 - alpha) * draft(x) <
/// target(x); otherwise draws the correction from norm([target / beta - draft]+) (target if
/// empty). Draws: draw 0 the test, draw 1 the correction (only on rejection).
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict lossy_row(const T* target, const T* draft, std::int64_t vocab,
                                          Token candidate, float alpha, float beta,
                                          const U& uniforms, float* scratch) {
  if (uniforms.uniform(0u) * (1.0f - alpha) * to_float(draft[candidate]) <
      to_float(target[candidate])) {
    return {0, candidate};
  }
  // [target / beta - draft]+ = [target - beta * draft]+ / beta: same normalised row.
  const double mass = residual_update(target, draft, beta, vocab, scratch, kResidualFloor);
  const float u = uniforms.uniform(1u);
  return {-1, mass < 0.0 ? sample_row(target, vocab, u) : sample_row(scratch, vocab, u)};
}

/// Greedy variant (T = 0, Leviathan App. A.5): accept iff target(x) >= (1 - alpha) max target,
/// else the correction is argmax target. No draws.
template <class T>
SPECDEC_HOST_DEVICE NodeVerdict lossy_greedy_row(const T* target, std::int64_t vocab,
                                                 Token candidate, float alpha) {
  const std::int64_t best = row_argmax(target, vocab);
  if (to_float(target[candidate]) >= (1.0f - alpha) * to_float(target[best])) {
    return {0, candidate};
  }
  return {-1, static_cast<Token>(best)};
}

/// P_rej = sum_x [draft(x) - target(x) / (1 - alpha)]+.
template <class T>
SPECDEC_HOST_DEVICE double lossy_rejection_mass(const T* target, const T* draft, std::int64_t vocab,
                                                double alpha) {
  double s = 0.0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const double r = to_float(draft[i]) - to_float(target[i]) / (1.0 - alpha);
    s += r > 0.0 ? r : 0.0;
  }
  return s;
}

/// sum_x [target(x) / beta - draft(x)]+.
template <class T>
SPECDEC_HOST_DEVICE double lossy_residual_mass(const T* target, const T* draft, std::int64_t vocab,
                                               double beta) {
  double s = 0.0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const double r = to_float(target[i]) / beta - to_float(draft[i]);
    s += r > 0.0 ? r : 0.0;
  }
  return s;
}

/// The tuned beta: solves sum [draft - target / (1 - alpha)]+ = sum [target / beta - draft]+ by
/// bisection (the right side decreases in beta). Returns 1 when nothing is ever rejected (then
/// the residual is never used and the output is the draft row).
template <class T>
SPECDEC_HOST_DEVICE double lossy_tuned_beta_row(const T* target, const T* draft, std::int64_t vocab,
                                                double alpha) {
  const double rejected = lossy_rejection_mass(target, draft, vocab, alpha);
  if (!(rejected > 0.0)) return 1.0;
  double lo = 1.0 - alpha, hi = 1.0;
  while (lossy_residual_mass(target, draft, vocab, hi) > rejected && hi < 1e30) hi *= 2.0;
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (lossy_residual_mass(target, draft, vocab, mid) > rejected) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

}  // namespace detail

/// The tuned beta of lossy sampling (warped rows): the output is then exactly
/// max(min(draft, target / (1 - alpha)), target / beta) (seed 004 Lemma 2).
template <class T = float>
double lossy_tuned_beta(std::type_identity_t<std::span<const T>> target,
                        std::type_identity_t<std::span<const T>> draft, double alpha) {
  check_probability_row<T>("target", target);
  check_probability_row<T>("draft", draft);
  detail::check_size("draft", draft.size(), target.size());
  detail::check_in_half_open("alpha", alpha, 0.0, 1.0);
  return detail::lossy_tuned_beta_row(target.data(), draft.data(),
                                      static_cast<std::int64_t>(target.size()), alpha);
}

namespace detail {
/// alpha in [0, 1), beta finite >= 1 - alpha, and a residual with mass when rejection can happen.
template <class T>
void check_lossy(std::span<const T> target, std::span<const T> draft, double alpha, double beta) {
  detail::check_in_half_open("alpha", alpha, 0.0, 1.0);
  if (!std::isfinite(beta) || !(beta >= 1.0 - alpha - 1e-12)) {
    detail::fail("beta", "{} must be finite and >= 1 - alpha = {}", beta, 1.0 - alpha);
  }
  const auto vocab = static_cast<std::int64_t>(target.size());
  if (lossy_rejection_mass(target.data(), draft.data(), vocab, alpha) > 0.0 &&
      !(lossy_residual_mass(target.data(), draft.data(), vocab, beta) > 0.0)) {
    detail::fail("beta", "{} leaves the residual [target / beta - draft]+ without mass", beta);
  }
}
}  // namespace detail

/// Lossy speculative sampling on warped rows (draws: see detail::lossy_row). Throws
/// specdec::Error for bad rows, alpha outside [0, 1), beta < 1 - alpha or a beta whose residual
/// has no mass while rejection is possible.
template <class T = float, UniformSource U>
NodeVerdict verify_lossy(std::type_identity_t<std::span<const T>> target,
                         std::type_identity_t<std::span<const T>> draft, Token candidate,
                         float alpha, float beta, const U& uniforms, Workspace& ws) {
  const Token c[1] = {candidate};
  detail::check_node_inputs<T>(target, draft, std::span<const Token>(c, 1), true, "candidate");
  detail::check_lossy<T>(target, draft, alpha, beta);
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  return detail::lossy_row(target.data(), draft.data(), static_cast<std::int64_t>(target.size()),
                           candidate, alpha, beta, uniforms, scratch.data());
}

/// The greedy variant on a (raw or warped) target row. No draws.
template <class T = float>
NodeVerdict verify_lossy_greedy(std::type_identity_t<std::span<const T>> target, Token candidate,
                                float alpha) {
  check_probability_row<T>("target", target);
  detail::check_token("candidate", candidate, static_cast<std::int64_t>(target.size()));
  detail::check_in_half_open("alpha", alpha, 0.0f, 1.0f);
  return detail::lossy_greedy_row(target.data(), static_cast<std::int64_t>(target.size()),
                                  candidate, alpha);
}

}  // namespace specdec
