// SPDX-License-Identifier: MIT
// Multi-round rejection sampling for i.i.d. candidates (SpecInfer; docs/algorithms.md §1.2).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {

/// Multi-round rejection sampling of i.i.d. candidates drawn from the warped `draft` row: the
/// multi-round residual walk (detail::residual_walk<ResidualRule::kMultiRound> with HostRows).
/// Draws: draw k (k = 0..count-1) tests candidate k; draw `count` draws the correction.
/// `target` and `draft` are warped probability rows (the same warp); every candidate must have
/// positive draft probability. Throws specdec::Error naming the bad argument.
template <class T = float, UniformSource U>
NodeVerdict verify_multi_round(std::type_identity_t<std::span<const T>> target,
                               std::type_identity_t<std::span<const T>> draft,
                               std::span<const Token> candidates, const U& uniforms,
                               Workspace& ws) {
  detail::check_node_inputs<T>(target, draft, candidates);
  detail::check_count("candidates", candidates.size(), 1, 1u << 20);
  return detail::host_residual_walk<detail::ResidualRule::kMultiRound, T>(target, draft, candidates,
                                                                          uniforms, ws);
}

}  // namespace specdec
