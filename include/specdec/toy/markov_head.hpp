// SPDX-License-Identifier: MIT
// A ReDrafter head built by hand so that its draft rows are an explicit Markov table: a drafter
// as close to (or as far from) a toy target as wanted, for tests and examples.
#pragma once

#include <cmath>
#include <cstdint>

#include "specdec/core/error.hpp"
#include "specdec/draft/redrafter.hpp"
#include "specdec/toy/markov.hpp"

namespace specdec::toy {

/// A head (no input projection, no residual blocks, RNN state, top_k = 0) whose row after token t
/// is `draft.row(t)` (to float precision), whatever the target's hidden state: the state after t
/// is SiLU(10) on coordinate t and 0 elsewhere, and the vocabulary projection reads
/// log draft(. | t) off that coordinate. `hidden` is the target's hidden size (>= V); the hidden
/// state is ignored. Table entries must be > 0 (a 0 becomes log 1e-30). Throws specdec::Error
/// ("hidden") when hidden < V.
inline ReDrafterHead markov_head(const MarkovModel& draft, std::int64_t hidden) {
  const auto v = draft.vocab_size();
  if (hidden < v) detail::fail("hidden", "{} must be >= the vocabulary size {}", hidden, v);
  constexpr float kGain = 10.0f;
  const float silu = kGain / (1.0f + std::exp(-kGain));
  ReDrafterHead head;
  head.config = {.hidden = hidden,
                 .exit_dim = 2 * hidden,
                 .vocab = v,
                 .num_layers = 0,
                 .rnn = true,
                 .top_k = 0};
  head.embedding = Eigen::MatrixXf::Zero(v, hidden);
  for (std::int64_t t = 0; t < v; ++t) head.embedding(t, t) = 1.0f;
  head.rnn_w = Eigen::MatrixXf::Identity(hidden, hidden) * kGain;
  head.rnn_u = Eigen::MatrixXf::Zero(hidden, hidden);
  head.rnn_u_bias = Eigen::VectorXf::Zero(hidden);
  head.vocab_proj = Eigen::MatrixXf::Zero(v, 2 * hidden);
  for (std::int64_t t = 0; t < v; ++t) {
    const auto row = draft.row(static_cast<Token>(t));
    for (std::int64_t y = 0; y < v; ++y) {
      const float p = row[static_cast<std::size_t>(y)];
      head.vocab_proj(y, hidden + t) = std::log(p > 1e-30f ? p : 1e-30f) / silu;
    }
  }
  head.validate();
  return head;
}

}  // namespace specdec::toy
