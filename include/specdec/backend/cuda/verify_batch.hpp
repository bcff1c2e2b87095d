// SPDX-License-Identifier: MIT
// The CUDA backend of batched chain verification: device rows (or logits) in, accepted counts
// and emitted tokens out, one block per sequence on the backend's stream.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>

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

}  // namespace specdec::detail
