// SPDX-License-Identifier: MIT
// Recursive rejection sampling (RRS) for candidates drawn without replacement (seed 000 Alg. 1;
// docs/algorithms.md §1.3).
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {

/// RRS on warped rows over candidates in their drawing order: the recursive residual walk
/// (detail::residual_walk<ResidualRule::kRecursive> with HostRows). Draws: draw k (k < count)
/// tests candidate k; draw `count` draws the correction. Candidates must be distinct and have
/// positive draft probability (they are samples without replacement; a node may have fewer
/// candidates than planned when the draft has fewer non-zero tokens). Throws specdec::Error naming
/// the bad argument.
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
  return detail::host_residual_walk<detail::ResidualRule::kRecursive, T>(target, draft, candidates,
                                                                         uniforms, ws);
}

}  // namespace specdec
