// SPDX-License-Identifier: MIT
// Recursive rejection sampling (RRS) for candidates drawn without replacement (seed 000 Alg. 1;
// docs/algorithms.md §1.3).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// RRS over `count` distinct candidates drawn without replacement from the warped `draft` row, in
/// their drawing order: the recursive residual walk (detail::residual_walk) with plain loops over
/// the row. Draws: draw k (k < count) tests candidate k; draw `count` draws the correction.
/// `scratch` holds `vocab` floats.
template <class T, UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict recursive_row(const T* target, const T* draft, std::int64_t vocab,
                                              const Token* candidates, std::int32_t count,
                                              const U& uniforms, float* scratch) {
  return residual_walk<ResidualRule::kRecursive>(HostRows{}, target, draft, vocab, candidates,
                                                 count, uniforms, scratch);
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
