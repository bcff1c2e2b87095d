// SPDX-License-Identifier: MIT
// Shared pieces of the node verifiers: the verdict, input checks and the lazy residual update.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec {

/// The outcome of verifying an ordered list of candidates at one node.
struct NodeVerdict {
  std::int32_t accepted;  // index of the accepted candidate, or -1 when every one was rejected
  Token token;            // the accepted candidate, or the correction token
  friend bool operator==(const NodeVerdict&, const NodeVerdict&) = default;
};

/// A residual whose mass (relative to the row it came from) is below this is treated as empty:
/// the verifier falls back to the current target-side row (ALGORITHMS.md §2.5).
inline constexpr double kResidualFloor = 1e-30;

/// Bytes of workspace one node verification over `vocab` tokens needs (one float row).
inline std::size_t verify_workspace_size(std::int64_t vocab) {
  return Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
}

namespace detail {

/// scratch = [source - scale * draft]+ when its mass is at least `floor_mass`; returns that mass,
/// or -1 (scratch untouched) when it is below. `source` may alias `scratch`. Two passes, so the
/// current row survives a fallback.
template <class S, class T>
SPECDEC_HOST_DEVICE double residual_update(const S* source, const T* draft, float scale,
                                           std::int64_t n, float* scratch, double floor_mass) {
  double mass = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    mass += fmaxf(to_float(source[i]) - scale * to_float(draft[i]), 0.0f);
  }
  if (!(mass >= floor_mass) || mass <= 0.0) return -1.0;
  for (std::int64_t i = 0; i < n; ++i) {
    scratch[i] = fmaxf(to_float(source[i]) - scale * to_float(draft[i]), 0.0f);
  }
  return mass;
}

/// scratch = source (as float); returns the sum.
template <class S>
SPECDEC_HOST_DEVICE double copy_row(const S* source, std::int64_t n, float* scratch) {
  double mass = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    scratch[i] = to_float(source[i]);
    mass += scratch[i];
  }
  return mass;
}

/// One token from a non-negative row of any scale (inverse CDF with one uniform).
template <class S>
SPECDEC_HOST_DEVICE Token sample_row(const S* row, std::int64_t n, float u) {
  double total = 0.0;
  for (std::int64_t i = 0; i < n; ++i) total += to_float(row[i]);
  const double threshold = u * total;
  double running = 0.0;
  std::int64_t last_positive = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = to_float(row[i]);
    if (v > 0.0f) {
      running += v;
      last_positive = i;
      if (running > threshold) return static_cast<Token>(i);
    }
  }
  return static_cast<Token>(last_positive);
}

/// The checks shared by every host entry: two probability rows of equal size, candidates inside
/// the vocabulary, and (for rules that assume candidates were drawn from the draft) a positive
/// draft probability for each candidate.
template <class T>
void check_node_inputs(std::span<const T> target, std::span<const T> draft,
                       std::span<const Token> candidates, bool need_draft_support = true,
                       std::string_view candidates_name = "candidates") {
  check_probability_row<T>("target", target);
  check_probability_row<T>("draft", draft);
  check_size("draft", draft.size(), target.size());
  const auto vocab = static_cast<std::int64_t>(target.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    // A lone candidate is reported under its own name ("candidate"), a list by index.
    const auto name = candidates_name == "candidate" ? std::string(candidates_name)
                                                     : fmt::format("{}[{}]", candidates_name, k);
    check_token(name, candidates[k], vocab);
    if (need_draft_support &&
        !(static_cast<float>(draft[static_cast<std::size_t>(candidates[k])]) > 0.0f)) {
      detail::fail(name, "token {} has draft probability 0, so it cannot have been drawn",
                   candidates[k]);
    }
  }
}

inline void check_count(std::string_view name, std::size_t got, std::size_t lo, std::size_t hi) {
  if (got < lo || got > hi) {
    if (lo == hi) detail::fail(name, "has {} candidates, this rule takes exactly {}", got, lo);
    detail::fail(name, "has {} candidates, this rule takes {} to {}", got, lo, hi);
  }
}

}  // namespace detail
}  // namespace specdec
