// SPDX-License-Identifier: MIT
// The inputs of a chain or tree walk as plain structs (rows, caller-owned buffers), shared by the
// checked entries, their unchecked forms and the unchecked tier (unchecked.hpp); and the checked
// preamble of every tree entry: the tree checked, then its walk's buffers taken from a workspace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/core/token.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/tree/tree_view.hpp"
#include "specdec/verify/rule.hpp"

namespace specdec {

/// The row arrays a checked entry takes as one argument (verify_chain, verify_tree): the warped
/// target and draft rows, and the raw (unwarped) rows the cascade deferral and the greedy lossy
/// test read (empty = the warped rows).
template <class T = float>
struct RowSpans {
  std::span<const T> target{};
  std::span<const T> draft{};
  std::span<const T> raw_target{};
  std::span<const T> raw_draft{};
};

/// The rows of a chain of `length` draft tokens for unchecked::verify_chain, as NodeRows holds
/// one node's: `target` (length + 1) x vocab, `draft` length x vocab, raw rows the same shapes
/// (nullptr = the warped rows).
template <class T = float>
struct ChainRows {
  const T* target = nullptr;
  const T* draft = nullptr;
  const Token* draft_tokens = nullptr;
  std::size_t length = 0;
  std::int64_t vocab = 0;
  const T* raw_target = nullptr;
  const T* raw_draft = nullptr;
};

/// The logits of a chain of `length` draft tokens for unchecked::verify_chain_logits: `target`
/// (length + 1) x vocab and `draft` length x vocab, rows `vocab` apart.
template <class T = float>
struct ChainLogits {
  const T* target = nullptr;
  const T* draft = nullptr;
  const Token* draft_tokens = nullptr;
  std::size_t length = 0;
  std::int64_t vocab = 0;
};

/// The rows of a tree of n nodes for unchecked::verify_tree: NodeRows' fields, each pointing at
/// n + 1 rows (row 0 = the root, row i + 1 = node i, as verify_tree lays them out); raw rows
/// nullptr = the warped rows.
template <class T = float>
using TreeRows = NodeRows<T>;

/// Caller-owned memory of unchecked::verify_tree for a tree of n nodes: the output
/// `accepted_nodes` (room for the tree's depth; n + 1 is always enough), scratch `candidates` and
/// `ids` (n + 1 entries each) and `scratch` (vocab floats).
struct TreeBuffers {
  std::int32_t* accepted_nodes = nullptr;
  Token* candidates = nullptr;
  std::int32_t* ids = nullptr;
  float* scratch = nullptr;
};

namespace detail {

/// Row `r` of each of `rows`' arrays (`rows.vocab` apart; raw rows stay nullptr when absent).
template <class T>
NodeRows<T> node_rows(const NodeRows<T>& rows, std::size_t r) {
  const auto at = static_cast<std::size_t>(rows.vocab) * r;
  return {rows.target + at, rows.draft == nullptr ? nullptr : rows.draft + at, rows.vocab,
          rows.raw_target == nullptr ? nullptr : rows.raw_target + at,
          rows.raw_draft == nullptr ? nullptr : rows.raw_draft + at};
}

/// The rows of a chain at position i.
template <class T>
NodeRows<T> node_rows(const specdec::ChainRows<T>& rows, std::size_t i) {
  return node_rows(NodeRows<T>{rows.target, rows.draft, rows.vocab, rows.raw_target, rows.raw_draft},
                   i);
}

/// The checked preamble of a tree entry, in a ws.scope() the caller holds: takes two scratch
/// arrays of N + 1 entries, runs check(depth, children) on them (the entry's checks, which end
/// with the tree's structure checked), then takes the walk's buffers: candidates and ids (N + 1
/// each) and `scratch_floats` floats of scratch (none when 0).
template <class Check>
TreeBuffers checked_tree_buffers(Workspace& ws, TreeView tree,
                                 std::span<std::int32_t> accepted_nodes,
                                 std::size_t scratch_floats, const Check& check) {
  const auto n = tree.tokens.size();
  auto depth = ws.take<std::int32_t>(n + 1);
  auto children = ws.take<std::int32_t>(n + 1);
  check(depth.data(), children.data());
  TreeBuffers buffers{.accepted_nodes = accepted_nodes.data(),
                      .candidates = ws.take<Token>(n + 1).data(),
                      .ids = ws.take<std::int32_t>(n + 1).data()};
  if (scratch_floats > 0) buffers.scratch = ws.take<float>(scratch_floats).data();
  return buffers;
}

}  // namespace detail
}  // namespace specdec
