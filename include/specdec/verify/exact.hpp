// SPDX-License-Identifier: MIT
// Exact output distributions at one node for small vocabularies: enumerate every candidate tuple
// (i.i.d., or without replacement for RRS) and follow each rule's acceptance probabilities in
// double precision. Also the distribution each rule claims to produce. Host only, for tests,
// tools and users checking a rule on their own rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "specdec/verify/rule.hpp"

namespace specdec {

/// Largest number of candidate tuples exact_node_distribution will enumerate.
inline constexpr double kMaxExactTuples = 4e6;

namespace detail {

inline std::vector<double> to_double(std::span<const float> row) {
  return std::vector<double>(row.begin(), row.end());
}
/// norm([a - scale * b]+), or nullopt when it has (almost) no mass.
inline bool positive_part_normalised(const std::vector<double>& a, const std::vector<double>& b,
                                     double scale, std::vector<double>& out) {
  double mass = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) mass += std::max(a[i] - scale * b[i], 0.0);
  if (!(mass >= kResidualFloor)) return false;
  out.resize(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) out[i] = std::max(a[i] - scale * b[i], 0.0) / mass;
  return true;
}
inline std::size_t argmax(const std::vector<double>& v) {
  return static_cast<std::size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

struct ExactRows {
  std::vector<double> target, draft, raw_target, pi;
  double gamma = 1.0, beta = 1.0;
};

inline ExactRows exact_rows(const Rule& rule, std::span<const float> target,
                            std::span<const float> draft, std::span<const float> raw_target,
                            std::span<const float> raw_draft, std::int32_t count) {
  ExactRows r{to_double(target),
              to_double(draft),
              to_double(raw_target.empty() ? target : raw_target),
              {},
              1.0,
              1.0};
  const auto n = static_cast<std::int64_t>(target.size());
  if (const auto* s = std::get_if<SpecTr>(&rule)) {
    r.gamma = s->gamma > 0.0 ? s->gamma : spectr_gamma_row(target.data(), draft.data(), n, count);
  } else if (const auto* l = std::get_if<Lossy>(&rule)) {
    r.beta =
        l->tune_beta ? lossy_tuned_beta_row(target.data(), draft.data(), n, l->alpha) : l->beta;
  } else if (const auto* c = std::get_if<Cascade>(&rule)) {
    std::vector<float> pi(target.size());
    cascade_pi_row(raw_target.empty() ? target.data() : raw_target.data(),
                   raw_draft.empty() ? draft.data() : raw_draft.data(), target.data(), draft.data(),
                   n, c->deferral, c->alpha, pi.data());
    r.pi.assign(pi.begin(), pi.end());
  }
  return r;
}

/// Adds weight * (output distribution given this candidate tuple) to `out`; returns the
/// probability (given the tuple) that a candidate was accepted.
inline double exact_outcome(const Rule& rule, const ExactRows& rows,
                            const std::vector<std::int32_t>& tuple, double weight,
                            std::vector<double>& out) {
  const auto& t = rows.target;
  const auto& d = rows.draft;
  double reach = 1.0;
  auto accept = [&](std::int32_t x, double a) {
    a = std::clamp(a, 0.0, 1.0);
    out[static_cast<std::size_t>(x)] += weight * reach * a;
    reach *= 1.0 - a;
  };
  auto finish = [&](const std::vector<double>& row) {
    for (std::size_t i = 0; i < row.size(); ++i) out[i] += weight * reach * row[i];
    return 1.0 - reach;
  };
  auto point = [&](std::size_t x) {
    out[x] += weight * reach;
    reach = 0.0;
  };
  if (std::holds_alternative<Rejection>(rule) || std::holds_alternative<MultiRound>(rule)) {
    std::vector<double> pk = t, next;
    for (auto x : tuple) {
      accept(x, pk[x] / d[x]);
      if (reach == 0.0) break;
      if (positive_part_normalised(pk, d, 1.0, next)) pk = next;
    }
    return finish(pk);
  }
  if (std::holds_alternative<Recursive>(rule)) {
    std::vector<double> pk = t, qk = d, next;
    for (auto x : tuple) {
      accept(x, pk[x] / qk[x]);
      if (reach == 0.0) break;
      if (positive_part_normalised(pk, qk, 1.0, next)) pk = next;
      double rest = 1.0 - qk[x];
      qk[x] = 0.0;
      for (auto& v : qk) v /= rest;
      pk[x] = 0.0;
      double m = 0.0;
      for (auto v : pk) m += v;
      if (m > 0.0) {
        for (auto& v : pk) v /= m;
      } else {
        pk = t;
      }
    }
    return finish(pk);
  }
  if (std::holds_alternative<SpecTr>(rule)) {
    const double g = rows.gamma;
    for (auto x : tuple) {
      accept(x, t[x] / (g * d[x]));
      if (reach == 0.0) break;
    }
    double beta = 0.0;
    for (std::size_t i = 0; i < t.size(); ++i) beta += std::min(d[i], t[i] / g);
    const double f = beta > 0.0 ? (1.0 - std::pow(1.0 - beta, tuple.size())) / beta : 0.0;
    std::vector<double> cap(t.size()), res;
    for (std::size_t i = 0; i < t.size(); ++i) cap[i] = std::min(d[i], t[i] / g);
    if (!positive_part_normalised(t, cap, f, res)) res = t;
    return finish(res);
  }
  if (const auto* l = std::get_if<Lossy>(&rule)) {
    const auto x = tuple[0];
    if (l->greedy) {
      const auto& raw = rows.raw_target;
      const std::size_t best = argmax(raw);
      const bool ok = raw[x] >= (1.0 - l->alpha) * raw[best];
      point(ok ? static_cast<std::size_t>(x) : best);
      return ok ? 1.0 : 0.0;
    }
    accept(x, t[x] / ((1.0 - l->alpha) * d[x]));
    std::vector<double> res;
    if (!positive_part_normalised(t, d, rows.beta, res)) res = t;
    return finish(res);
  }
  if (std::holds_alternative<Cascade>(rule)) {
    const auto x = tuple[0];
    accept(x, rows.pi[x] / d[x]);
    std::vector<double> res;
    if (!positive_part_normalised(rows.pi, d, 1.0, res)) res = rows.pi;
    return finish(res);
  }
  if (const auto* ty = std::get_if<Typical>(&rule)) {
    double h = 0.0;
    for (auto v : t) h -= v > 0.0 ? v * std::log(v) : 0.0;
    const double threshold =
        std::min<double>(ty->epsilon, static_cast<double>(ty->delta) * std::exp(-h));
    for (auto x : tuple) {
      // The row function compares in float: mirror it so ties resolve the same way.
      if (static_cast<float>(t[x]) > static_cast<float>(threshold)) {
        point(static_cast<std::size_t>(x));
        return 1.0;
      }
    }
    return finish(t);
  }
  const std::size_t best = argmax(t);  // Greedy
  point(best);
  for (auto x : tuple) {
    if (static_cast<std::size_t>(x) == best) return 1.0;
  }
  return 0.0;
}

inline void check_exact_inputs(const Rule& rule, std::span<const float> target,
                               std::span<const float> draft, std::span<const float> raw_target,
                               std::span<const float> raw_draft, std::int32_t count) {
  check_probability_row("target", target);
  check_probability_row("draft", draft);
  detail::check_size("draft", draft.size(), target.size());
  if (!raw_target.empty()) {
    check_probability_row("raw_target", raw_target);
    detail::check_size("raw_target", raw_target.size(), target.size());
  }
  if (!raw_draft.empty()) {
    check_probability_row("raw_draft", raw_draft);
    detail::check_size("raw_draft", raw_draft.size(), target.size());
  }
  const auto vocab = static_cast<std::int64_t>(target.size());
  // Recursive takes min(count, non-zero draft tokens) candidates, so any count >= 1 is fine.
  const std::int64_t most =
      draws_without_replacement(rule) ? std::int64_t{1} << 20 : max_candidates(rule, vocab);
  if (count < 1 || count > most) {
    detail::fail("count", "{} candidates is outside [1, {}] for this rule", count, most);
  }
  detail::check_rule<float>(rule, target, draft,
                            static_cast<std::int32_t>(std::min<std::int64_t>(count, vocab)));
}

}  // namespace detail

/// The exact output distribution (into `out`, V values) of `rule` at one node when `count`
/// candidates are drawn from the warped `draft` (i.i.d.; without replacement for Recursive, which
/// then takes min(count, non-zero draft tokens) candidates), and the exact probability that a
/// candidate is accepted (the return value). Enumerates every candidate tuple: V^count must stay
/// below kMaxExactTuples. Throws specdec::Error naming the bad argument.
inline double exact_node_distribution(const Rule& rule, std::span<const float> target,
                                      std::span<const float> draft, std::int32_t count,
                                      std::span<double> out, std::span<const float> raw_target = {},
                                      std::span<const float> raw_draft = {}) {
  detail::check_exact_inputs(rule, target, draft, raw_target, raw_draft, count);
  detail::check_size("out", out.size(), target.size());
  const auto vocab = static_cast<std::int64_t>(target.size());
  if (std::pow(static_cast<double>(vocab), count) > kMaxExactTuples) {
    detail::fail("count", "{} candidates over {} tokens is too many tuples to enumerate", count,
                 vocab);
  }
  const auto rows = detail::exact_rows(rule, target, draft, raw_target, raw_draft, count);
  const bool distinct = draws_without_replacement(rule);
  std::int32_t length = count;
  if (distinct) {
    std::int32_t support = 0;
    for (auto v : rows.draft) support += v > 0.0 ? 1 : 0;
    length = std::min(length, support);
  }
  std::vector<double> acc(target.size(), 0.0);
  std::vector<std::int32_t> tuple(static_cast<std::size_t>(length), 0);
  double accept = 0.0;
  // Depth-first over tuples with positive probability.
  auto walk = [&](auto&& self, std::int32_t depth, double weight, double removed) -> void {
    if (depth == length) {
      accept += weight * detail::exact_outcome(rule, rows, tuple, weight, acc);
      return;
    }
    for (std::int32_t x = 0; x < vocab; ++x) {
      const double q = rows.draft[static_cast<std::size_t>(x)];
      if (!(q > 0.0)) continue;
      if (distinct && std::find(tuple.begin(), tuple.begin() + depth, x) != tuple.begin() + depth)
        continue;
      tuple[static_cast<std::size_t>(depth)] = x;
      self(self, depth + 1, weight * (distinct ? q / (1.0 - removed) : q),
           distinct ? removed + q : removed);
    }
  };
  walk(walk, 0, 1.0, 0.0);
  std::copy(acc.begin(), acc.end(), out.begin());
  return accept;
}

/// The distribution `rule` claims to produce (into `out`): the warped target for lossless rules;
/// pi for lossy sampling (min(draft, target / (1 - alpha)) + P_rej * norm([target / beta -
/// draft]+)) and cascades; one-hot argmax target for greedy matching; the mixture of accept /
/// argmax outcomes for lossy greedy. Returns false (and leaves `out` alone) for typical
/// acceptance, which claims nothing.
inline bool claimed_distribution(const Rule& rule, std::span<const float> target,
                                 std::span<const float> draft, std::int32_t count,
                                 std::span<double> out, std::span<const float> raw_target = {},
                                 std::span<const float> raw_draft = {}) {
  detail::check_exact_inputs(rule, target, draft, raw_target, raw_draft, count);
  detail::check_size("out", out.size(), target.size());
  if (std::holds_alternative<Typical>(rule)) return false;
  const auto rows = detail::exact_rows(rule, target, draft, raw_target, raw_draft, count);
  const auto& t = rows.target;
  const auto& d = rows.draft;
  std::fill(out.begin(), out.end(), 0.0);
  if (is_lossless(rule)) {
    std::copy(t.begin(), t.end(), out.begin());
  } else if (std::holds_alternative<Greedy>(rule)) {
    out[detail::argmax(t)] = 1.0;
  } else if (std::holds_alternative<Cascade>(rule)) {
    std::copy(rows.pi.begin(), rows.pi.end(), out.begin());
  } else {
    const auto& l = std::get<Lossy>(rule);
    if (l.greedy) {
      const std::size_t best = detail::argmax(rows.raw_target);
      for (std::size_t x = 0; x < d.size(); ++x) {
        out[rows.raw_target[x] >= (1.0 - l.alpha) * rows.raw_target[best] ? x : best] += d[x];
      }
    } else {
      double rejected = 0.0;
      for (std::size_t x = 0; x < t.size(); ++x) {
        out[x] = std::min(d[x], t[x] / (1.0 - l.alpha));
        rejected += d[x] - out[x];
      }
      std::vector<double> res;
      if (!detail::positive_part_normalised(t, d, rows.beta, res)) res = t;
      for (std::size_t x = 0; x < t.size(); ++x) out[x] += rejected * res[x];
    }
  }
  return true;
}

}  // namespace specdec
