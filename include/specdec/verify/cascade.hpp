// SPDX-License-Identifier: MIT
// Speculative sampling towards a general target pi = T(draft, target), with the speculative
// cascade deferral rules (seed 004 Alg. 4, App. C-E; docs/algorithms.md §1.6).
#pragma once

#include <cmath>
#include <string_view>

#include "specdec/verify/common.hpp"

namespace specdec {

/// How pi is formed. The first six defer the whole row (pi = draft or target); the token rules
/// mix per token. "Raw" below is the unwarped row, S(.) the warped one.
enum class Deferral : std::int32_t {
  kChow,     // defer iff max raw_draft < 1 - alpha
  kDiff,     // defer iff max raw_draft < max raw_target - alpha
  kOpt,      // defer iff max raw_draft < max raw_target - alpha * TV(S(target), S(draft))
  kDiffLog,  // defer iff -H(raw_draft) < -H(raw_target) - alpha
  kOptLog,   // defer iff -H(raw_draft) < -H(raw_target) - alpha * TV(S(target), S(draft))
  kBild,     // defer iff -log raw_target(argmax raw_draft) > alpha
  kTokenV1,  // r(v) = 1(raw_draft(v) < max raw_target - alpha)
  kTokenV2,  // r(v) = 1(raw_target(v) < max raw_target - alpha)
  kTokenV3,  // r(v) = 1(raw_target(v) < (1 - alpha) max raw_target)
};

inline constexpr std::string_view deferral_name(Deferral d) {
  constexpr std::string_view names[] = {"chow", "diff",     "opt",      "difflog", "optlog",
                                        "bild", "token_v1", "token_v2", "token_v3"};
  return names[static_cast<int>(d)];
}

/// Throws specdec::Error unless alpha lies in the rule's range: Chow and TokenV3 [0, 1]; Diff,
/// TokenV1 and TokenV2 [-1, 1]; OPT, DiffLog, OPTLog any finite value; BiLD* >= 0.
/// Speculative sampling towards a cascade target pi, one candidate.
struct Cascade {
  Deferral deferral = Deferral::kChow;
  float alpha = 0.0f;
};

inline void check_deferral(Deferral d, float alpha) {
  if (static_cast<int>(d) < 0 || static_cast<int>(d) > static_cast<int>(Deferral::kTokenV3)) {
    detail::fail("rule", "{} is not a deferral rule", static_cast<int>(d));
  }
  detail::check_finite("alpha", alpha);
  switch (d) {
    case Deferral::kChow:
    case Deferral::kTokenV3:
      detail::check_in_closed("alpha", alpha, 0.0f, 1.0f);
      break;
    case Deferral::kDiff:
    case Deferral::kTokenV1:
    case Deferral::kTokenV2:
      detail::check_in_closed("alpha", alpha, -1.0f, 1.0f);
      break;
    case Deferral::kBild:
      if (!(alpha >= 0.0f)) detail::fail("alpha", "{} must be >= 0 for bild", alpha);
      break;
    default:
      break;
  }
}

namespace detail {

/// pi = T(draft, target) into `pi` (vocab floats). Deferral decisions read the raw rows; the
/// mixture is of the warped rows `target` and `draft`. O(V), no draws.
template <class T>
SPECDEC_HOST_DEVICE void cascade_pi_row(const T* raw_target, const T* raw_draft, const T* target,
                                        const T* draft, std::int64_t vocab, Deferral rule,
                                        float alpha, float* pi) {
  const float max_target = row_max(raw_target, vocab);
  if (rule == Deferral::kTokenV1 || rule == Deferral::kTokenV2 || rule == Deferral::kTokenV3) {
    // pi = draft where the token is kept, plus eta * target, eta the draft mass deferred (summed
    // by blocked_sum: the loops vectorise).
    const auto deferred = [=](std::int64_t v) {
      const float t = to_float(raw_target[v]);
      return rule == Deferral::kTokenV1   ? to_float(raw_draft[v]) < max_target - alpha
             : rule == Deferral::kTokenV2 ? t < max_target - alpha
                                          : t < (1.0f - alpha) * max_target;
    };
    const auto eta = static_cast<float>(blocked_sum(
        [=](std::int64_t v) { return deferred(v) ? to_float(draft[v]) : 0.0f; }, 0, vocab));
    for (std::int64_t v = 0; v < vocab; ++v) {
      pi[v] = (deferred(v) ? 0.0f : to_float(draft[v])) + eta * to_float(target[v]);
    }
    return;
  }
  bool defer = false;
  switch (rule) {
    case Deferral::kChow:
      defer = row_max(raw_draft, vocab) < 1.0f - alpha;
      break;
    case Deferral::kDiff:
      defer = row_max(raw_draft, vocab) < max_target - alpha;
      break;
    case Deferral::kOpt:
      defer =
          row_max(raw_draft, vocab) < max_target - alpha * row_positive_mass(target, draft, vocab);
      break;
    case Deferral::kDiffLog:
      defer = -row_entropy(raw_draft, vocab) < -row_entropy(raw_target, vocab) - alpha;
      break;
    case Deferral::kOptLog:
      defer = -row_entropy(raw_draft, vocab) <
              -row_entropy(raw_target, vocab) - alpha * row_positive_mass(target, draft, vocab);
      break;
    default: {  // kBild
      const float t = to_float(raw_target[row_argmax(raw_draft, vocab)]);
      defer = (t > 0.0f ? -logf(t) : INFINITY) > alpha;
      break;
    }
  }
  for (std::int64_t v = 0; v < vocab; ++v) pi[v] = to_float(defer ? target[v] : draft[v]);
}

/// Speculative sampling towards pi: forms pi (O(V)) into `scratch`, accepts `candidate` (drawn
/// from the warped draft) iff u_0 * draft(x) < pi(x), else draws the correction from
/// norm([pi - draft]+) (pi itself if that has no mass). `rows` holds all four rows (raw ones
/// non-null). Draws: draw 0 the test, draw 1 the correction (only on rejection).
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict cascade_row(const NodeRows<T>& rows, Token candidate,
                                            Cascade rule, const U& uniforms, float* scratch) {
  const T* draft = rows.draft;
  const std::int64_t vocab = rows.vocab;
  cascade_pi_row(rows.raw_target, rows.raw_draft, rows.target, draft, vocab, rule.deferral,
                 rule.alpha, scratch);
  if (accepts(uniforms.uniform(0u), to_float(draft[candidate]), 1.0f, scratch[candidate])) {
    return {0, candidate};
  }
  residual_update(scratch, draft, 1.0f, vocab, scratch, kResidualFloor);  // keeps pi if empty
  return {-1, sample_row(scratch, vocab, uniforms.uniform(1u))};
}

}  // namespace detail

/// pi = T(draft, target) for a cascade rule (raw rows for the decision, warped for the mixture).
template <class T = float>
void cascade_target(std::type_identity_t<std::span<const T>> raw_target,
                    std::type_identity_t<std::span<const T>> raw_draft,
                    std::type_identity_t<std::span<const T>> target,
                    std::type_identity_t<std::span<const T>> draft, Deferral rule, float alpha,
                    std::span<float> pi) {
  check_probability_row<T>("target", target);
  check_probability_row<T>("draft", draft);
  detail::check_size("draft", draft.size(), target.size());
  check_probability_row<T>("raw_target", raw_target);
  check_probability_row<T>("raw_draft", raw_draft);
  detail::check_size("raw_target", raw_target.size(), target.size());
  detail::check_size("raw_draft", raw_draft.size(), target.size());
  detail::check_size("pi", pi.size(), target.size());
  check_deferral(rule, alpha);
  detail::cascade_pi_row(raw_target.data(), raw_draft.data(), target.data(), draft.data(),
                         static_cast<std::int64_t>(target.size()), rule, alpha, pi.data());
}

/// Cascade verification of one candidate with `rule` (its deferral and alpha; draws: see
/// detail::cascade_row). `raw_*` are the unwarped rows, `target`/`draft` the warped ones the
/// candidate was drawn from.
template <class T = float, UniformSource U>
NodeVerdict verify_cascade(std::type_identity_t<std::span<const T>> raw_target,
                           std::type_identity_t<std::span<const T>> raw_draft,
                           std::type_identity_t<std::span<const T>> target,
                           std::type_identity_t<std::span<const T>> draft, Token candidate,
                           Cascade rule, const U& uniforms, Workspace& ws) {
  const Token c[1] = {candidate};
  detail::check_node_inputs<T>(target, draft, std::span<const Token>(c, 1), true, "candidate");
  check_probability_row<T>("raw_target", raw_target);
  check_probability_row<T>("raw_draft", raw_draft);
  detail::check_size("raw_target", raw_target.size(), target.size());
  detail::check_size("raw_draft", raw_draft.size(), target.size());
  check_deferral(rule.deferral, rule.alpha);
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  const NodeRows<T> rows{target.data(), draft.data(), static_cast<std::int64_t>(target.size()),
                         raw_target.data(), raw_draft.data()};
  return detail::cascade_row(rows, candidate, rule, uniforms, scratch.data());
}

}  // namespace specdec
