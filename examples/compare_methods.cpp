// SPDX-License-Identifier: MIT
// The README demo: compares the verification rules on toy distributions and prints two tables.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "specdec/specdec.hpp"
#include "specdec/toy/toy.hpp"

int main() {
  using namespace specdec;
  std::printf(
      "Toy draft/target pairs (V = 64, target ~ Dirichlet(1); draft = target mixed with\n"
      "Dirichlet noise). Standard rejection accepts with probability 1 - TV; a chain of\n"
      "L = 4 drafts then yields (1 - a^5) / (1 - a) tokens per target call.\n\n");
  std::printf("%-8s %10s %12s %16s\n", "noise", "TV", "accept", "tokens/call L=4");
  for (const float noise : {0.0f, 0.1f, 0.3f, 0.5f, 0.8f}) {
    const auto pair = toy::make_categorical_pair(64, 2024, 1.0, 1.0f, noise);
    const double a = 1.0 - pair.tv();
    const double tokens = a >= 1.0 ? 5.0 : (1.0 - std::pow(a, 5)) / (1.0 - a);
    std::printf("%-8.2f %10.4f %12.4f %16.3f\n", noise, pair.tv(), a, tokens);
  }

  // Exact acceptance probability of each rule at one node (enumeration over candidate tuples),
  // on small pairs (V = 6) of growing divergence.
  struct Method {
    const char* name;
    Rule rule;
    std::int32_t candidates;
  };
  const std::vector<Method> methods = {
      {"rejection (K=1)", Rejection{}, 1},
      {"multi-round (K=2)", MultiRound{}, 2},
      {"multi-round (K=4)", MultiRound{}, 4},
      {"RRS (K=2)", Recursive{}, 2},
      {"RRS (K=4)", Recursive{}, 4},
      {"SpecTr auto (K=2)", SpecTr{}, 2},
      {"SpecTr auto (K=4)", SpecTr{}, 4},
      {"lossy alpha=0.3", Lossy{0.3f}, 1},
      {"lossy alpha=0.3 tuned", Lossy{0.3f, 1.0f, true}, 1},
      {"cascade OPT alpha=0.5", Cascade{Deferral::kOpt, 0.5f}, 1},
      {"cascade TokenV1 a=0.1", Cascade{Deferral::kTokenV1, 0.1f}, 1},
      {"cascade TokenV3 a=0.3", Cascade{Deferral::kTokenV3, 0.3f}, 1},
      {"typical (0.3, 0.09)", Typical{}, 1},
      {"greedy", Greedy{}, 1},
  };
  const std::vector<float> noises = {0.2f, 0.5f, 0.8f};
  std::printf("\nExact acceptance per rule (V = 6; lossless rules output the target exactly):\n");
  std::printf("%-24s", "rule \\ draft noise");
  for (float n : noises) std::printf(" %8.1f", n);
  std::printf("\n");
  for (const auto& m : methods) {
    std::printf("%-24s", m.name);
    for (const float noise : noises) {
      const auto pair = toy::make_categorical_pair(6, 7, 1.0, 1.2f, noise);
      std::vector<double> out(6);
      const double accept =
          exact_node_distribution(m.rule, pair.target, pair.draft, m.candidates, out);
      std::printf(" %8.4f", accept);
    }
    std::printf("\n");
  }
  return 0;
}
