// SPDX-License-Identifier: MIT
// Scalar row functions of drafting shared by the host and the CUDA backend: the perturbed values
// of Gumbel-top-k and their ranking, the truncated Gumbel of stochastic beam search and the
// ranking of beam candidates. Plain SPECDEC_HOST_DEVICE code (no Eigen, no fmt), compiled for the
// host and by nvcc.
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/log_space.hpp"
#include "specdec/core/packet_log.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

/// What a row handed to Gumbel-top-k holds.
enum class RowKind {
  kLogWeights,     // log-probabilities or logits (any additive shift); -inf = never drawn
  kProbabilities,  // probabilities (any positive scale); 0 = never drawn
};

namespace detail {

/// Gumbel-top-k's perturbed value of one entry: its log-weight + uniform_to_gumbel(u), the log of
/// a probability taken by packet_log: what the host's perturb_row_host computes, entry for entry.
/// -inf for a banned entry (probability 0 or log-weight -inf); a NaN never ranks (the CPU rejects
/// such rows).
template <RowKind kind>
SPECDEC_HOST_DEVICE float gumbel_perturbed(float x, float u) {
  if constexpr (kind == RowKind::kProbabilities) {
    return packet_log(x) + uniform_to_gumbel(u);
  } else {
    return x + uniform_to_gumbel(u);
  }
}

/// Gumbel-top-k's order: token a (perturbed value va) ranks before token b (value vb) when its
/// value is larger, ties going to the lower token id.
SPECDEC_HOST_DEVICE bool ranks_before(float va, std::int32_t a, float vb, std::int32_t b) {
  return va > vb || (va == vb && a < b);
}

/// One candidate extension (parent, token) of a beam level.
struct BeamCandidate {
  double score;    // the ranking value (psi' for RSD-S)
  float log_prob;  // path log probability of the extension
  std::int32_t parent;
  Token token;
  std::int32_t pad;  // the tail padding as a field set to 0: a copy never moves unwritten bytes
};

/// The order of beam candidates: score decreasing, ties to the lower parent index, then the lower
/// token.
SPECDEC_HOST_DEVICE bool beam_ranks_before(const BeamCandidate& a, const BeamCandidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.parent != b.parent) return a.parent < b.parent;
  return a.token < b.token;
}

}  // namespace detail

/// The perturbed value `g` of a child conditioned on its siblings' maximum being `bound` (the
/// parent's truncated value) instead of `z` (their actual maximum, z >= g):
/// -log(exp(-bound) - exp(-z) + exp(-g)), computed stably (Kool et al. App. B.3):
/// v = bound - g + log1mexp(g - z), result = bound - max(v, 0) - log1p(exp(-|v|)).
/// The child with g == z gets exactly `bound`; every result is <= bound and increasing in g.
SPECDEC_HOST_DEVICE double truncated_gumbel(double bound, double g, double z) {
  const double a = g - z < 0.0 ? g - z : 0.0;
  const double v = bound - g + log1mexp(a);
  return bound - (v > 0.0 ? v : 0.0) - log1p(exp(-fabs(v)));
}

namespace detail {

/// The candidate extension of beam `parent` (path log probability phi, truncated perturbed value
/// psi) by its child `token` of draft probability `probability` and Gumbel-top-k value `value`,
/// the beam's best child having `best_value`: score truncated_gumbel(psi, phi + value,
/// phi + best_value), path log probability phi + log(probability), in double.
SPECDEC_HOST_DEVICE BeamCandidate beam_candidate(double phi, double psi, float best_value,
                                                 float value, float probability,
                                                 std::int32_t parent, Token token) {
  return {truncated_gumbel(psi, phi + value, phi + best_value),
          static_cast<float>(phi + log(static_cast<double>(probability))), parent, token, 0};
}

}  // namespace detail

}  // namespace specdec
