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
/// the verifier falls back to the current target-side row (docs/algorithms.md §2.5).
inline constexpr double kResidualFloor = 1e-30;

/// Bytes of workspace one node verification over `vocab` tokens needs (one float row).
inline std::size_t verify_workspace_size(std::int64_t vocab) {
  return Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
}

namespace detail {

/// max(x, 0) without a libm call (fmaxf is an out-of-line call unless NaNs are ruled out).
SPECDEC_HOST_DEVICE float positive_part(float x) { return x > 0.0f ? x : 0.0f; }

/// sum of f(i) for i in [begin, end): fp32 partial sums in 8 independent lanes over blocks of
/// 1024 elements (vectorisable, no long serial dependency), blocks added in double.
template <class F>
SPECDEC_HOST_DEVICE double blocked_sum(const F& f, std::int64_t begin, std::int64_t end) {
  constexpr int kLanes = 8;
  constexpr std::int64_t kBlock = 1024;
  double total = 0.0;
  for (std::int64_t b = begin; b < end; b += kBlock) {
    const std::int64_t e = b + kBlock < end ? b + kBlock : end;
    float lanes[kLanes] = {};
    std::int64_t i = b;
    for (; i + kLanes <= e; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lanes[j] += f(i + j);
    }
    float block = 0.0f;
    const int tail = static_cast<int>(e - i);  // fewer than kLanes: a bound GCC can see
    for (int j = 0; j < tail; ++j) block += f(i + j);
    for (int j = 0; j < kLanes; ++j) block += lanes[j];
    total += block;
  }
  return total;
}

/// scratch = [source - scale * draft]+ when its mass is at least `floor_mass`; returns that mass,
/// or -1 (scratch untouched) when it is below. `source` may alias `scratch`. Two passes, so the
/// current row survives a fallback.
template <class S, class T>
SPECDEC_HOST_DEVICE double residual_update(const S* source, const T* draft, float scale,
                                           std::int64_t n, float* scratch, double floor_mass) {
  const auto positive = [=](std::int64_t i) {
    return positive_part(to_float(source[i]) - scale * to_float(draft[i]));
  };
  const double mass = blocked_sum(positive, 0, n);
  if (!(mass >= floor_mass) || mass <= 0.0) return -1.0;
  for (std::int64_t i = 0; i < n; ++i) {
    scratch[i] = positive_part(to_float(source[i]) - scale * to_float(draft[i]));
  }
  return mass;
}

/// scratch = source (as float); returns the sum.
template <class S>
SPECDEC_HOST_DEVICE double copy_row(const S* source, std::int64_t n, float* scratch) {
  for (std::int64_t i = 0; i < n; ++i) scratch[i] = to_float(source[i]);
  return blocked_sum([=](std::int64_t i) { return scratch[i]; }, 0, n);
}

/// One token from a non-negative row of any scale (inverse CDF with one uniform): the first index
/// whose running sum exceeds u * total. Whole blocks are skipped by their (vectorised) sums; the
/// block holding the threshold is scanned. Rounding that runs past the end returns the last
/// positive entry, so a zero entry is never returned.
template <class S>
SPECDEC_HOST_DEVICE Token sample_row(const S* row, std::int64_t n, float u) {
  constexpr std::int64_t kBlock = 1024;
  const auto value = [=](std::int64_t i) { return to_float(row[i]); };
  const double threshold = u * blocked_sum(value, 0, n);
  double running = 0.0;
  for (std::int64_t b = 0; b < n; b += kBlock) {
    const std::int64_t e = b + kBlock < n ? b + kBlock : n;
    const double block = blocked_sum(value, b, e);
    if (running + block <= threshold && e < n) {
      running += block;
      continue;
    }
    for (std::int64_t i = b; i < e; ++i) {
      const float v = value(i);
      if (v > 0.0f) {
        running += v;
        if (running > threshold) return static_cast<Token>(i);
      }
    }
  }
  for (std::int64_t i = n - 1; i > 0; --i) {
    if (value(i) > 0.0f) return static_cast<Token>(i);
  }
  return 0;
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
  detail::check_size("draft", draft.size(), target.size());
  const auto vocab = static_cast<std::int64_t>(target.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    // A lone candidate is reported under its own name ("candidate"), a list by index.
    const ArgName name = candidates_name == "candidate"
                             ? ArgName(candidates_name)
                             : ArgName(candidates_name, static_cast<std::int64_t>(k));
    detail::check_token(name, candidates[k], vocab);
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
