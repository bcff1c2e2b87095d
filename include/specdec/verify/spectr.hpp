// SPDX-License-Identifier: MIT
// SpecTr K-SEQ draft selection for i.i.d. candidates (Sun et al. 2023; docs/algorithms.md §1.4).
#pragma once

#include <cmath>

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// beta(gamma) = sum_x min(draft(x), target(x) / gamma), in double.
template <class T>
SPECDEC_HOST_DEVICE double spectr_beta(const T* target, const T* draft, std::int64_t vocab,
                                       double gamma) {
  const float inv = static_cast<float>(1.0 / gamma);
  return blocked_sum(
      [=](std::int64_t i) {
        const float t = to_float(target[i]) * inv, d = to_float(draft[i]);
        return d < t ? d : t;
      },
      0, vocab);
}

/// 1 - (1 - beta)^K - gamma * beta: <= 0 exactly where the K-SEQ residual is non-negative.
SPECDEC_HOST_DEVICE double spectr_excess(double beta, double gamma, std::int32_t count) {
  return 1.0 - pow(1.0 - beta, static_cast<double>(count)) - gamma * beta;
}

/// The smallest valid gamma in [1, K] (largest acceptance with a non-negative residual): the root
/// of 1 - (1 - beta)^K = gamma * beta by bisection (60 halvings, each O(V)).
template <class T>
SPECDEC_HOST_DEVICE double spectr_gamma_row(const T* target, const T* draft, std::int64_t vocab,
                                            std::int32_t count) {
  if (spectr_excess(spectr_beta(target, draft, vocab, 1.0), 1.0, count) <= 0.0) return 1.0;
  double lo = 1.0, hi = static_cast<double>(count);
  for (int it = 0; it < 60; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (spectr_excess(spectr_beta(target, draft, vocab, mid), mid, count) <= 0.0) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

/// K-SEQ with a valid `gamma` >= 1 (see spectr_gamma_row): candidate k is accepted iff
/// u_k * gamma * draft(x_k) < target(x_k); all rejected: the correction is drawn from
/// norm([target - min(draft, target / gamma) * (1 - (1 - beta)^K) / beta]+) (target if empty).
/// beta and the residual are computed only when every candidate was rejected.
/// Draws: draw k (k < count) tests candidate k; draw `count` the correction. Rows are warped.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict spectr_row(const T* target, const T* draft, std::int64_t vocab,
                                           const Token* candidates, std::int32_t count,
                                           double gamma, const U& uniforms, float* scratch) {
  const float g = static_cast<float>(gamma);
  for (std::int32_t k = 0; k < count; ++k) {
    const Token x = candidates[k];
    if (uniforms.uniform(static_cast<std::uint32_t>(k)) * g * to_float(draft[x]) <
        to_float(target[x])) {
      return {k, x};
    }
  }
  const double beta = spectr_beta(target, draft, vocab, gamma);
  const double factor =
      beta > 0.0 ? (1.0 - pow(1.0 - beta, static_cast<double>(count))) / beta : 0.0;
  double mass = 0.0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    const double t = to_float(target[i]), d = to_float(draft[i]);
    const double r = t - (d < t / gamma ? d : t / gamma) * factor;
    scratch[i] = r > 0.0 ? static_cast<float>(r) : 0.0f;
    mass += scratch[i];
  }
  const float u = uniforms.uniform(static_cast<std::uint32_t>(count));
  if (!(mass >= kResidualFloor)) return {-1, sample_row(target, vocab, u)};
  return {-1, sample_row(scratch, vocab, u)};
}

}  // namespace detail

/// The K-SEQ gamma chosen automatically: the root of 1 - (1 - beta)^K = gamma * beta on [1, K].
/// Rows are warped probability rows. Throws specdec::Error for bad rows or K < 1.
template <class T = float>
double spectr_gamma(std::type_identity_t<std::span<const T>> target,
                    std::type_identity_t<std::span<const T>> draft, std::int32_t count) {
  check_probability_row<T>("target", target);
  check_probability_row<T>("draft", draft);
  detail::check_size("draft", draft.size(), target.size());
  if (count < 1) detail::fail("count", "{} must be >= 1", count);
  return detail::spectr_gamma_row(target.data(), draft.data(),
                                  static_cast<std::int64_t>(target.size()), count);
}

namespace detail {
/// Resolves gamma (<= 0 means automatic) and rejects an explicit gamma outside [1, K] or one whose
/// residual would be negative somewhere.
template <class T>
double resolve_spectr_gamma(std::span<const T> target, std::span<const T> draft, std::int32_t count,
                            double gamma) {
  const auto vocab = static_cast<std::int64_t>(target.size());
  if (gamma <= 0.0) return spectr_gamma_row(target.data(), draft.data(), vocab, count);
  if (!std::isfinite(gamma) || gamma < 1.0 || gamma > count) {
    detail::fail("gamma", "{} is outside [1, K = {}]", gamma, count);
  }
  const double beta = spectr_beta(target.data(), draft.data(), vocab, gamma);
  if (spectr_excess(beta, gamma, count) > 1e-6) {
    detail::fail("gamma",
                 "{} makes the K-SEQ residual negative (1 - (1 - beta)^K = {} > gamma * beta = "
                 "{}); use a larger gamma or the automatic one ({})",
                 gamma, 1.0 - std::pow(1.0 - beta, count), gamma * beta,
                 spectr_gamma_row(target.data(), draft.data(), vocab, count));
  }
  return gamma;
}
}  // namespace detail

/// K-SEQ on warped rows; `gamma` <= 0 chooses it automatically (spectr_gamma). The number of
/// candidates is the K of the residual formula. Throws specdec::Error naming the bad argument
/// (an explicit gamma whose residual would be negative is an error).
template <class T = float, UniformSource U>
NodeVerdict verify_spectr(std::type_identity_t<std::span<const T>> target,
                          std::type_identity_t<std::span<const T>> draft,
                          std::span<const Token> candidates, double gamma, const U& uniforms,
                          Workspace& ws) {
  detail::check_node_inputs<T>(target, draft, candidates);
  detail::check_count("candidates", candidates.size(), 1, 1u << 20);
  const auto count = static_cast<std::int32_t>(candidates.size());
  const double g = detail::resolve_spectr_gamma<T>(target, draft, count, gamma);
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  return detail::spectr_row(target.data(), draft.data(), static_cast<std::int64_t>(target.size()),
                            candidates.data(), count, g, uniforms, scratch.data());
}

}  // namespace specdec
