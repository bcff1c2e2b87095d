// SPDX-License-Identifier: MIT
// Standard speculative rejection sampling, one candidate (docs/algorithms.md §1.1).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Accepts `candidate` (drawn from the warped `draft`) iff u_0 * draft(x) < target(x); otherwise
/// draws the correction from norm([target - draft]+) (target itself if that has no mass).
/// Draws: draw 0 the test, draw 1 the correction (read only on rejection). The residual is only
/// formed on rejection. `scratch` holds `vocab` floats.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict rejection_row(const T* target, const T* draft, std::int64_t vocab,
                                              Token candidate, const U& uniforms, float* scratch) {
  return residual_walk<ResidualRule::kMultiRound>(HostRows{}, target, draft, vocab, &candidate, 1,
                                                  uniforms, scratch);
}

}  // namespace detail

/// Standard rejection sampling on warped rows. Throws specdec::Error naming the bad argument.
template <class T = float, UniformSource U>
NodeVerdict verify_rejection(std::type_identity_t<std::span<const T>> target,
                             std::type_identity_t<std::span<const T>> draft, Token candidate,
                             const U& uniforms, Workspace& ws) {
  const Token c[1] = {candidate};
  detail::check_node_inputs<T>(target, draft, std::span<const Token>(c, 1), true, "candidate");
  return detail::host_residual_walk<detail::ResidualRule::kMultiRound, T>(target, draft, c,
                                                                          uniforms, ws);
}

}  // namespace specdec
