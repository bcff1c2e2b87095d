// SPDX-License-Identifier: MIT
// The unchecked tier: the library's single-row and single-sequence entry points without their
// validation, for engines that validate once per batch and call these in their hot loop.
//
// Contract. Each function computes what its checked namesake computes (same draws, same bits) for
// every input that namesake accepts. For input it would reject, the result is unspecified (any
// token, any count), but the call reads and writes only the memory it is given, provided that:
//   - every pointer addresses the sizes documented below,
//   - every token lies in [0, vocab) and every parent is -1 or an earlier node of its tree.
// Those two are the caller's responsibility; bad values inside that memory (NaN, rows that do not
// sum to 1, rule parameters out of range) are not. Validate with the checked calls, or with
// check_probability_row / check_logits_row (core/validate.hpp) and Warp::validate, once.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec::unchecked {

/// warp_logits without validation: `out` has logits.size() entries, `index` holds
/// warp_workspace_size(vocab) bytes of std::int32_t.
template <class T>
void warp_logits(const Warp& warp, std::span<const T> logits, std::span<float> out,
                 std::int32_t* index) {
  detail::warp_logits_unchecked<T>(warp, logits, out, index);
}

/// warp_probabilities without validation; buffers as warp_logits.
template <class T>
void warp_probabilities(const Warp& warp, std::span<const T> probabilities, std::span<float> out,
                        std::int32_t* index) {
  detail::warp_probabilities_unchecked<T>(warp, probabilities, out, index);
}

/// verify_node without validation: `rows` of `rows.vocab` entries each, `count` candidates,
/// `scratch` holds `rows.vocab` floats.
template <class T>
NodeVerdict verify_node(const Rule& rule, const NodeRows<T>& rows, const Token* candidates,
                        std::int32_t count, const RandomStream& stream, float* scratch) {
  return detail::verify_node_unchecked(rule, rows, candidates, count, stream, scratch);
}

/// verify_chain without validation: `length` draft tokens, (length + 1) * vocab target and
/// length * vocab draft entries (raw rows the same, or nullptr), `out` length + 1 tokens,
/// `scratch` vocab floats.
template <class T>
ChainVerdict verify_chain(const Rule& rule, const T* target_rows, const T* draft_rows,
                          const Token* draft_tokens, std::size_t length, std::int64_t vocab,
                          const RandomStream& stream, Token* out, float* scratch,
                          const T* raw_target_rows = nullptr, const T* raw_draft_rows = nullptr) {
  return detail::verify_chain_unchecked<T>(rule, target_rows, draft_rows, draft_tokens, length,
                                           vocab, stream, out, scratch, raw_target_rows,
                                           raw_draft_rows);
}

/// verify_tree without validation: a tree of n = tree.size() nodes in level order (parents as
/// many as tokens), (n + 1) * vocab target and draft entries (raw rows the same, or nullptr),
/// `accepted_nodes`, `candidates` and `ids` n + 1 entries each, `scratch` vocab floats.
template <class T>
TreeVerdict verify_tree(const Rule& rule, TreeView tree, const T* target_rows, const T* draft_rows,
                        std::int64_t vocab, const RandomStream& stream,
                        std::int32_t* accepted_nodes, Token* candidates, std::int32_t* ids,
                        float* scratch, const T* raw_target_rows = nullptr,
                        const T* raw_draft_rows = nullptr) {
  return detail::verify_tree_unchecked<T>(rule, tree, target_rows, draft_rows, vocab,
                                          stream, accepted_nodes, candidates, ids, scratch,
                                          raw_target_rows, raw_draft_rows);
}

}  // namespace specdec::unchecked
