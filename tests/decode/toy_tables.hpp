// SPDX-License-Identifier: MIT
// The V = 4 order-1 Markov tables the decoding tests share, and the exact sequence distributions
// they imply.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
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

/// Row `v` of `table` mapped through `warp` the way the decoder maps provider rows (the toy
/// providers return log-probabilities as logits).
inline std::vector<float> warped_row(const std::vector<std::vector<float>>& table, Token v,
                                     const Warp& warp) {
  const auto& row = table[static_cast<std::size_t>(v)];
  std::vector<float> logits(row.size()), out(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) {
    logits[i] = row[i] > 0.0f ? std::log(row[i]) : -std::numeric_limits<float>::infinity();
  }
  Workspace ws;
  warp_logits(warp, logits, out, ws);
  return out;
}

/// The exact distribution of the first three tokens after `last` under the warped target:
/// index t1 * V^2 + t2 * V + t3.
inline std::vector<double> target_sequence_distribution(Token last, const Warp& warp) {
  const auto table = target_table();
  const auto v = table.size();
  std::vector<double> out(v * v * v, 0.0);
  const auto r0 = warped_row(table, last, warp);
  for (std::size_t a = 0; a < v; ++a) {
    const auto r1 = warped_row(table, static_cast<Token>(a), warp);
    for (std::size_t b = 0; b < v; ++b) {
      const auto r2 = warped_row(table, static_cast<Token>(b), warp);
      for (std::size_t c = 0; c < v; ++c) {
        out[(a * v + b) * v + c] = static_cast<double>(r0[a]) * r1[b] * r2[c];
      }
    }
  }
  return out;
}

}  // namespace specdec::test
