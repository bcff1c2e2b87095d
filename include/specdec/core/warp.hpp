// SPDX-License-Identifier: MIT
// Warps: the map from a raw row to the distribution actually sampled. Applied identically to the
// draft and the target row before any lossless verification (docs/algorithms.md, Notation).
//
// Order: temperature, then top-k, then top-p (on the top-k-renormalised distribution), then min-p.
// temperature == 0 is greedy: one-hot on the argmax, ties to the lowest token id.
// Top-k keeps exactly k tokens (ties broken towards the lowest id); top-p keeps the smallest set,
// taken in decreasing probability (ties to the lowest id), whose mass reaches P. Neither sorts the
// vocabulary: one histogram pass over the float bits finds the bucket holding the cut, and only
// that bucket is ordered.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "specdec/core/error.hpp"
#include "specdec/core/exponential.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/order_key.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/warp_rows.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec {

struct Warp {
  float temperature = 1.0f;  // 0 = greedy
  std::int32_t top_k = 0;    // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off

  bool is_greedy() const { return temperature == 0.0f; }
  bool is_identity() const {
    return temperature == 1.0f && top_k == 0 && top_p >= 1.0f && min_p <= 0.0f;
  }

  /// Throws specdec::Error naming the first bad field.
  void validate(std::int64_t vocab) const {
    if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
      detail::fail("temperature", "{} must be finite and >= 0", temperature);
    }
    if (top_k < 0 || top_k > vocab) {
      detail::fail("top_k", "{} is outside [0, vocab = {}]", top_k, vocab);
    }
    if (!(top_p > 0.0f && top_p <= 1.0f)) detail::fail("top_p", "{} is outside (0, 1]", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f)) detail::fail("min_p", "{} is outside [0, 1]", min_p);
  }
};

namespace detail {

/// The softmax sum's tiles and lanes (core/warp_stats.hpp, the reduction rule).
inline constexpr std::int64_t kSumTile = 1024;
inline constexpr int kSumLanes = 16;

/// Entries of room after each scratch array of a warp: vectorised compactions write past the
/// count they return.
inline constexpr std::int64_t kScratchSlack = 16;

/// 32-bit words of a warp's scratch for a row of `vocab`: candidate ids, a bucket list and the
/// candidates' values (each with slack), then the tiles of the sum (three words each).
inline std::size_t warp_scratch_words(std::int64_t vocab) {
  const std::int64_t n = std::max<std::int64_t>(vocab, 0);
  return static_cast<std::size_t>(3 * (n + kScratchSlack) + 3 * ((n + kSumTile - 1) / kSumTile));
}

}  // namespace detail

/// Bytes of workspace a warp of a row of `vocab` entries needs.
inline std::size_t warp_workspace_size(std::int64_t vocab) {
  return Workspace::round_up(detail::warp_scratch_words(vocab) * sizeof(std::int32_t));
}

namespace detail {

// Selection by a radix histogram on the float bits: one counting pass finds the bucket that holds
// the cut, and only that bucket is ordered exactly. Ties break towards the lowest token id.
inline constexpr int kRadixBuckets = 4096;  // the top 12 bits of the order-preserving key

inline int radix_bucket(float x) { return static_cast<int>(order_key(x) >> 20); }

/// Keeps the `k` largest entries of z (ties to the lowest index), sets the rest to `fill`.
inline void keep_top_k(float* z, std::int64_t n, std::int64_t k, float fill, std::int32_t* idx) {
  if (k <= 0 || k >= n) return;
  std::int64_t counts[kRadixBuckets] = {};
  for (std::int64_t i = 0; i < n; ++i) ++counts[radix_bucket(z[i])];
  int boundary = kRadixBuckets - 1;
  std::int64_t above = 0;  // entries in buckets strictly above the boundary
  while (above + counts[boundary] < k) above += counts[boundary--];
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (radix_bucket(z[i]) == boundary) idx[m++] = static_cast<std::int32_t>(i);
  }
  const auto better = [z](std::int32_t a, std::int32_t b) {
    return z[a] > z[b] || (z[a] == z[b] && a < b);
  };
  const std::int64_t need = k - above;  // 1 <= need <= m
  std::nth_element(idx, idx + (need - 1), idx + m, better);
  const std::int32_t last = idx[need - 1];
  const float v = z[last];
  for (std::int64_t i = 0; i < n; ++i) {
    if (z[i] < v || (z[i] == v && i > last)) z[i] = fill;
  }
}

/// Rows up to this length skip the radix histogram (whose fixed cost is 4096 buckets).
inline constexpr std::int64_t kSmallRow = 64;

/// keep_top_p for short rows: orders the positive entries directly (ties to the lowest id).
inline void keep_top_p_small(float* p, std::int64_t n, float top_p, std::int32_t* idx) {
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (p[i] > 0.0f) idx[m++] = static_cast<std::int32_t>(i);
  }
  if (m == 0) return;
  std::sort(idx, idx + m,
            [p](std::int32_t a, std::int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  double running = 0.0;
  std::int64_t cut = m - 1;  // rounding left the mass short: keep everything
  for (std::int64_t i = 0; i < m; ++i) {
    running += p[idx[i]];
    if (running >= static_cast<double>(top_p)) {
      cut = i;
      break;
    }
  }
  for (std::int64_t i = cut + 1; i < m; ++i) p[idx[i]] = 0.0f;
  double kept = 0.0;  // in double: a float sum of a long row falls short of 1 after the division
  for (std::int64_t i = 0; i < n; ++i) kept += p[i];
  const auto inv = static_cast<float>(1.0 / kept);
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

/// p is a probability row; zeroes everything outside the nucleus of mass `top_p` and renormalises.
inline void keep_top_p(float* p, std::int64_t n, float top_p, std::int32_t* idx) {
  if (n <= kSmallRow) return keep_top_p_small(p, n, top_p, idx);
  double mass[kRadixBuckets] = {};
  for (std::int64_t i = 0; i < n; ++i) mass[radix_bucket(p[i])] += p[i];
  int boundary = kRadixBuckets - 1;
  double above = 0.0;  // mass strictly above the boundary bucket
  while (boundary > 0 && above + mass[boundary] < static_cast<double>(top_p)) {
    above += mass[boundary--];
  }
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (p[i] > 0.0f && radix_bucket(p[i]) == boundary) idx[m++] = static_cast<std::int32_t>(i);
  }
  if (m == 0) return;  // rounding left the mass short: keep everything
  // Within the boundary bucket, grow a sorted prefix geometrically until it reaches the mass.
  const auto better = [p](std::int32_t a, std::int32_t b) {
    return p[a] > p[b] || (p[a] == p[b] && a < b);
  };
  double running = above;
  std::int64_t lo = 0, cut = -1, chunk = 64;
  while (lo < m && cut < 0) {
    const std::int64_t hi = std::min(m, lo + chunk);
    if (hi < m) std::nth_element(idx + lo, idx + hi, idx + m, better);
    std::sort(idx + lo, idx + hi, better);
    for (std::int64_t i = lo; i < hi && cut < 0; ++i) {
      running += p[idx[i]];
      if (running >= static_cast<double>(top_p)) cut = i;
    }
    lo = hi;
    chunk *= 2;
  }
  if (cut < 0) cut = m - 1;
  const std::int32_t last = idx[cut];
  const float v = p[last];
  double kept = 0.0;  // in double: a float sum of a long row falls short of 1 after the division
  for (std::int64_t i = 0; i < n; ++i) {
    if (p[i] < v || (p[i] == v && i > last)) {
      p[i] = 0.0f;
    } else {
      kept += p[i];
    }
  }
  const auto inv = static_cast<float>(1.0 / kept);
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

inline void keep_min_p(float* p, std::int64_t n, float min_p) {
  const float threshold = min_p_threshold(min_p, row_max(p, n));
  float kept = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    p[i] = min_p_cut(p[i], threshold);
    kept += p[i];
  }
  const float inv = 1.0f / kept;
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

/// Scales a row of non-negative entries to sum to one (its sum by blocked_sum).
inline void normalize_row(float* p, std::int64_t n) {
  const auto inv = static_cast<float>(1.0 / blocked_sum([=](std::int64_t i) { return p[i]; }, 0, n));
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

inline void one_hot(float* out, std::int64_t n, std::int64_t hot) {
  std::fill(out, out + n, 0.0f);
  out[hot] = 1.0f;
}

/// The warp without validation. `out` holds logits (already divided by the temperature) on entry
/// and the warped probabilities on exit. `idx` has room for n indices.
inline void warp_scaled_logits_in_place(const Warp& w, float* out, std::int64_t n,
                                        std::int32_t* idx) {
  if (w.top_k > 0) keep_top_k(out, n, w.top_k, kNegInf, idx);
  const float m = row_max(out, n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = exp_flush(out[i] - m);
  normalize_row(out, n);
  if (w.top_p < 1.0f) keep_top_p(out, n, w.top_p, idx);
  if (w.min_p > 0.0f) keep_min_p(out, n, w.min_p);
}

/// The warp of a row of logits without validation; `idx` has room for warp_workspace_size bytes.
/// Defined in warp_stats.hpp: the row is written from its statistics.
template <class T>
void warp_logits_unchecked(const Warp& w, std::span<const T> logits, std::span<float> out,
                           std::int32_t* idx);
template <class T>
bool warp_logits_if_valid(const Warp& w, std::span<const T> logits, std::span<float> out,
                          std::int32_t* idx);

template <class T>
void warp_probabilities_unchecked(const Warp& w, std::span<const T> probs, std::span<float> out,
                                  std::int32_t* idx) {
  const auto n = static_cast<std::int64_t>(probs.size());
  if (w.is_greedy()) return one_hot(out.data(), n, row_argmax(probs.data(), n));
  float* o = out.data();
  const T* p = probs.data();
  if (w.temperature == 1.0f && w.top_k == 0) {
    // Already a distribution: skip the log/exp round trip (and keep exact values).
    for (std::int64_t i = 0; i < n; ++i) o[i] = to_float(p[i]);
    normalize_row(o, n);
    if (w.top_p < 1.0f) keep_top_p(o, n, w.top_p, idx);
    if (w.min_p > 0.0f) keep_min_p(o, n, w.min_p);
    return;
  }
  const float inv_t = 1.0f / w.temperature;
  for (std::int64_t i = 0; i < n; ++i) o[i] = packet_log(to_float(p[i])) * inv_t;
  warp_scaled_logits_in_place(w, out.data(), n, idx);
}

}  // namespace detail

namespace detail {

/// `warps` holds one shared warp or one per `unit` (`count` of them), each valid for `vocab`;
/// a bad field is reported as "warps[i].<field>".
inline void check_warp_list(std::span<const Warp> warps, std::int64_t count, std::int64_t vocab,
                            std::string_view unit) {
  if (warps.size() != 1 && warps.size() != static_cast<std::size_t>(count)) {
    fail("warps", "has {} entries, expected 1 (shared) or {} (one per {})", warps.size(), count,
         unit);
  }
  for (std::size_t i = 0; i < warps.size(); ++i) {
    try {
      warps[i].validate(vocab);
    } catch (const Error& e) {
      throw Error(fmt::format("warps[{}].{}", i, e.argument()), e.problem());
    }
  }
}

}  // namespace detail

/// warped = S(softmax(logits)). `logits` may be float, Eigen::half or Eigen::bfloat16
/// (include <Eigen/Core> for those).
/// Throws specdec::Error for an invalid warp, invalid logits or mismatched sizes.
template <class T = float>
void warp_logits(const Warp& w, std::type_identity_t<std::span<const T>> logits,
                 std::span<float> warped, Workspace& ws) {
  if (logits.empty()) detail::fail("logits", "the row is empty");
  detail::check_size("warped", warped.size(), logits.size());
  w.validate(static_cast<std::int64_t>(logits.size()));
  auto scope = ws.scope();
  const auto n = static_cast<std::int64_t>(logits.size());
  auto idx = ws.take<std::int32_t>(warp_workspace_size(n) / sizeof(std::int32_t));
  // The logits are checked by the statistics' first pass; a bad row is then named in full.
  if (!detail::warp_logits_if_valid(w, logits, warped, idx.data())) {
    check_logits_row<T>("logits", logits);
  }
}

/// warped = S(probabilities); the row must be a valid distribution.
template <class T = float>
void warp_probabilities(const Warp& w, std::type_identity_t<std::span<const T>> probabilities,
                        std::span<float> warped, Workspace& ws) {
  check_probability_row<T>("probabilities", probabilities);
  detail::check_size("warped", warped.size(), probabilities.size());
  w.validate(static_cast<std::int64_t>(probabilities.size()));
  auto scope = ws.scope();
  auto idx = ws.take<std::int32_t>(probabilities.size());
  detail::warp_probabilities_unchecked(w, probabilities, warped, idx.data());
}

}  // namespace specdec

#include "specdec/core/warp_stats.hpp"
