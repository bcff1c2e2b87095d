// SPDX-License-Identifier: MIT
// Gumbel-top-k: k samples without replacement from one row, in sampling order, in O(V).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec {

/// What a row handed to Gumbel-top-k holds.
enum class RowKind {
  kLogWeights,     // log-probabilities or logits (any additive shift); -inf = never drawn
  kProbabilities,  // probabilities (any positive scale); 0 = never drawn
};

namespace detail {

/// The log-weight of entry `x` of a row of kind `kind` (-inf for a zero probability).
template <RowKind kind, class T>
SPECDEC_HOST_DEVICE float log_weight(T x) {
  const float v = to_float(x);
  if constexpr (kind == RowKind::kProbabilities) {
    return v > 0.0f ? logf(v) : kNegInf;
  } else {
    return v;
  }
}

/// Row kernel: perturbed[i] = log_weight(row[i]) + Gumbel(draw first_draw + i) for every entry
/// with a finite log-weight, and writes those entries' ids to `index`. Returns how many there
/// are. Draws: exactly one uniform per finite entry, draw index first_draw + token id (entries
/// with weight zero consume no randomness but keep their draw index reserved).
template <RowKind kind, class T, class Source>
SPECDEC_HOST_DEVICE std::int64_t perturb_row(const T* row, std::int64_t n, const Source& source,
                                             std::uint32_t first_draw, float* perturbed,
                                             std::int32_t* index) {
  std::int64_t m = 0;
  if constexpr (std::is_same_v<Source, RandomStream>) {
    // One Philox block per four draws; Gumbels for banned entries are computed and ignored.
    fill_gumbels(source, first_draw, perturbed, n);
    for (std::int64_t i = 0; i < n; ++i) {
      const float w = log_weight<kind>(row[i]);
      if (w > kNegInf) {
        perturbed[i] += w;
        index[m++] = static_cast<std::int32_t>(i);
      }
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      const float w = log_weight<kind>(row[i]);
      if (w > kNegInf) {
        perturbed[i] = w + uniform_to_gumbel(static_cast<float>(
                               source.uniform(first_draw + static_cast<std::uint32_t>(i))));
        index[m++] = static_cast<std::int32_t>(i);
      }
    }
  }
  return m;
}

/// Host kernel: moves the `k` largest perturbed values among `index[0..m)` to the front of
/// `index`, sorted decreasing (ties to the lower token id). Partial selection then a sort of k
/// entries: O(m + k log k). Returns min(k, m).
inline std::int64_t select_top_k(const float* perturbed, std::int32_t* index, std::int64_t m,
                                 std::int64_t k) {
  const auto kk = std::min(k, m);
  if (kk <= 0) return 0;
  const auto greater = [perturbed](std::int32_t a, std::int32_t b) {
    return perturbed[a] > perturbed[b] || (perturbed[a] == perturbed[b] && a < b);
  };
  if (kk < m) std::nth_element(index, index + (kk - 1), index + m, greater);
  std::sort(index, index + kk, greater);
  return kk;
}

/// Gumbel-top-k over one row without validation: writes up to k tokens (sampling order) and
/// their perturbed values (log-weight + Gumbel, decreasing) and returns how many.
/// `perturbed` and `index` are scratch of n entries each.
template <RowKind kind, class T, class Source>
std::int64_t gumbel_top_k_row(const T* row, std::int64_t n, std::int64_t k, const Source& source,
                              std::uint32_t first_draw, float* perturbed, std::int32_t* index,
                              Token* tokens, float* values) {
  const auto m = perturb_row<kind>(row, n, source, first_draw, perturbed, index);
  const auto kk = select_top_k(perturbed, index, m, k);
  for (std::int64_t j = 0; j < kk; ++j) {
    tokens[j] = static_cast<Token>(index[j]);
    if (values != nullptr) values[j] = perturbed[index[j]];
  }
  return kk;
}

inline void check_sample_count(std::string_view name, std::int64_t k, std::int64_t vocab) {
  if (k < 1 || k > vocab) {
    fail(name, "{} must be in [1, {}] (the vocabulary size)", k, vocab);
  }
}

}  // namespace detail

/// Scratch bytes Gumbel-top-k needs for one row of `vocab` entries.
inline std::size_t gumbel_top_k_workspace_size(std::int64_t vocab) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(vocab, 0));
  return Workspace::round_up(n * sizeof(float)) + Workspace::round_up(n * sizeof(std::int32_t));
}

/// Draws up to `k` tokens without replacement from the distribution proportional to
/// exp(log_weights) (a raw or warped row of log-probabilities or logits; -inf = banned) and writes
/// them to `tokens` in sampling order: the first is a sample from the row, the second a sample
/// from the row without the first, and so on (Gumbel-top-k). Returns how many were drawn:
/// min(k, number of entries > -inf). If `values` is non-empty it receives the perturbed values
/// log_weight + Gumbel, decreasing. Draws: uniform `first_draw + x` perturbs token x.
/// Throws specdec::Error if k is outside [1, V], a span is too short or the row is invalid.
template <class T = float, UniformSource Source>
std::int64_t gumbel_top_k(std::type_identity_t<std::span<const T>> log_weights, std::int64_t k,
                          const Source& source, std::span<Token> tokens, Workspace& workspace,
                          std::span<float> values = {}, std::uint32_t first_draw = 0) {
  check_logits_row<T>("log_weights", log_weights);
  const auto n = static_cast<std::int64_t>(log_weights.size());
  detail::check_sample_count("k", k, n);
  if (static_cast<std::int64_t>(tokens.size()) < k) {
    detail::fail("tokens", "has {} elements, needs k = {}", tokens.size(), k);
  }
  if (!values.empty() && static_cast<std::int64_t>(values.size()) < k) {
    detail::fail("values", "has {} elements, needs k = {} (or none)", values.size(), k);
  }
  auto scope = workspace.scope();
  auto perturbed = workspace.take<float>(static_cast<std::size_t>(n));
  auto index = workspace.take<std::int32_t>(static_cast<std::size_t>(n));
  return detail::gumbel_top_k_row<RowKind::kLogWeights>(
      log_weights.data(), n, k, source, first_draw, perturbed.data(), index.data(), tokens.data(),
      values.empty() ? nullptr : values.data());
}

/// As gumbel_top_k, from a (raw or warped) probability row: tokens with probability 0 are never
/// drawn. The row must be a probability distribution (sum 1 within kProbabilitySumTolerance).
template <class T = float, UniformSource Source>
std::int64_t gumbel_top_k_probabilities(std::type_identity_t<std::span<const T>> probabilities,
                                        std::int64_t k, const Source& source,
                                        std::span<Token> tokens, Workspace& workspace,
                                        std::span<float> values = {},
                                        std::uint32_t first_draw = 0) {
  check_probability_row<T>("probabilities", probabilities);
  const auto n = static_cast<std::int64_t>(probabilities.size());
  detail::check_sample_count("k", k, n);
  if (static_cast<std::int64_t>(tokens.size()) < k) {
    detail::fail("tokens", "has {} elements, needs k = {}", tokens.size(), k);
  }
  if (!values.empty() && static_cast<std::int64_t>(values.size()) < k) {
    detail::fail("values", "has {} elements, needs k = {} (or none)", values.size(), k);
  }
  auto scope = workspace.scope();
  auto perturbed = workspace.take<float>(static_cast<std::size_t>(n));
  auto index = workspace.take<std::int32_t>(static_cast<std::size_t>(n));
  return detail::gumbel_top_k_row<RowKind::kProbabilities>(
      probabilities.data(), n, k, source, first_draw, perturbed.data(), index.data(), tokens.data(),
      values.empty() ? nullptr : values.data());
}

}  // namespace specdec
