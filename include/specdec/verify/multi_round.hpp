// SPDX-License-Identifier: MIT
// Multi-round rejection sampling for i.i.d. candidates (SpecInfer; docs/algorithms.md §1.2).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Verifies `count` candidates drawn i.i.d. from the warped `draft` row against the warped
/// `target` row. p_1 = target; candidate k is accepted iff u_k * draft(x_k) < p_k(x_k); otherwise
/// p_(k+1) = norm([p_k - draft]+). All rejected: the correction is drawn from p_(count+1).
/// The residual is formed lazily: accepting the first candidate reads two entries.
/// Draws: draw k (k = 0..count-1) is the test of candidate k; draw `count` the correction.
/// `scratch` holds `vocab` floats.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict multi_round_row(const T* target, const T* draft, std::int64_t vocab,
                                                const Token* candidates, std::int32_t count,
                                                const U& uniforms, float* scratch) {
  bool materialised = false;  // scratch holds p_k * mass once true
  double mass = 1.0;
  for (std::int32_t k = 0; k < count; ++k) {
    const Token x = candidates[k];
    const float px = materialised ? scratch[x] : to_float(target[x]);
    const float qx = to_float(draft[x]);
    if (uniforms.uniform(static_cast<std::uint32_t>(k)) * qx * static_cast<float>(mass) < px) {
      return {k, x};
    }
    double next;
    if (!materialised) {
      next = residual_update(target, draft, 1.0f, vocab, scratch, kResidualFloor);
      if (next < 0.0) next = copy_row(target, vocab, scratch);
      materialised = true;
    } else {
      next = residual_update(scratch, draft, static_cast<float>(mass), vocab, scratch,
                             kResidualFloor * mass);
      if (next < 0.0) next = mass;
    }
    mass = next;
  }
  const float u = uniforms.uniform(static_cast<std::uint32_t>(count));
  return {-1, materialised ? sample_row(scratch, vocab, u) : sample_row(target, vocab, u)};
}

}  // namespace detail

/// Multi-round rejection sampling of i.i.d. candidates (draws: see detail::multi_round_row).
/// `target` and `draft` are warped probability rows (the same warp); every candidate must have
/// positive draft probability. Throws specdec::Error naming the bad argument.
template <class T = float, UniformSource U>
NodeVerdict verify_multi_round(std::type_identity_t<std::span<const T>> target,
                               std::type_identity_t<std::span<const T>> draft,
                               std::span<const Token> candidates, const U& uniforms,
                               Workspace& ws) {
  detail::check_node_inputs<T>(target, draft, candidates);
  detail::check_count("candidates", candidates.size(), 1, 1u << 20);
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  return detail::multi_round_row(
      target.data(), draft.data(), static_cast<std::int64_t>(target.size()), candidates.data(),
      static_cast<std::int32_t>(candidates.size()), uniforms, scratch.data());
}

}  // namespace specdec
