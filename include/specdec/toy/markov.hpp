// SPDX-License-Identifier: MIT
// Toy autoregressive models that answer for any context, so they can score whole draft trees.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/toy/random.hpp"

namespace specdec::toy {

/// A toy language model: the next-token distribution after any context.
template <class M>
concept ToyModel = requires(const M& m, std::span<const Token> context, std::span<float> out) {
  { m.vocab_size() } -> std::convertible_to<std::int64_t>;
  m.next_probabilities(context, out);
};

/// Order-1 Markov model given by an explicit V x V table: row v is the distribution after token v.
class MarkovModel {
 public:
  /// `transition` holds V*V floats, row-major. Each row must be a probability distribution.
  MarkovModel(std::int64_t vocab, std::vector<float> transition)
      : vocab_(vocab), table_(std::move(transition)) {
    if (vocab <= 0) detail::fail("vocab", "{} must be > 0", vocab);
    specdec::detail::check_size(
        "transition", table_.size(),
        specdec::detail::checked_mul<std::size_t>("vocab", static_cast<std::size_t>(vocab),
                                                     static_cast<std::size_t>(vocab)));
    for (std::int64_t v = 0; v < vocab; ++v) {
      check_probability_row(ArgName("transition", v), row(static_cast<Token>(v)));
    }
  }

  /// Builds the model from V rows of V probabilities.
  static MarkovModel from_rows(const std::vector<std::vector<float>>& rows) {
    const auto vocab = static_cast<std::int64_t>(rows.size());
    std::vector<float> flat;
    for (std::size_t v = 0; v < rows.size(); ++v) {
      specdec::detail::check_size(fmt::format("transition[{}]", v), rows[v].size(), rows.size());
      flat.insert(flat.end(), rows[v].begin(), rows[v].end());
    }
    return MarkovModel(vocab, std::move(flat));
  }

  std::int64_t vocab_size() const { return vocab_; }

  std::span<const float> row(Token previous) const {
    return {table_.data() + static_cast<std::size_t>(previous) * vocab_,
            static_cast<std::size_t>(vocab_)};
  }

  /// The distribution after `context` (its last token; the context must not be empty).
  void next_probabilities(std::span<const Token> context, std::span<float> out) const {
    if (context.empty()) detail::fail("context", "a Markov model needs at least one token");
    specdec::detail::check_token("context.back()", context.back(), vocab_);
    specdec::detail::check_size("out", out.size(), static_cast<std::size_t>(vocab_));
    const auto r = row(context.back());
    std::copy(r.begin(), r.end(), out.begin());
  }

 private:
  std::int64_t vocab_;
  std::vector<float> table_;
};

/// A seeded random order-k (n-gram) model. The row after a context is Dirichlet(concentration),
/// seeded by the last `order` tokens, so any context gets an answer without storing V^k rows.
/// A draft model built by `draft_of` sees the same rows at a temperature, mixed with noise rows
/// from an independent model: `noise` and `temperature` set how far it diverges.
class NGramModel {
 public:
  struct Config {
    std::int64_t vocab = 16;
    int order = 2;
    double concentration = 0.5;  // < 1: peaked rows, like real language models
    std::uint64_t seed = 1;
  };

  explicit NGramModel(const Config& c) : config_(c) {
    if (c.vocab <= 0) detail::fail("vocab", "{} must be > 0", c.vocab);
    if (c.order < 1) detail::fail("order", "{} must be >= 1", c.order);
    if (!(c.concentration > 0.0)) detail::fail("concentration", "{} must be > 0", c.concentration);
  }

  /// A draft model for `target`: row = (1 - noise) * target_row^(1/temperature) (renormalised)
  /// + noise * an independent model's row.
  static NGramModel draft_of(const NGramModel& target, float noise, float temperature = 1.0f,
                             std::uint64_t noise_seed = 0x5eed) {
    specdec::detail::check_in_closed("noise", noise, 0.0f, 1.0f);
    specdec::detail::check_positive("temperature", temperature);
    NGramModel draft(target.config_);
    draft.noise_ = noise;
    draft.temperature_ = temperature;
    draft.noise_seed_ = noise_seed;
    return draft;
  }

  std::int64_t vocab_size() const { return config_.vocab; }
  int order() const { return config_.order; }

  void next_probabilities(std::span<const Token> context, std::span<float> out) const {
    specdec::detail::check_size("out", out.size(), static_cast<std::size_t>(config_.vocab));
    for (std::size_t i = 0; i < context.size(); ++i) {
      specdec::detail::check_token(ArgName("context", i), context[i], config_.vocab);
    }
    base_row(config_.seed, context, out);
    if (temperature_ == 1.0f && noise_ == 0.0f) return;
    std::vector<float> noise(out.size());
    if (noise_ > 0.0f) base_row(noise_seed_, context, noise);
    double sum = 0.0;
    for (auto& x : out) sum += (x = std::pow(x, 1.0f / temperature_));
    double total = 0.0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<float>((1.0f - noise_) * (out[i] / sum) + noise_ * noise[i]);
      total += out[i];
    }
    for (auto& x : out) x = static_cast<float>(x / total);
  }

 private:
  void base_row(std::uint64_t seed, std::span<const Token> context, std::span<float> out) const {
    // Mix the last `order` tokens (absent ones count as -1) into one 64-bit key (splitmix64).
    std::uint64_t h = seed ^ 0x9E3779B97F4A7C15ull;
    for (int j = 0; j < config_.order; ++j) {
      const auto k = static_cast<std::int64_t>(context.size()) - 1 - j;
      const std::int64_t t = k >= 0 ? context[static_cast<std::size_t>(k)] : -1;
      h ^= static_cast<std::uint64_t>(t + 2) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
      h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
      h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
      h ^= h >> 31;
    }
    ToyRandom rng(h);
    const auto row = dirichlet(config_.vocab, config_.concentration, rng);
    std::copy(row.begin(), row.end(), out.begin());
  }

  Config config_;
  float noise_ = 0.0f;
  float temperature_ = 1.0f;
  std::uint64_t noise_seed_ = 0;
};

}  // namespace specdec::toy
