// SPDX-License-Identifier: MIT
// Recursive rejection sampling (RRS) for candidates drawn without replacement (seed 000 Alg. 1;
// docs/algorithms.md §1.3).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Verifies `count` distinct candidates drawn without replacement from the warped `draft` row, in
/// their drawing order. q_1 = draft, q_(k+1) = norm(q_k without x_k); p_1 = target,
/// p_(k+1) = norm([p_k - q_k]+). Candidate k is accepted iff u_k * q_k(x_k) < p_k(x_k).
/// All rejected: the correction is drawn from p_(count+1). Residuals are formed lazily (accepting
/// the first candidate reads two entries); q_k is never materialised (it is draft / (1 - removed
/// mass) off the removed tokens). Draws: draw k (k < count) tests candidate k; draw `count` the
/// correction. `scratch` holds `vocab` floats.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict recursive_row(const T* target, const T* draft, std::int64_t vocab,
                                              const Token* candidates, std::int32_t count,
                                              const U& uniforms, float* scratch) {
  bool materialised = false;  // scratch holds p_k * mass once true
  double mass = 1.0;          // scale of scratch
  double remaining = 1.0;     // draft mass not yet removed: q_k = draft / remaining off removed
  for (std::int32_t k = 0; k < count; ++k) {
    const Token x = candidates[k];
    const float px = materialised ? scratch[x] : to_float(target[x]);
    const float qx = to_float(draft[x]);
    // u * q_k(x) < p_k(x)  <=>  u * draft(x) * mass < scratch(x) * remaining (no division).
    if (uniforms.uniform(static_cast<std::uint32_t>(k)) * qx * static_cast<float>(mass) <
        px * static_cast<float>(remaining)) {
      return {k, x};
    }
    // [p_k - q_k]+ scaled by mass: [scratch - (mass / remaining) * draft]+ off the removed tokens.
    const float scale = static_cast<float>(mass / remaining);
    double next;
    if (!materialised) {
      next = residual_update(target, draft, scale, vocab, scratch, kResidualFloor);
      if (next < 0.0) next = copy_row(target, vocab, scratch);
      materialised = true;
    } else {
      next = residual_update(scratch, draft, scale, vocab, scratch, kResidualFloor * mass);
      if (next < 0.0) next = mass;
    }
    // Removed tokens have no target-side mass left (their q_k is 0 from now on; a rejected
    // candidate had p_k < q_k, so this only clears rounding residue).
    for (std::int32_t j = 0; j <= k; ++j) {
      next -= scratch[candidates[j]];
      scratch[candidates[j]] = 0.0f;
    }
    if (!(next > 0.0)) {  // nothing left off the removed tokens: fall back to the target row
      next = copy_row(target, vocab, scratch);
    }
    mass = next;
    remaining -= qx;
    if (remaining < 1e-30) remaining = 1e-30;
  }
  const float u = uniforms.uniform(static_cast<std::uint32_t>(count));
  return {-1, materialised ? sample_row(scratch, vocab, u) : sample_row(target, vocab, u)};
}

}  // namespace detail

/// RRS on warped rows. Candidates must be distinct and have positive draft probability (they are
/// samples without replacement; a node may have fewer candidates than planned when the draft has
/// fewer non-zero tokens). Throws specdec::Error naming the bad argument.
template <class T = float, UniformSource U>
NodeVerdict verify_recursive(std::type_identity_t<std::span<const T>> target,
                             std::type_identity_t<std::span<const T>> draft,
                             std::span<const Token> candidates, const U& uniforms, Workspace& ws) {
  detail::check_node_inputs<T>(target, draft, candidates);
  detail::check_count("candidates", candidates.size(), 1, target.size());
  for (std::size_t k = 1; k < candidates.size(); ++k) {
    for (std::size_t j = 0; j < k; ++j) {
      if (candidates[j] == candidates[k]) {
        detail::fail(
            fmt::format("candidates[{}]", k),
            "token {} repeats candidates[{}]: RRS candidates are drawn without replacement",
            candidates[k], j);
      }
    }
  }
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  return detail::recursive_row(
      target.data(), draft.data(), static_cast<std::int64_t>(target.size()), candidates.data(),
      static_cast<std::int32_t>(candidates.size()), uniforms, scratch.data());
}

}  // namespace specdec
