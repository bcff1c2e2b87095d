// SPDX-License-Identifier: MIT
// Greedy matching (docs/algorithms.md §1.8): the T = 0 limit of every lossless rule.
#pragma once

#include "specdec/verify/common.hpp"

namespace specdec {
namespace detail {

/// Accepts the first candidate equal to argmax target (ties to the lowest id); otherwise the
/// correction is that argmax. No draws.
template <class T>
SPECDEC_HOST_DEVICE NodeVerdict greedy_row(const T* target, std::int64_t vocab,
                                           const Token* candidates, std::int32_t count) {
  const auto best = static_cast<Token>(row_argmax(target, vocab));
  for (std::int32_t k = 0; k < count; ++k) {
    if (candidates[k] == best) return {k, best};
  }
  return {-1, best};
}

}  // namespace detail

/// Greedy matching against a (raw or warped) target row. Takes 1 to 2^20 candidates, as
/// verify_node(Greedy{}, ...) does.
template <class T = float>
NodeVerdict verify_greedy(std::type_identity_t<std::span<const T>> target,
                          std::span<const Token> candidates) {
  check_probability_row<T>("target", target);
  detail::check_count("candidates", candidates.size(), 1, std::size_t{1} << 20);
  detail::check_tokens("candidates", candidates, static_cast<std::int64_t>(target.size()));
  return detail::greedy_row(target.data(), static_cast<std::int64_t>(target.size()),
                            candidates.data(), static_cast<std::int32_t>(candidates.size()));
}

}  // namespace specdec
