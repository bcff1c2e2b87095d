// SPDX-License-Identifier: MIT
// Multi-round rejection sampling for i.i.d. candidates (SpecInfer; docs/algorithms.md §1.2).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Multi-round rejection sampling of `count` candidates drawn i.i.d. from the warped `draft` row:
/// the multi-round residual walk (detail::residual_walk) with plain loops over the row. Draws:
/// draw k (k = 0..count-1) tests candidate k; draw `count` draws the correction. `scratch` holds
/// `vocab` floats.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict multi_round_row(const T* target, const T* draft, std::int64_t vocab,
                                                const Token* candidates, std::int32_t count,
                                                const U& uniforms, float* scratch) {
  return residual_walk<ResidualRule::kMultiRound>(HostRows{}, target, draft, vocab, candidates,
                                                  count, uniforms, scratch);
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
