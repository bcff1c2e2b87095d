// SPDX-License-Identifier: MIT
// The V = 4 order-1 Markov tables the decoding tests share, and the exact sequence distributions
// they imply.
#pragma once

#include <vector>

#include "specdec/toy/providers.hpp"

namespace specdec::test {

inline std::vector<std::vector<float>> target_table() {
  return {{0.40f, 0.30f, 0.20f, 0.10f},
          {0.10f, 0.50f, 0.25f, 0.15f},
          {0.25f, 0.25f, 0.05f, 0.45f},
          {0.30f, 0.10f, 0.35f, 0.25f}};
}
inline std::vector<std::vector<float>> draft_table() {
  return {{0.25f, 0.25f, 0.25f, 0.25f},
          {0.30f, 0.30f, 0.10f, 0.30f},
          {0.10f, 0.40f, 0.30f, 0.20f},
          {0.50f, 0.05f, 0.25f, 0.20f}};
}
inline toy::MarkovProvider markov_target() {
  return toy::MarkovProvider(toy::MarkovModel::from_rows(target_table()));
}
inline toy::MarkovProvider markov_draft() {
  return toy::MarkovProvider(toy::MarkovModel::from_rows(draft_table()));
}

}  // namespace specdec::test
