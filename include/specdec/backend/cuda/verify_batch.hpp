// SPDX-License-Identifier: MIT
// The CUDA backend of batched chain and tree verification: device rows (or logits) in, accepted
// counts and tokens out, one block per sequence on the backend's stream.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/verify_batch.hpp"

namespace specdec::detail {

template <>
struct ChainBatchImpl<backend::Cuda> {
  /// Device bytes: the staged streams and warps, and from logits two warped rows per sequence.
  static std::size_t workspace_size(const backend::Cuda&, const ChainBatchShape& shape) {
    return backend::cuda_impl::chain_workspace_size(shape.batch, shape.vocab, shape.from_logits);
  }

  static void check_device(const void* target, const void* draft, const void* tokens,
                           const void* emitted, const void* accepted, std::int64_t vocab,
                           std::int64_t gamma, std::string_view target_name,
                           std::string_view draft_name) {
    if (vocab > INT_MAX)
      fail(target_name, "has {} columns, at most {} are supported", vocab, INT_MAX);
    if (gamma > INT_MAX - 1) fail("draft_tokens", "has {} columns, too many", gamma);
    if (target == nullptr) fail(target_name, "is a null device pointer");
    if (draft == nullptr) fail(draft_name, "is a null device pointer");
    if (tokens == nullptr) fail("draft_tokens", "is a null device pointer");
    if (emitted == nullptr) fail("emitted", "is a null device pointer");
    if (accepted == nullptr) fail("accepted", "is a null device pointer");
  }

  /// Device rows are not scanned: they must be probability rows, and every draft token must lie
  /// in the vocabulary with positive draft probability (what the CPU backend checks).
  static void run(const backend::Cuda& cuda, MatrixView<const float> target_rows,
                  MatrixView<const float> draft_rows, MatrixView<const Token> draft_tokens,
                  std::span<const RandomStream> streams, MatrixView<Token> emitted,
                  std::span<std::int32_t> accepted, const backend::DeviceWorkspace& ws) {
    check_chain_batch(target_rows.rows, target_rows.cols, target_rows.stride, draft_rows.rows,
                      draft_rows.cols, draft_rows.stride, draft_tokens.rows, draft_tokens.cols,
                      draft_tokens.stride, streams.size(), emitted.rows, emitted.cols,
                      emitted.stride, accepted.size(), "target_rows", "draft_rows");
    check_device(target_rows.data, draft_rows.data, draft_tokens.data, emitted.data,
                 accepted.data(), target_rows.cols, draft_tokens.cols, "target_rows", "draft_rows");
    check_device_workspace(
        ws, workspace_size(cuda, {draft_tokens.rows, draft_tokens.cols, target_rows.cols}));
    check_cuda(backend::cuda_impl::verify_chain_batch(
                   target_rows.data, target_rows.stride, draft_rows.data, draft_rows.stride,
                   backend::cuda_impl::DType::kF32, false, draft_tokens.rows, draft_tokens.cols,
                   target_rows.cols, draft_tokens.data, draft_tokens.stride, streams.data(),
                   nullptr, 0, emitted.data, emitted.stride, accepted.data(), ws.data, cuda.stream),
               "verify_chain_batch");
  }

  /// Device logits are not scanned: rows must hold no NaN or +inf and at least one finite value.
  template <class T>
  static void run_logits(const backend::Cuda& cuda, MatrixView<const T> target_logits,
                         MatrixView<const T> draft_logits, std::span<const Warp> warps,
                         MatrixView<const Token> draft_tokens,
                         std::span<const RandomStream> streams, MatrixView<Token> emitted,
                         std::span<std::int32_t> accepted, const backend::DeviceWorkspace& ws) {
    check_chain_batch(target_logits.rows, target_logits.cols, target_logits.stride,
                      draft_logits.rows, draft_logits.cols, draft_logits.stride, draft_tokens.rows,
                      draft_tokens.cols, draft_tokens.stride, streams.size(), emitted.rows,
                      emitted.cols, emitted.stride, accepted.size(), "target_logits",
                      "draft_logits");
    check_sequence_warps(warps, draft_tokens.rows, target_logits.cols);
    check_device(target_logits.data, draft_logits.data, draft_tokens.data, emitted.data,
                 accepted.data(), target_logits.cols, draft_tokens.cols, "target_logits",
                 "draft_logits");
    check_device_workspace(
        ws, workspace_size(cuda, {draft_tokens.rows, draft_tokens.cols, target_logits.cols, true}));
    check_cuda(backend::cuda_impl::verify_chain_batch(
                   target_logits.data, target_logits.stride, draft_logits.data, draft_logits.stride,
                   device_dtype<T>(), true, draft_tokens.rows, draft_tokens.cols,
                   target_logits.cols, draft_tokens.data, draft_tokens.stride, streams.data(),
                   reinterpret_cast<const backend::cuda_impl::DeviceWarp*>(warps.data()),
                   static_cast<std::int64_t>(warps.size()), emitted.data, emitted.stride,
                   accepted.data(), ws.data, cuda.stream),
               "verify_chain_batch_logits");
  }
};

template <>
struct TreeBatchImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and streams, candidate lists and one float row per tree.
  static std::size_t workspace_size(const backend::Cuda&, const TreeBatchShape& shape) {
    return backend::cuda_impl::tree_workspace_size(shape.batch, shape.max_nodes, shape.vocab);
  }

  /// Shapes, offsets, streams and the rule are checked on the host; device tokens, parents and
  /// rows are not scanned: they must be what the CPU backend accepts (level-ordered trees, tokens
  /// with positive draft probability, probability rows). Bad device data cannot make the kernel
  /// fault or hang: a child whose token lies outside the vocabulary is never accepted.
  /// Rejection runs the multi-round rule (identical for one child per node).
  static void run(const backend::Cuda& cuda, const Rule& rule,
                  std::span<const std::int32_t> node_offsets, std::span<const Token> tokens,
                  std::span<const std::int32_t> parents, MatrixView<const float> target_rows,
                  MatrixView<const float> draft_rows, std::span<const RandomStream> streams,
                  std::span<std::int32_t> accepted_nodes, std::span<std::int32_t> accepted,
                  std::span<Token> final_tokens, std::span<std::uint8_t> bonus,
                  const backend::DeviceWorkspace& ws) {
    const std::int64_t largest =
        check_tree_batch(node_offsets, tokens.size(), parents.size(), target_rows.rows,
                         target_rows.cols, draft_rows.rows, draft_rows.cols, streams.size(),
                         accepted_nodes.size(), accepted.size(), final_tokens.size(), bonus.size());
    if (target_rows.stride < target_rows.cols) {
      fail("target_rows", "stride {} is smaller than its {} columns", target_rows.stride,
           target_rows.cols);
    }
    if (draft_rows.stride < draft_rows.cols) {
      fail("draft_rows", "stride {} is smaller than its {} columns", draft_rows.stride,
           draft_rows.cols);
    }
    const bool recursive = std::holds_alternative<Recursive>(rule);
    if (!recursive && !std::holds_alternative<MultiRound>(rule) &&
        !std::holds_alternative<Rejection>(rule)) {
      fail("rule",
           "the CUDA backend verifies trees with Recursive, MultiRound or Rejection "
           "(the CPU backend takes every rule)");
    }
    const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
    if (target_rows.cols > INT_MAX)
      fail("target_rows", "has {} columns, at most {} are supported", target_rows.cols, INT_MAX);
    if (node_offsets.back() > 0) {
      if (tokens.data() == nullptr) fail("tokens", "is a null device pointer");
      if (parents.data() == nullptr) fail("parents", "is a null device pointer");
      if (accepted_nodes.data() == nullptr) fail("accepted_nodes", "is a null device pointer");
    }
    if (target_rows.data == nullptr) fail("target_rows", "is a null device pointer");
    if (draft_rows.data == nullptr) fail("draft_rows", "is a null device pointer");
    if (accepted.data() == nullptr) fail("accepted", "is a null device pointer");
    if (final_tokens.data() == nullptr) fail("final_tokens", "is a null device pointer");
    check_device_workspace(ws, workspace_size(cuda, {batch, largest, target_rows.cols}));
    check_cuda(
        backend::cuda_impl::verify_tree_batch(
            recursive, node_offsets.data(), batch, largest, tokens.data(), parents.data(),
            target_rows.data, target_rows.stride, draft_rows.data, draft_rows.stride,
            target_rows.cols, streams.data(), accepted_nodes.data(), accepted.data(),
            final_tokens.data(), bonus.empty() ? nullptr : bonus.data(), ws.data, cuda.stream),
        "verify_tree_batch");
  }
};

}  // namespace specdec::detail
