// SPDX-License-Identifier: MIT
// The CUDA backend of batched Gumbel-top-k and stochastic-beam-search levels: device rows in,
// device samples (or beams) out, on the backend's stream.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/draft_batch.hpp"

namespace specdec::detail {

template <>
struct GumbelTopKBatchImpl<backend::Cuda> {
  /// Device bytes: the staged streams and one row of `vocab` perturbed values per row.
  static std::size_t workspace_size(const backend::Cuda&, const GumbelTopKBatchShape& shape) {
    return backend::cuda_impl::gumbel_batch_workspace_size(shape.rows, shape.vocab);
  }

  /// k is at most backend::cuda_impl::kMaxDeviceTopK (1024). The device rows are not scanned:
  /// probability rows must be non-negative and log-weight rows free of NaN and +inf (what the CPU
  /// backend checks); an entry that is NaN after perturbation is never drawn.
  template <class T>
  static void run(const backend::Cuda& cuda, const GumbelTopKBatchArgs<T>& args,
                  const backend::DeviceWorkspace& ws) {
    check_gumbel_top_k_batch(args);
    const auto& rows = args.rows;
    const auto k = args.k;
    const auto& tokens = args.tokens;
    const auto& values = args.values;
    const auto& counts = args.counts;
    if (k > backend::cuda_impl::kMaxDeviceTopK) {
      fail("k", "{} exceeds the CUDA backend's limit of {} samples per row", k,
           backend::cuda_impl::kMaxDeviceTopK);
    }
    if (rows.cols > INT_MAX)
      fail("rows", "has {} columns, at most {} are supported", rows.cols, INT_MAX);
    if (rows.rows > INT_MAX)
      fail("rows", "has {} rows, at most {} are supported", rows.rows, INT_MAX);
    if (rows.data == nullptr) fail("rows", "is a null device pointer");
    if (tokens.data == nullptr) fail("tokens", "is a null device pointer");
    if (values.rows != 0 && values.data == nullptr) fail("values", "is a null device pointer");
    if (counts.data() == nullptr) fail("counts", "is a null device pointer");
    check_device_workspace(ws, workspace_size(cuda, {rows.rows, rows.cols, k}));
    check_cuda(
        backend::cuda_impl::gumbel_top_k_batch({.rows = rows.data,
                                                .dtype = device_dtype<T>(),
                                                .kind = args.kind,
                                                .row_count = rows.rows,
                                                .vocab = rows.cols,
                                                .row_stride = rows.stride,
                                                .k = k,
                                                .host_streams = args.streams.data(),
                                                .tokens = tokens.data,
                                                .token_stride = tokens.stride,
                                                .values = values.rows != 0 ? values.data : nullptr,
                                                .value_stride = values.stride,
                                                .counts = counts.data()},
                                               ws.data, cuda.stream),
        "gumbel_top_k_batch");
  }
};

template <>
struct BeamLevelBatchImpl<backend::Cuda> {
  /// Device bytes: the staged streams, one perturbed row per beam (B W rows of V floats), W
  /// candidates and a child count per beam.
  static std::size_t workspace_size(const backend::Cuda&, const BeamLevelBatchShape& shape) {
    return backend::cuda_impl::beam_level_workspace_size(shape.batch, shape.width, shape.vocab);
  }

  /// Everything but `streams` is device memory, including beam_counts, nodes, log_probs and
  /// scores (the previous level's outputs), which are not scanned: a beam count is clamped to
  /// [0, W] (0 live beams give 0 extensions), nodes only select streams, and the draft rows of
  /// live beams must be probability rows (what the CPU backend checks). W is at most
  /// backend::cuda_impl::kMaxDeviceTopK (1024).
  static void run(const backend::Cuda& cuda, const BeamLevelBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    check_beam_level_batch(args);
    const auto& draft_rows = args.draft_rows;
    const auto& beam_counts = args.beam_counts;
    const auto& nodes = args.nodes;
    const auto& log_probs = args.log_probs;
    const auto& scores = args.scores;
    const auto& next_parents = args.next_parents;
    const auto& next_tokens = args.next_tokens;
    const auto& next_log_probs = args.next_log_probs;
    const auto& next_scores = args.next_scores;
    const auto& next_counts = args.next_counts;
    const std::int64_t batch = nodes.rows, width = nodes.cols;
    if (width > backend::cuda_impl::kMaxDeviceTopK) {
      fail("nodes", "beam width {} exceeds the CUDA backend's limit of {}", width,
           backend::cuda_impl::kMaxDeviceTopK);
    }
    if (draft_rows.cols > INT_MAX)
      fail("draft_rows", "has {} columns, at most {} are supported", draft_rows.cols, INT_MAX);
    if (batch * width > INT_MAX)
      fail("nodes", "has {} beams in all, at most {} are supported", batch * width, INT_MAX);
    const auto null = [](std::string_view name, const void* p) {
      if (p == nullptr) fail(name, "is a null device pointer");
    };
    null("draft_rows", draft_rows.data);
    null("beam_counts", beam_counts.data());
    null("nodes", nodes.data);
    null("log_probs", log_probs.data);
    null("scores", scores.data);
    null("next_parents", next_parents.data);
    null("next_tokens", next_tokens.data);
    null("next_log_probs", next_log_probs.data);
    null("next_scores", next_scores.data);
    null("next_counts", next_counts.data());
    check_device_workspace(ws, workspace_size(cuda, {batch, width, draft_rows.cols}));
    const backend::cuda_impl::BeamLevelArgs matrices{
        draft_rows.data,    draft_rows.stride,   beam_counts.data(),    nodes.data,
        nodes.stride,       log_probs.data,      log_probs.stride,      scores.data,
        scores.stride,      next_parents.data,   next_parents.stride,   next_tokens.data,
        next_tokens.stride, next_log_probs.data, next_log_probs.stride, next_scores.data,
        next_scores.stride, next_counts.data()};
    check_cuda(
        backend::cuda_impl::stochastic_beam_level_batch({.matrices = matrices,
                                                         .batch = batch,
                                                         .width = width,
                                                         .vocab = draft_rows.cols,
                                                         .host_streams = args.streams.data()},
                                                        ws.data, cuda.stream),
        "stochastic_beam_level_batch");
  }
};

}  // namespace specdec::detail
