// SPDX-License-Identifier: MIT
// The README demo: compares the implemented methods on toy distributions and prints a table.
#include <cmath>
#include <cstdio>
#include <vector>

#include "specdec/specdec.hpp"
#include "specdec/toy/toy.hpp"

int main() {
  std::printf(
      "Toy draft/target pairs (V = 64, target ~ Dirichlet(1); draft = target mixed with\n"
      "Dirichlet noise). Standard rejection accepts with probability 1 - TV; a chain of\n"
      "L = 4 drafts then yields (1 - a^5) / (1 - a) tokens per target call.\n\n");
  std::printf("%-8s %10s %12s %16s\n", "noise", "TV", "accept", "tokens/call L=4");
  for (const float noise : {0.0f, 0.1f, 0.3f, 0.5f, 0.8f}) {
    const auto pair = specdec::toy::make_categorical_pair(64, 2024, 1.0, 1.0f, noise);
    const double a = 1.0 - pair.tv();
    const double tokens = a >= 1.0 ? 5.0 : (1.0 - std::pow(a, 5)) / (1.0 - a);
    std::printf("%-8.2f %10.4f %12.4f %16.3f\n", noise, pair.tv(), a, tokens);
  }
  return 0;
}
