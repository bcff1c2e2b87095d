// SPDX-License-Identifier: MIT
// Shared pieces of the node verifiers: input checks and workspace sizes (the verdict and the row
// operations are verify/residual_walk.hpp's).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec {

/// The rows seen at one node: warped target and draft (what candidates were drawn from), and the
/// raw (unwarped) rows the cascade deferral reads (nullptr = the same as the warped rows).
template <class T = float>
struct NodeRows {
  const T* target = nullptr;
  const T* draft = nullptr;
  std::int64_t vocab = 0;
  const T* raw_target = nullptr;
  const T* raw_draft = nullptr;
};

/// Bytes of workspace one node verification over `vocab` tokens needs (one float row).
inline std::size_t verify_workspace_size(std::int64_t vocab) {
  return Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
}

namespace detail {

/// The checks shared by every host entry: two probability rows of equal size, candidates inside
/// the vocabulary, and (for rules that assume candidates were drawn from the draft) a positive
/// draft probability for each candidate.
template <class T>
void check_node_inputs(std::span<const T> target, std::span<const T> draft,
                       std::span<const Token> candidates, bool need_draft_support = true,
                       std::string_view candidates_name = "candidates") {
  check_probability_row<T>("target", target);
  check_probability_row<T>("draft", draft);
  detail::check_size("draft", draft.size(), target.size());
  const auto vocab = static_cast<std::int64_t>(target.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    // A lone candidate is reported under its own name ("candidate"), a list by index.
    const ArgName name = candidates_name == "candidate"
                             ? ArgName(candidates_name)
                             : ArgName(candidates_name, static_cast<std::int64_t>(k));
    detail::check_token(name, candidates[k], vocab);
    if (need_draft_support &&
        !(static_cast<float>(draft[static_cast<std::size_t>(candidates[k])]) > 0.0f)) {
      detail::fail(name, "token {} has draft probability 0, so it cannot have been drawn",
                   candidates[k]);
    }
  }
}

/// A host entry's residual walk once its inputs are checked: the walk of `rule` with HostRows over
/// the rows, one float row of `ws` as its scratch.
template <ResidualRule rule, class T, UniformSource U>
NodeVerdict host_residual_walk(std::span<const T> target, std::span<const T> draft,
                               std::span<const Token> candidates, const U& uniforms,
                               Workspace& ws) {
  auto scope = ws.scope();
  auto scratch = ws.take<float>(target.size());
  return residual_walk<rule>(
      HostRows{}, target.data(), draft.data(), static_cast<std::int64_t>(target.size()),
      candidates.data(), static_cast<std::int32_t>(candidates.size()), uniforms, scratch.data());
}

inline void check_count(std::string_view name, std::size_t got, std::size_t lo, std::size_t hi) {
  if (got < lo || got > hi) {
    if (lo == hi) detail::fail(name, "has {} candidates, this rule takes exactly {}", got, lo);
    detail::fail(name, "has {} candidates, this rule takes {} to {}", got, lo, hi);
  }
}

}  // namespace detail
}  // namespace specdec
