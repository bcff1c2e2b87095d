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
#include "specdec/backend/cuda/host_staging.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/draft_batch.hpp"

namespace specdec {

/// Zeroed counter words a CUDA Gumbel-top-k of `shape` counts in when the caller gives them
/// (DeviceWorkspace::counters): one a row.
inline std::size_t workspace_counters(const backend::Cuda&, const GumbelTopKBatchShape& shape) {
  return static_cast<std::size_t>(shape.rows < 0 ? 0 : shape.rows);
}

/// Zeroed counter words a CUDA stochastic-beam-search level of `shape` counts in when the caller
/// gives them (DeviceWorkspace::counters): one a beam.
inline std::size_t workspace_counters(const backend::Cuda&, const BeamLevelBatchShape& shape) {
  return static_cast<std::size_t>(shape.batch < 0 || shape.width < 0 ? 0
                                                                     : shape.batch * shape.width);
}

}  // namespace specdec

namespace specdec::detail {

template <>
struct GumbelTopKBatchImpl<backend::Cuda> {
  /// Device bytes: the staged streams and the per-block lists of k samples of the row split
  /// (O(k) per block of 1024-entry tiles; no perturbed row). Needs no initialisation: each call
  /// zeroes the counters it uses, unless the caller gives its own zeroed ones
  /// (DeviceWorkspace::counters, a word a row).
  static std::size_t workspace_size(const backend::Cuda&, const GumbelTopKBatchShape& shape) {
    return backend::cuda_impl::gumbel_batch_workspace_size(shape.rows, shape.vocab, shape.k);
  }

  /// k is at most backend::cuda_impl::kMaxDeviceTopK (1024). The device rows are not scanned:
  /// probability rows must be non-negative and log-weight rows free of NaN and +inf (what the CPU
  /// backend checks); an entry that is NaN after perturbation is never drawn. Each row is read
  /// once. With streams on the device the call stages nothing: graph-capturable.
  template <class T>
  static void run(const backend::Cuda& cuda, const GumbelTopKBatchArgs<T>& args,
                  const backend::DeviceWorkspace& ws) {
    check_gumbel_top_k_batch(args);
    if (args.k > backend::cuda_impl::kMaxDeviceTopK) {
      fail("k", "{} exceeds the CUDA backend's limit of {} samples per row", args.k,
           backend::cuda_impl::kMaxDeviceTopK);
    }
    if (args.rows.cols > INT_MAX)
      fail("rows", "has {} columns, at most {} are supported", args.rows.cols, INT_MAX);
    if (args.rows.rows > INT_MAX)
      fail("rows", "has {} rows, at most {} are supported", args.rows.rows, INT_MAX);
    if (args.rows.data == nullptr) fail("rows", "is a null device pointer");
    if (args.tokens.data == nullptr) fail("tokens", "is a null device pointer");
    if (args.values.rows != 0 && args.values.data == nullptr)
      fail("values", "is a null device pointer");
    if (args.counts.data() == nullptr) fail("counts", "is a null device pointer");
    check_device_workspace(ws, workspace_size(cuda, {args.rows.rows, args.rows.cols, args.k}));
    unsigned int* counters = device_counters(
        ws, workspace_counters(cuda, GumbelTopKBatchShape{args.rows.rows, args.rows.cols, args.k}));
    check_cuda(backend::cuda_impl::gumbel_top_k_batch(
                   {.rows = args.rows.data,
                    .dtype = device_dtype<T>(),
                    .kind = args.kind,
                    .row_count = args.rows.rows,
                    .vocab = args.rows.cols,
                    .row_stride = args.rows.stride,
                    .k = args.k,
                    .streams = args.streams,
                    .tokens = args.tokens.data,
                    .token_stride = args.tokens.stride,
                    .values = args.values.rows != 0 ? args.values.data : nullptr,
                    .value_stride = args.values.stride,
                    .counts = args.counts.data(),
                    .counters = counters},
                   ws.data, cuda.stream),
               "gumbel_top_k_batch");
  }
};

template <>
struct BeamLevelBatchImpl<backend::Cuda> {
  /// Device bytes: the staged streams, W candidates and a child count per beam, and the
  /// per-block top-W lists of the beams' row split (no perturbed row). Needs no initialisation.
  static std::size_t workspace_size(const backend::Cuda&, const BeamLevelBatchShape& shape) {
    return backend::cuda_impl::beam_level_workspace_size(shape.batch, shape.width, shape.vocab);
  }

  /// Everything but `streams` is device memory, including beam_counts, nodes, log_probs and
  /// scores (the previous level's outputs), which are not scanned: a beam count is clamped to
  /// [0, W] (0 live beams give 0 extensions), nodes only select streams, and the draft rows of
  /// live beams must be probability rows (what the CPU backend checks). W is at most
  /// backend::cuda_impl::kMaxDeviceTopK (1024). Each draft row of a live beam is read once.
  /// With streams on the device the call stages nothing: graph-capturable.
  static void run(const backend::Cuda& cuda, const BeamLevelBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    check_beam_level_batch(args);
    const std::int64_t batch = args.nodes.rows, width = args.nodes.cols;
    if (width > backend::cuda_impl::kMaxDeviceTopK) {
      fail("nodes", "beam width {} exceeds the CUDA backend's limit of {}", width,
           backend::cuda_impl::kMaxDeviceTopK);
    }
    if (args.draft_rows.cols > INT_MAX)
      fail("draft_rows", "has {} columns, at most {} are supported", args.draft_rows.cols, INT_MAX);
    if (batch * width > INT_MAX)
      fail("nodes", "has {} beams in all, at most {} are supported", batch * width, INT_MAX);
    const auto null = [](std::string_view name, const void* p) {
      if (p == nullptr) fail(name, "is a null device pointer");
    };
    null("draft_rows", args.draft_rows.data);
    null("beam_counts", args.beam_counts.data());
    null("nodes", args.nodes.data);
    null("log_probs", args.log_probs.data);
    null("scores", args.scores.data);
    null("next_parents", args.next_parents.data);
    null("next_tokens", args.next_tokens.data);
    null("next_log_probs", args.next_log_probs.data);
    null("next_scores", args.next_scores.data);
    null("next_counts", args.next_counts.data());
    check_device_workspace(ws, workspace_size(cuda, {batch, width, args.draft_rows.cols}));
    unsigned int* counters = device_counters(
        ws, workspace_counters(cuda, BeamLevelBatchShape{batch, width, args.draft_rows.cols}));
    const backend::cuda_impl::BeamLevelArgs matrices{
        args.draft_rows.data,    args.draft_rows.stride,   args.beam_counts.data(),
        args.nodes.data,         args.nodes.stride,        args.log_probs.data,
        args.log_probs.stride,   args.scores.data,         args.scores.stride,
        args.next_parents.data,  args.next_parents.stride, args.next_tokens.data,
        args.next_tokens.stride, args.next_log_probs.data, args.next_log_probs.stride,
        args.next_scores.data,   args.next_scores.stride,  args.next_counts.data()};
    check_cuda(backend::cuda_impl::stochastic_beam_level_batch({.matrices = matrices,
                                                                .batch = batch,
                                                                .width = width,
                                                                .vocab = args.draft_rows.cols,
                                                                .streams = args.streams,
                                                                .counters = counters},
                                                               ws.data, cuda.stream),
               "stochastic_beam_level_batch");
  }
};

}  // namespace specdec::detail
