// SPDX-License-Identifier: MIT
// Quality versus cost of speculative cascades (every deferral rule) and lossy speculative
// sampling over alpha (seed 004 Figures 2 and 4), on toy models whose 'data' law is known.
//
// Usage: cascade_sweep [--csv PATH] [--sequences N] [--tokens M] [--cost-ratio R]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "specdec/decode/decoder.hpp"
#include "specdec/specdec.hpp"
#include "specdec/toy/toy.hpp"
#include "toy_sweep_cli.hpp"

namespace {

using namespace specdec;

using toy_sweep::Settings;

// The data law and the two models that imitate it: a large one close to the data and a small
// one further away, erring differently (independent noise), as a large and a small model do.
struct World {
  toy::NGramModel data;
  toy::NGramModel large;
  toy::NGramModel small;
};

struct Point {
  std::string method;
  std::string rule;
  float alpha = 0.0f;
  double quality = 0.0;          // mean log-likelihood per generated token under the data law
  double deferral_rate = 0.0;    // mean mass routed to the large model per generated position
  double calls_per_token = 0.0;  // large-model calls per generated token
  double latency = 0.0;  // (large calls + r * small calls) / tokens: relative to the large model
  double eta = 0.0;
};

// Probability that the cascade rule hands position `context` to the large model (the deferral
// of the raw rows; for token-level rules, the small model's mass on tokens it defers).
double deferral_mass(Deferral rule, float alpha, std::span<const float> large,
                     std::span<const float> small) {
  const auto v = static_cast<std::int64_t>(large.size());
  std::vector<float> pi(large.size());
  // pi = (1 - d) * small + d * large for the sequence rules; the token rules mix per token. The
  // deferred mass is read off pi's component along the large row: for one-hot-free rows the
  // simplest exact route is the rule itself, so compute it directly.
  cascade_target<float>(large, small, large, small, rule, alpha, pi);
  if (rule == Deferral::kTokenV1 || rule == Deferral::kTokenV2 || rule == Deferral::kTokenV3) {
    const float max_large = *std::max_element(large.begin(), large.end());
    double eta = 0.0;
    for (std::int64_t x = 0; x < v; ++x) {
      const auto i = static_cast<std::size_t>(x);
      const bool r = rule == Deferral::kTokenV1   ? small[i] < max_large - alpha
                     : rule == Deferral::kTokenV2 ? large[i] < max_large - alpha
                                                  : large[i] < (1.0f - alpha) * max_large;
      if (r) eta += small[i];
    }
    return eta;
  }
  // Sequence-level rules defer all or nothing: pi equals the large row exactly when deferring.
  double gap = 0.0;
  for (std::int64_t x = 0; x < v; ++x) {
    gap += std::abs(pi[static_cast<std::size_t>(x)] - large[static_cast<std::size_t>(x)]);
  }
  return gap == 0.0 ? 1.0 : 0.0;
}

Point run(const World& world, DecodeOptions options, const Settings& s, std::string method,
          std::string rule, float alpha, bool swap_target = false) {
  options.max_new_tokens = s.tokens;
  options.seed = 404;
  std::vector<std::vector<Token>> prompts;
  for (int i = 0; i < s.sequences; ++i) {
    prompts.push_back({static_cast<Token>(i % 5), static_cast<Token>((7 * i + 2) % 13)});
  }
  const auto results = decode_batch(
      [&](std::size_t) { return toy::NGramProvider(swap_target ? world.small : world.large); },
      [&](std::size_t) { return toy::NGramProvider(world.small); }, prompts, options);
  Point p{std::move(method), std::move(rule), alpha};
  DecodeMetrics total;
  const auto v = static_cast<std::size_t>(world.data.vocab_size());
  std::vector<float> data_row(v), large_row(v), small_row(v);
  double log_likelihood = 0.0, deferred = 0.0;
  std::int64_t count = 0;
  for (std::size_t i = 0; i < results.size(); ++i) {
    total.merge(results[i].metrics);
    std::vector<Token> context = prompts[i];
    for (const Token t : results[i].tokens) {
      world.data.next_probabilities(context, data_row);
      log_likelihood += std::log(std::max(data_row[static_cast<std::size_t>(t)], 1e-30f));
      if (options.method == Method::kCascade) {
        world.large.next_probabilities(context, large_row);
        world.small.next_probabilities(context, small_row);
        deferred +=
            deferral_mass(options.cascade.deferral, options.cascade.alpha, large_row, small_row);
      }
      context.push_back(t);
      ++count;
    }
  }
  p.quality = log_likelihood / static_cast<double>(count);
  p.deferral_rate = options.method == Method::kCascade ? deferred / static_cast<double>(count)
                    : options.method == Method::kAutoregressive ? (swap_target ? 0.0 : 1.0)
                                                                : -1.0;
  const double tokens = static_cast<double>(total.tokens_generated);
  const double large_calls = swap_target ? 0.0 : static_cast<double>(total.target_calls);
  const double small_calls = swap_target ? static_cast<double>(total.target_calls)
                                         : static_cast<double>(total.draft_calls);
  p.calls_per_token = large_calls / tokens;
  p.latency = (large_calls + s.cost_ratio * small_calls) / tokens;
  p.eta = total.block_efficiency();
  return p;
}

void print(const Point& p) {
  char deferral[16];
  if (p.deferral_rate < 0.0) {
    std::snprintf(deferral, sizeof deferral, "%s", "-");
  } else {
    std::snprintf(deferral, sizeof deferral, "%.3f", p.deferral_rate);
  }
  std::printf("%-14s %-9s %6.2f %10.4f %9s %11.3f %9.3f %7.3f\n", p.method.c_str(), p.rule.c_str(),
              p.alpha, p.quality, deferral, p.calls_per_token, p.latency, p.eta);
}

}  // namespace

int main(int argc, char** argv) {
  Settings settings;
  const auto no_other_option = [](const char*, const char*) { return false; };
  if (!toy_sweep::parse_args(argc, argv, settings, no_other_option)) return 2;
  const toy::NGramModel data({.vocab = 32, .order = 2, .concentration = 0.3, .seed = 404});
  const World world{data, toy::NGramModel::draft_of(data, 0.25f, 1.0f, 0x1a76e),
                    toy::NGramModel::draft_of(data, 0.55f, 1.3f, 0x5a11)};

  std::printf(
      "Quality vs cost on toy models with a known data law (V = 32, order-2 n-gram).\n"
      "Large model = data mixed with 25%% noise; small = data at T = 1.3 mixed with 55%% other\n"
      "noise. %d sequences x %d tokens per point, T = 1, block size 5, r = %.3g.\n"
      "quality = mean log-likelihood of the generated tokens under the data law (higher is\n"
      "better); deferral = share of positions routed to the large model; latency = (large calls\n"
      "+ r * small calls) per token, relative to running the large model alone. Quality\n"
      "differences below about 0.1 are sampling noise at this size (raise --sequences).\n\n",
      settings.sequences, settings.tokens, settings.cost_ratio);
  std::printf("%-14s %-9s %6s %10s %9s %11s %9s %7s\n", "method", "rule", "alpha", "quality",
              "deferral", "large/token", "latency", "eta");

  std::vector<Point> points;
  const auto add = [&](Point p) {
    print(p);
    points.push_back(std::move(p));
  };
  DecodeOptions ar;
  ar.method = Method::kAutoregressive;
  add(run(world, ar, settings, "small alone", "-", 0.0f, true));
  add(run(world, ar, settings, "large alone", "-", 0.0f));
  DecodeOptions sd;
  sd.method = Method::kSd;
  sd.depth = 5;
  add(run(world, sd, settings, "SD (lossless)", "-", 0.0f));

  struct Sweep {
    Deferral rule;
    std::vector<float> alphas;
  };
  const std::vector<Sweep> sweeps = {
      {Deferral::kChow, {0.0f, 0.3f, 0.5f, 0.7f, 0.9f}},
      {Deferral::kDiff, {-0.2f, 0.0f, 0.1f, 0.2f, 0.4f}},
      {Deferral::kOpt, {0.0f, 0.5f, 1.0f, 2.0f, 4.0f}},
      {Deferral::kTokenV1, {-0.2f, 0.0f, 0.1f, 0.3f, 0.6f}},
      {Deferral::kTokenV3, {0.0f, 0.3f, 0.6f, 0.9f, 1.0f}},
  };
  for (const auto& sweep : sweeps) {
    for (const float alpha : sweep.alphas) {
      DecodeOptions o;
      o.method = Method::kCascade;
      o.depth = 5;
      o.cascade = {sweep.rule, alpha};
      add(run(world, o, settings, "spec cascade", std::string(deferral_name(sweep.rule)), alpha));
    }
  }
  for (const float alpha : {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 0.95f}) {
    DecodeOptions o;
    o.method = Method::kLossy;
    o.depth = 5;
    o.lossy = {alpha, 1.0f, true};
    add(run(world, o, settings, "lossy (tuned)", "-", alpha));
  }

  const auto write_point = [](std::FILE* f, const Point& p) {
    std::fprintf(f, "%s,%s,%.3f,%.5f,%.5f,%.5f,%.5f,%.5f\n", p.method.c_str(), p.rule.c_str(),
                 p.alpha, p.quality, p.deferral_rate, p.calls_per_token, p.latency, p.eta);
  };
  if (!settings.csv.empty() &&
      !toy_sweep::write_csv(
          settings.csv, "method,rule,alpha,quality,deferral_rate,large_calls_per_token,latency,eta",
          points, write_point)) {
    return 1;
  }
  return 0;
}
