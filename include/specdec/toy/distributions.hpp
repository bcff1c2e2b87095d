// SPDX-License-Identifier: MIT
// Toy draft/target pairs with a controlled divergence, for tests, benchmarks and examples.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/numerics.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/toy/random.hpp"

namespace specdec::toy {

struct CategoricalPair {
  std::vector<float> target;
  std::vector<float> draft;
  /// TV(target, draft): standard rejection sampling accepts with probability 1 - tv.
  float tv() const { return tv_distance<float>(target, draft); }
};

/// normalise(row^(1/temperature)): the same distribution sharpened (T < 1) or flattened (T > 1).
inline std::vector<float> at_temperature(std::span<const float> row, float temperature) {
  check_probability_row("row", row);
  specdec::detail::check_positive("temperature", temperature);
  std::vector<float> out(row.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    out[i] = row[i] > 0.0f ? std::pow(row[i], 1.0f / temperature) : 0.0f;
    sum += out[i];
  }
  for (auto& x : out) x = static_cast<float>(x / sum);
  return out;
}

/// (1 - weight) * row + weight * noise, where noise is a Dirichlet(1) row.
inline std::vector<float> mixed_with_noise(std::span<const float> row, float weight,
                                           ToyRandom& rng) {
  check_probability_row("row", row);
  specdec::detail::check_in_closed("weight", weight, 0.0f, 1.0f);
  const auto noise = dirichlet(static_cast<std::int64_t>(row.size()), 1.0, rng);
  std::vector<float> out(row.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    out[i] = (1.0f - weight) * row[i] + weight * noise[i];
    sum += out[i];
  }
  for (auto& x : out) x = static_cast<float>(x / sum);
  return out;
}

/// Target ~ Dirichlet(concentration); draft = target at `draft_temperature`, mixed with
/// `noise_weight` of Dirichlet(1) noise. Larger noise or a temperature away from 1 means a larger
/// TV.
inline CategoricalPair make_categorical_pair(std::int64_t vocab, std::uint64_t seed,
                                             double concentration = 1.0,
                                             float draft_temperature = 1.0f,
                                             float noise_weight = 0.3f) {
  ToyRandom rng(seed);
  CategoricalPair pair;
  pair.target = dirichlet(vocab, concentration, rng);
  pair.draft = mixed_with_noise(at_temperature(pair.target, draft_temperature), noise_weight, rng);
  return pair;
}

/// Two-token pair: target = (1 - p_target, p_target), draft = (1 - p_draft, p_draft).
inline CategoricalPair bernoulli_pair(float p_target, float p_draft) {
  specdec::detail::check_in_closed("p_target", p_target, 0.0f, 1.0f);
  specdec::detail::check_in_closed("p_draft", p_draft, 0.0f, 1.0f);
  return {{1.0f - p_target, p_target}, {1.0f - p_draft, p_draft}};
}

}  // namespace specdec::toy
