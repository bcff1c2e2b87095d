// SPDX-License-Identifier: MIT
// A rule chosen at run time (for chain and tree walkers, tools and decoders) and one entry point,
// verify_node, that dispatches to the row functions.
#pragma once

#include <optional>
#include <variant>

#include "specdec/verify/cascade.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/lossy.hpp"
#include "specdec/verify/multi_round.hpp"
#include "specdec/verify/recursive.hpp"
#include "specdec/verify/rejection.hpp"
#include "specdec/verify/spectr.hpp"
#include "specdec/verify/typical.hpp"

namespace specdec {

/// Standard rejection sampling: exactly one candidate.
struct Rejection {};
/// Multi-round rejection sampling of i.i.d. candidates (SpecInfer).
struct MultiRound {};
/// Recursive rejection sampling of candidates drawn without replacement (RSD).
struct Recursive {};
/// SpecTr K-SEQ; gamma <= 0 picks the root of 1 - (1 - beta)^K = gamma * beta automatically.
struct SpecTr {
  double gamma = 0.0;
};
/// Lossy speculative sampling, one candidate; `tune_beta` replaces beta by the tuned value;
/// `greedy` is the T = 0 variant (accept iff target(x) >= (1 - alpha) max target).
struct Lossy {
  float alpha = 0.0f;
  float beta = 1.0f;
  bool tune_beta = false;
  bool greedy = false;
};
/// Typical acceptance (not lossless).
struct Typical {
  float epsilon = 0.3f;
  float delta = 0.09f;
};
/// Greedy matching.
struct Greedy {};

using Rule =
    std::variant<Rejection, MultiRound, Recursive, SpecTr, Lossy, Cascade, Typical, Greedy>;

/// True for the rules whose output is the warped target whatever the rows (lossless rules).
inline bool is_lossless(const Rule& rule) {
  return std::holds_alternative<Rejection>(rule) || std::holds_alternative<MultiRound>(rule) ||
         std::holds_alternative<Recursive>(rule) || std::holds_alternative<SpecTr>(rule);
}
/// True where candidates are drawn without replacement (RRS), false for i.i.d. candidates.
inline bool draws_without_replacement(const Rule& rule) {
  return std::holds_alternative<Recursive>(rule);
}
/// The most candidates one node may pass to this rule (1 for single-candidate rules).
inline std::int64_t max_candidates(const Rule& rule, std::int64_t vocab) {
  if (std::holds_alternative<Rejection>(rule) || std::holds_alternative<Lossy>(rule) ||
      std::holds_alternative<Cascade>(rule)) {
    return 1;
  }
  if (std::holds_alternative<Recursive>(rule)) return vocab;
  return std::int64_t{1} << 20;
}

namespace detail {

/// The rule's verification without validation. SpecTr with automatic gamma and Lossy with a tuned
/// beta solve for their parameter here (O(V) per bisection step). Draws: those of the rule's
/// row function (each documents them: test of candidate k = draw k, correction = draw `count`).
template <class T, UniformSource U>
NodeVerdict verify_node_unchecked(const Rule& rule, const NodeRows<T>& rows,
                                  const Token* candidates, std::int32_t count, const U& uniforms,
                                  float* scratch) {
  const T* raw_target = rows.raw_target ? rows.raw_target : rows.target;
  const T* raw_draft = rows.raw_draft ? rows.raw_draft : rows.draft;
  const auto n = rows.vocab;
  return std::visit(
      [&](const auto& r) -> NodeVerdict {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, Rejection> || std::is_same_v<R, MultiRound>) {
          return residual_walk<ResidualRule::kMultiRound>(HostRows{}, rows.target, rows.draft, n,
                                                          candidates, count, uniforms, scratch);
        } else if constexpr (std::is_same_v<R, Recursive>) {
          return residual_walk<ResidualRule::kRecursive>(HostRows{}, rows.target, rows.draft, n,
                                                         candidates, count, uniforms, scratch);
        } else if constexpr (std::is_same_v<R, SpecTr>) {
          const double g =
              r.gamma > 0.0 ? r.gamma : spectr_gamma_row(rows.target, rows.draft, n, count);
          return spectr_row(rows.target, rows.draft, n, candidates, count, g, uniforms, scratch);
        } else if constexpr (std::is_same_v<R, Lossy>) {
          if (r.greedy) return lossy_greedy_row(raw_target, n, candidates[0], r.alpha);
          const float beta =
              r.tune_beta
                  ? static_cast<float>(lossy_tuned_beta_row(rows.target, rows.draft, n, r.alpha))
                  : r.beta;
          return lossy_row(rows.target, rows.draft, n, candidates[0], r.alpha, beta, uniforms,
                           scratch);
        } else if constexpr (std::is_same_v<R, Cascade>) {
          return cascade_row(NodeRows<T>{rows.target, rows.draft, n, raw_target, raw_draft},
                             candidates[0], r, uniforms, scratch);
        } else if constexpr (std::is_same_v<R, Typical>) {
          return typical_row(rows.target, n, candidates, count, r.epsilon, r.delta, uniforms);
        } else {
          return greedy_row(rows.target, n, candidates, count);
        }
      },
      rule);
}

/// True for the rules whose corrections are argmaxes (Greedy, Lossy{greedy}).
inline bool corrects_by_argmax(const Rule& rule) {
  const auto* lossy = std::get_if<Lossy>(&rule);
  return std::holds_alternative<Greedy>(rule) || (lossy != nullptr && lossy->greedy);
}

/// The token after a fully accepted path, from the target row there: its argmax for Greedy and
/// Lossy{greedy} (whose corrections are argmaxes too), else draw 0 of `s`.
template <class T>
Token bonus_token(const Rule& rule, const T* target, std::int64_t vocab, const RandomStream& s) {
  if (corrects_by_argmax(rule)) return static_cast<Token>(row_argmax(target, vocab));
  return detail::sample_row(target, vocab, s.uniform(0));
}

/// Validates a rule's parameters against the rows and the number of candidates.
template <class T>
void check_rule(const Rule& rule, std::span<const T> target, std::span<const T> draft,
                std::int32_t count) {
  std::visit(
      [&](const auto& r) {
        using R = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<R, SpecTr>) {
          if (r.gamma > 0.0) resolve_spectr_gamma<T>(target, draft, count, r.gamma);
          if (std::isnan(r.gamma)) detail::fail("gamma", "nan is not a valid gamma");
        } else if constexpr (std::is_same_v<R, Lossy>) {
          detail::check_in_half_open("alpha", r.alpha, 0.0f, 1.0f);
          if (!r.greedy && !r.tune_beta) check_lossy<T>(target, draft, r.alpha, r.beta);
        } else if constexpr (std::is_same_v<R, Cascade>) {
          check_deferral(r.deferral, r.alpha);
        } else if constexpr (std::is_same_v<R, Typical>) {
          check_typical_parameters(r.epsilon, r.delta);
        }
      },
      rule);
}

}  // namespace detail

/// Checks a rule's parameters against warped rows and a number of candidates, as verify_node does
/// before it draws (SpecTr's gamma, Lossy's alpha and beta, the cascade deferral, typical
/// acceptance's epsilon and delta). Throws specdec::Error naming the parameter.
template <class T = float>
void check_rule_parameters(const Rule& rule, std::type_identity_t<std::span<const T>> target,
                           std::type_identity_t<std::span<const T>> draft,
                           std::int32_t candidates) {
  detail::check_rule<T>(rule, target, draft, candidates);
}

/// Verifies `candidates` at one node with any rule. `target`/`draft` are the warped rows the
/// candidates were drawn from; `raw_target`/`raw_draft` (empty = the warped rows) feed the
/// cascade deferral and the lossy greedy test. Throws specdec::Error naming the bad argument.
template <class T = float, UniformSource U>
NodeVerdict verify_node(const Rule& rule, std::type_identity_t<std::span<const T>> target,
                        std::type_identity_t<std::span<const T>> draft,
                        std::span<const Token> candidates, const U& uniforms, Workspace& ws,
                        std::type_identity_t<std::span<const T>> raw_target = {},
                        std::type_identity_t<std::span<const T>> raw_draft = {}) {
  const bool needs_support = !std::holds_alternative<Typical>(rule) &&
                             !std::holds_alternative<Greedy>(rule) &&
                             !(std::holds_alternative<Lossy>(rule) && std::get<Lossy>(rule).greedy);
  detail::check_node_inputs<T>(target, draft, candidates, needs_support);
  const auto vocab = static_cast<std::int64_t>(target.size());
  detail::check_count("candidates", candidates.size(), 1,
                      static_cast<std::size_t>(max_candidates(rule, vocab)));
  if (std::holds_alternative<Recursive>(rule)) {
    for (std::size_t k = 1; k < candidates.size(); ++k) {
      for (std::size_t j = 0; j < k; ++j) {
        if (candidates[j] == candidates[k]) {
          detail::fail(fmt::format("candidates[{}]", k),
                       "token {} repeats candidates[{}]: RRS candidates are drawn without "
                       "replacement",
                       candidates[k], j);
        }
      }
    }
  }
  if (!raw_target.empty()) {
    check_probability_row<T>("raw_target", raw_target);
    detail::check_size("raw_target", raw_target.size(), target.size());
  }
  if (!raw_draft.empty()) {
    check_probability_row<T>("raw_draft", raw_draft);
    detail::check_size("raw_draft", raw_draft.size(), target.size());
  }
  const auto count = static_cast<std::int32_t>(candidates.size());
  detail::check_rule<T>(rule, target, draft, count);
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  const NodeRows<T> rows{target.data(), draft.data(), vocab,
                         raw_target.empty() ? nullptr : raw_target.data(),
                         raw_draft.empty() ? nullptr : raw_draft.data()};
  return detail::verify_node_unchecked(rule, rows, candidates.data(), count, uniforms,
                                       scratch.data());
}

}  // namespace specdec
