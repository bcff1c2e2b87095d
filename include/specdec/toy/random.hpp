// SPDX-License-Identifier: MIT
// A small sequential generator on top of Philox for building toy distributions and models. It is
// reproducible on every platform (unlike std::gamma_distribution, whose algorithm is unspecified).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"

namespace specdec::toy {

class ToyRandom {
 public:
  explicit ToyRandom(std::uint64_t seed, std::uint32_t stream = 0)
      : stream_{seed, stream, 0, 0, Domain::kUser} {}

  /// Uniform strictly inside (0, 1).
  float uniform() { return stream_.uniform(next_++); }
  double uniform_double() {
    const std::uint64_t hi = stream_.bits(next_++) >> 5;  // 27 bits
    const std::uint64_t lo = stream_.bits(next_++) >> 6;  // 26 bits
    return (static_cast<double>((hi << 26) | lo) + 0.5) * 0x1p-53;
  }
  /// Standard normal (Box-Muller).
  double normal() {
    const double u1 = uniform_double(), u2 = uniform_double();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Gamma(shape, 1) by Marsaglia-Tsang, with the shape < 1 boost.
  double gamma(double shape) {
    if (shape < 1.0) return gamma(shape + 1.0) * std::pow(uniform_double(), 1.0 / shape);
    const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1.0 + c * x;
      } while (v <= 0.0);
      v = v * v * v;
      const double u = uniform_double();
      if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
    }
  }
  /// A token in [0, n).
  std::int32_t below(std::int32_t n) { return static_cast<std::int32_t>(uniform_double() * n); }

 private:
  RandomStream stream_;
  std::uint32_t next_ = 0;
};

/// A Dirichlet(concentration, ..., concentration) sample of size `vocab`, floored at 1e-30 so
/// every token keeps a (tiny) positive probability, renormalised.
inline std::vector<float> dirichlet(std::int64_t vocab, double concentration, ToyRandom& rng) {
  if (vocab <= 0) detail::fail("vocab", "{} must be > 0", vocab);
  if (!(concentration > 0.0)) detail::fail("concentration", "{} must be > 0", concentration);
  std::vector<double> g(static_cast<std::size_t>(vocab));
  double sum = 0.0;
  for (auto& x : g) sum += (x = rng.gamma(concentration));
  std::vector<float> p(g.size());
  double total = 0.0;
  for (std::size_t i = 0; i < g.size(); ++i) total += (p[i] = static_cast<float>(g[i] / sum));
  for (auto& x : p) x = static_cast<float>(x / total);
  return p;
}

}  // namespace specdec::toy
