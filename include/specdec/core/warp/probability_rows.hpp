// SPDX-License-Identifier: MIT
// The warp of a probability row (warp_probabilities): the row is rewritten step by step in the
// order of core/warp.hpp, each cut by the warp's one selection (core/top_k.hpp, core/top_p.hpp).
#pragma once

#include <cstdint>
#include <span>

#include "specdec/core/blocked_sum.hpp"
#include "specdec/core/exponential.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/packet_log.hpp"
#include "specdec/core/top_k.hpp"
#include "specdec/core/top_p.hpp"
#include "specdec/core/warp/params.hpp"
#include "specdec/core/warp/cut_rules.hpp"
#include "specdec/core/warp/scratch.hpp"
#include "specdec/core/warp/row_writer.hpp"

namespace specdec::detail {

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
  const auto inv =
      static_cast<float>(1.0 / blocked_sum([=](std::int64_t i) { return p[i]; }, 0, n));
  for (std::int64_t i = 0; i < n; ++i) p[i] *= inv;
}

/// The warp without validation. `out` holds logits (already divided by the temperature) on entry
/// and the warped probabilities on exit; `idx` holds warp_workspace_size(n) bytes.
inline void warp_scaled_logits_in_place(const Warp& w, float* out, std::int64_t n,
                                        std::int32_t* idx) {
  const WarpScratch scratch = warp_scratch(idx, n);
  if (w.top_k > 0) keep_top_k(out, n, w.top_k, kNegInf, scratch.ids, scratch.values);
  const float m = row_max(out, n);
  for (std::int64_t i = 0; i < n; ++i) out[i] = exp_flush(out[i] - m);
  normalize_row(out, n);
  if (w.top_p < 1.0f) keep_top_p(out, n, w.top_p, scratch.bucket, scratch.work_values);
  if (w.min_p > 0.0f) keep_min_p(out, n, w.min_p);
}

/// warp_probabilities without validation; `idx` holds warp_workspace_size(n) bytes.
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
    const WarpScratch scratch = warp_scratch(idx, n);
    if (w.top_p < 1.0f) keep_top_p(o, n, w.top_p, scratch.bucket, scratch.work_values);
    if (w.min_p > 0.0f) keep_min_p(o, n, w.min_p);
    return;
  }
  const float inv_t = 1.0f / w.temperature;
  for (std::int64_t i = 0; i < n; ++i) o[i] = packet_log(to_float(p[i])) * inv_t;
  warp_scaled_logits_in_place(w, out.data(), n, idx);
}

}  // namespace specdec::detail
