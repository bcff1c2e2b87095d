// SPDX-License-Identifier: MIT
// Warps: the map from a raw row to the distribution actually sampled. Applied identically to the
// draft and the target row before any lossless verification (docs/algorithms.md, Notation).
//
// Order: temperature, then top-k, then top-p (on the top-k-renormalised distribution), then min-p.
// temperature == 0 is greedy: one-hot on the argmax, ties to the lowest token id.
// Top-k keeps exactly k tokens (ties broken towards the lowest id); top-p keeps the smallest set,
// taken in decreasing probability (ties to the lowest id), whose mass reaches P. Each has one
// selection (core/top_k.hpp, core/top_p.hpp), which sorts no vocabulary, used by both entries
// here: warp_logits through the row's statistics (core/warp/logit_stats.hpp), warp_probabilities
// on the row itself (core/warp/probability_rows.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/core/error.hpp"
#include "specdec/core/warp/logit_stats.hpp"
#include "specdec/core/warp/probability_rows.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/warp/params.hpp"
#include "specdec/core/warp/scratch.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec {

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
  const auto n = static_cast<std::int64_t>(probabilities.size());
  auto idx = ws.take<std::int32_t>(warp_workspace_size(n) / sizeof(std::int32_t));
  detail::warp_probabilities_unchecked(w, probabilities, warped, idx.data());
}

}  // namespace specdec
