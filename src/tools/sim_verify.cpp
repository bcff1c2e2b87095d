// SPDX-License-Identifier: MIT
// specdec-sim verify: run one acceptance rule many times on the caller's distributions and report
// the output counts next to the distribution the rule claims and the exact one.
#include <cmath>
#include <string>
#include <vector>

#include "sim_common.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/unchecked.hpp"
#include "specdec/verify/verify.hpp"

namespace specdec::sim {
namespace {

constexpr std::int64_t kDefaultSamples = 10000;
constexpr std::int64_t kMaxSamples = 100000000;

/// The rule a request describes (parameters validated later against the rows).
Rule parse_rule(const Json& request, const std::string& method, float temperature) {
  if (method == "rejection") return Rejection{};
  if (method == "multi_round") return MultiRound{};
  if (method == "recursive") return Recursive{};
  if (method == "greedy") return Greedy{};
  if (method == "spectr") {
    const Json* g = find(request, "gamma");
    if (!g || (g->is_string() && g->get<std::string>() == "auto")) return SpecTr{0.0};
    if (!g->is_number()) throw UsageError("gamma", "must be a number or \"auto\"");
    const double gamma = g->get<double>();
    if (!(gamma >= 1.0))
      throw UsageError("gamma", fmt::format("{} must be >= 1 or \"auto\"", gamma));
    return SpecTr{gamma};
  }
  if (method == "lossy") {
    Lossy rule;
    rule.alpha = static_cast<float>(get_number(request, "alpha", 0.0));
    const Json* b = find(request, "beta");
    if (b && b->is_string()) {
      if (b->get<std::string>() != "tuned")
        throw UsageError("beta", "must be a number or \"tuned\"");
      rule.tune_beta = true;
    } else {
      rule.beta = static_cast<float>(get_number(request, "beta", 1.0));
    }
    rule.greedy = temperature == 0.0f;
    return rule;
  }
  if (method == "cascade") {
    return Cascade{parse_deferral(require_string(request, "rule")),
                   static_cast<float>(get_number(request, "alpha", 0.0))};
  }
  if (method == "typical") {
    return Typical{static_cast<float>(get_number(request, "epsilon", 0.3)),
                   static_cast<float>(get_number(request, "delta", 0.09))};
  }
  throw UsageError("method", "unknown method '" + method +
                                 "' (expected rejection, multi_round, recursive, spectr, lossy, "
                                 "cascade, typical or greedy)");
}

/// Candidates from the warped draft row: i.i.d., or without replacement (sequentially, each draw
/// from the renormalised rest). Draw k of `stream` gives candidate k.
void draw_candidates(const std::vector<float>& draft, std::int32_t count, bool distinct,
                     const RandomStream& stream, std::vector<float>& rest,
                     std::vector<Token>& out) {
  out.clear();
  rest = draft;
  for (std::int32_t k = 0; k < count; ++k) {
    float total = 0.0f;
    for (float v : rest) total += v;
    if (!(total > 0.0f)) break;
    const auto x = static_cast<Token>(
        sample_from_weights(rest, stream.uniform(static_cast<std::uint32_t>(k))));
    out.push_back(x);
    if (distinct) rest[static_cast<std::size_t>(x)] = 0.0f;
  }
}

Json nullable(bool present, const std::vector<double>& values) {
  return present ? Json(values) : Json(nullptr);
}

}  // namespace

Json run_verify(const Json& request, const Limits& limits) {
  check_known_fields(
      request, {"method", "target", "draft", "candidates", "temperature", "top_k", "top_p", "alpha",
                "beta", "gamma", "rule", "epsilon", "delta", "samples", "seed"});
  const std::string method = require_string(request, "method");
  const auto raw_target = require_row(request, "target");
  const auto raw_draft = require_row(request, "draft");
  check_probability_row("target", raw_target);
  check_probability_row("draft", raw_draft);
  check_length("draft", raw_draft.size(), raw_target.size());
  const auto vocab = static_cast<std::int64_t>(raw_target.size());

  Warp warp;
  warp.temperature = get_temperature(request);
  warp.top_k = static_cast<std::int32_t>(get_integer_in(request, "top_k", 0, 0, vocab));
  warp.top_p = static_cast<float>(get_number(request, "top_p", 1.0));
  warp.validate(vocab);
  const Rule rule = parse_rule(request, method, warp.temperature);

  const std::int64_t count = get_integer(request, "candidates", 1);
  const std::int64_t most = max_candidates(rule, vocab);
  if (count < 1 || (most == 1 && count != 1)) {
    throw UsageError("candidates", most == 1
                                       ? fmt::format("{}: method {} takes exactly 1", count, method)
                                       : fmt::format("{} must be >= 1", count));
  }
  if (count > 4096) throw UsageError("candidates", fmt::format("{} is above 4096", count));
  const std::int64_t samples = get_integer_in(request, "samples", kDefaultSamples, 0, kMaxSamples);
  const std::int64_t seed = get_integer(request, "seed", 0);

  Workspace ws;
  std::vector<float> target(raw_target.size()), draft(raw_draft.size());
  warp_probabilities<float>(warp, raw_target, target, ws);
  warp_probabilities<float>(warp, raw_draft, draft, ws);
  const bool distinct = draws_without_replacement(rule);
  std::int64_t support = 0;
  for (float v : draft) support += v > 0.0f ? 1 : 0;
  // Recursive draws without replacement: at most the number of non-zero draft tokens.
  const auto k = static_cast<std::int32_t>(distinct ? std::min(count, support) : count);

  // Validates the rule's parameters against the warped rows (gamma, alpha, beta, ...).
  check_rule_parameters<float>(rule, target, draft, k);
  if (limits.validate_only) return {};

  Json response;
  response["method"] = method;
  response["vocab"] = vocab;
  response["samples"] = samples;

  std::vector<double> claimed(raw_target.size());
  const bool has_claim =
      claimed_distribution(rule, target, draft, k, claimed, raw_target, raw_draft);
  std::vector<double> exact(raw_target.size());
  const bool enumerable = std::pow(static_cast<double>(vocab), k) <= kMaxExactTuples;
  double exact_accept = 0.0;
  if (enumerable) {
    exact_accept = exact_node_distribution(rule, target, draft, k, exact, raw_target, raw_draft);
  }

  // Resolve the automatic parameters once, outside the sampling loop.
  Rule resolved = rule;
  if (auto* s = std::get_if<SpecTr>(&resolved); s && s->gamma <= 0.0) {
    s->gamma = spectr_gamma<float>(target, draft, k);
  }
  if (auto* l = std::get_if<Lossy>(&resolved); l && l->tune_beta) {
    l->beta = static_cast<float>(lossy_tuned_beta<float>(target, draft, l->alpha));
    l->tune_beta = false;
  }

  std::vector<std::int64_t> counts(raw_target.size(), 0);
  Progress progress("verify", "samples", samples, limits.progress_seconds);
  std::int64_t accepted = 0;
  std::vector<float> rest;
  std::vector<Token> candidates;
  auto scratch = ws.take<float>(raw_target.size());
  const NodeRows<float> rows{target.data(), draft.data(), vocab, raw_target.data(),
                             raw_draft.data()};
  for (std::int64_t i = 0; i < samples; ++i) {
    const RandomStream stream{static_cast<std::uint64_t>(seed), 0, static_cast<std::uint32_t>(i), 0,
                              Domain::kDraft};
    draw_candidates(draft, k, distinct, stream, rest, candidates);
    const auto verdict = unchecked::verify_node(resolved, rows, candidates.data(),
                                                static_cast<std::int32_t>(candidates.size()),
                                                stream.in_domain(Domain::kVerify), scratch.data());
    ++counts[static_cast<std::size_t>(verdict.token)];
    accepted += verdict.accepted >= 0 ? 1 : 0;
    if ((i + 1) % 65536 == 0) progress.advance(65536);
  }
  response["counts"] = counts;
  response["accept_rate"] =
      samples > 0 ? static_cast<double>(accepted) / static_cast<double>(samples) : 0.0;
  response["expected"] = nullable(has_claim, claimed);
  response["exact"] = nullable(enumerable, exact);
  response["exact_accept_rate"] = enumerable ? Json(exact_accept) : Json(nullptr);
  if (const auto* s = std::get_if<SpecTr>(&resolved)) response["gamma"] = s->gamma;
  return response;
}

}  // namespace specdec::sim
