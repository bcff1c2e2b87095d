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

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/target_only.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/tree.hpp"
#include "specdec/verify/walk_inputs.hpp"

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

/// verify_chain without validation, same draws and bits. `rows` holds `length` draft tokens,
/// (length + 1) * vocab target and length * vocab draft entries (raw rows the same, or nullptr);
/// `out` holds length + 1 tokens and `scratch` vocab floats.
template <class T>
ChainVerdict verify_chain(const Rule& rule, const ChainRows<T>& rows, const RandomStream& stream,
                          Token* out, float* scratch) {
  return detail::verify_chain_unchecked<T>(rule, rows, stream, out, scratch);
}

/// verify_chain_logits without validation, same draws and bits: `logits` as ChainLogits
/// documents, `warp` valid for the vocabulary (Warp::validate: the caller's part, as the sizes
/// are); `out` holds length + 1 tokens and `scratch`
/// verify_chain_logits_workspace_size(vocab) bytes aligned to 64 (as Workspace::take gives them).
/// Rows are still reduced to their statistics, which notice a NaN or +inf: such a row, or a
/// drafted token of draft probability 0, may throw specdec::Error instead of giving a result.
template <class T>
ChainVerdict verify_chain_logits(const Warp& warp, const ChainLogits<T>& logits,
                                 const RandomStream& stream, Token* out, std::byte* scratch) {
  return detail::verify_chain_logits_unchecked<T>(
      warp,
      detail::ChainLogitRows<T>{
          .target = {logits.target, logits.vocab, "target_logits", 0},
          .draft = {logits.draft, logits.vocab, "draft_logits", 0},
          .tokens = logits.draft_tokens,
          .length = static_cast<std::int64_t>(logits.length),
          .vocab = logits.vocab},
      stream, out, "draft_tokens", detail::chain_logits_scratch(scratch, logits.vocab));
}

/// verify_tree without validation, same draws and bits: a tree of n = tree.size() nodes in level
/// order (parents as many as tokens), `rows` of (n + 1) * vocab target and draft entries (raw rows
/// the same, or nullptr), `buffers` as TreeBuffers documents.
template <class T>
TreeVerdict verify_tree(const Rule& rule, TreeView tree, const TreeRows<T>& rows,
                        const RandomStream& stream, const TreeBuffers& buffers) {
  return detail::verify_tree_unchecked<T>(rule, tree, rows, stream, buffers);
}

/// verify_chain_target_only without validation, same draws and bits. Reads `rows.target`
/// ((length + 1) * vocab entries), `rows.draft_tokens`, `rows.length` and `rows.vocab` (no draft
/// rows); `out` holds length + 1 tokens and `scratch` vocab floats.
template <class T>
ChainVerdict verify_chain_target_only(const ChainRows<T>& rows, const RandomStream& stream,
                                      Token* out, float* scratch) {
  return detail::verify_chain_target_only_unchecked<T>(rows.target, rows.draft_tokens, rows.length,
                                                       rows.vocab, stream, out, scratch);
}

/// verify_chain_target_only_logits without validation, same draws and bits: reads
/// `logits.target` ((length + 1) * vocab logits), `logits.draft_tokens`, `logits.length` and
/// `logits.vocab` (no draft logits), `warp` valid for the vocabulary; `out` holds length + 1
/// tokens and `scratch` verify_chain_logits_workspace_size(vocab) bytes aligned to 64. A row
/// holding a NaN or +inf may throw specdec::Error instead of giving a result.
template <class T>
ChainVerdict verify_chain_target_only_logits(const Warp& warp, const ChainLogits<T>& logits,
                                             const RandomStream& stream, Token* out,
                                             std::byte* scratch) {
  return detail::verify_chain_target_only_logits_unchecked<T>(
      warp,
      {.target = {logits.target, logits.vocab, "target_logits", 0},
       .tokens = logits.draft_tokens,
       .length = static_cast<std::int64_t>(logits.length),
       .vocab = logits.vocab},
      stream, out, detail::chain_logits_scratch(scratch, logits.vocab));
}

/// verify_tree_target_only without validation, same draws and bits: a tree of n nodes in level
/// order, `rows.target` (n + 1) * vocab entries (no draft rows are read), `buffers` as
/// TreeBuffers documents.
template <class T>
TreeVerdict verify_tree_target_only(TreeView tree, const TreeRows<T>& rows,
                                    const RandomStream& stream, const TreeBuffers& buffers) {
  return detail::verify_tree_target_only_unchecked<T>(tree, rows, stream, buffers);
}

}  // namespace specdec::unchecked
