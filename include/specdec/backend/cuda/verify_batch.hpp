// SPDX-License-Identifier: MIT
// The CUDA backend of batched chain and tree verification: device rows (or logits) in, accepted
// counts and tokens out, one block per sequence on the backend's stream.
#pragma once

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <variant>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/cuda/host_staging.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/policy.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/backend/lossy_chain_batch.hpp"
#include "specdec/backend/verify_batch.hpp"

namespace specdec::detail {

/// The launcher's views of a chain batch (ChainBatchArgs or ChainBatchLogitsArgs<T>; no draft
/// rows for target-only verification) after check_chain_batch, and the device pointers the
/// kernels need checked non-null.
template <class T, class Args>
backend::cuda_impl::ChainVerifyParams chain_params(const Args& args, const RaggedSizes& sizes,
                                                   bool draft_rows = true) {
  const ChainRows<T> rows = chain_rows(args);
  if (rows.target.cols > INT_MAX)
    fail(rows.target_name, "has {} columns, at most {} are supported", rows.target.cols, INT_MAX);
  if (rows.target.data == nullptr) fail(rows.target_name, "is a null device pointer");
  if (sizes.total > 0) {
    if (draft_rows && rows.draft.data == nullptr) fail(rows.draft_name, "is a null device pointer");
    if (args.draft_tokens.data() == nullptr) fail("draft_tokens", "is a null device pointer");
  }
  if (args.emitted.data() == nullptr) fail("emitted", "is a null device pointer");
  if (args.accepted.data() == nullptr) fail("accepted", "is a null device pointer");
  return {.target = rows.target.data,
          .target_stride = rows.target.stride,
          .draft = draft_rows ? rows.draft.data : nullptr,
          .draft_stride = draft_rows ? rows.draft.stride : 0,
          .dtype = device_dtype<T>(),
          .batch = sizes.batch,
          .vocab = rows.target.cols,
          .drafts = sizes.total,
          .draft_offsets = args.draft_offsets,
          .draft_tokens = args.draft_tokens.data(),
          .streams = args.streams,
          .emitted = args.emitted.data(),
          .accepted = args.accepted.data(),
          .status = args.status.empty() ? nullptr : args.status.data()};
}

/// The chain arrays a CUDA call copies from the host: the first named (empty: none).
template <class Args>
std::string_view chain_host_array(const Args& args) {
  const std::string_view first =
      first_host_array({{"draft_offsets", args.draft_offsets}, {"streams", args.streams}});
  if constexpr (requires { args.warps; }) {
    // One shared host warp travels as a kernel argument: only per-sequence host warps are copied.
    if (first.empty() && !args.warps.on_device() && args.warps.size() > 1) return "warps";
  }
  return first;
}

template <>
struct ChainBatchImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and streams; from logits also the warps, the statistics of
  /// every row and two warped rows per sequence.
  static std::size_t workspace_size(const backend::Cuda&, const ChainBatchShape& shape) {
    return shape.from_logits ? backend::cuda_impl::chain_logits_workspace_size(
                                   shape.batch, shape.max_gamma, shape.vocab)
                             : backend::cuda_impl::chain_workspace_size(shape.batch);
  }

  /// Device rows are not scanned: they must be probability rows, and every draft token must lie
  /// in the vocabulary with positive draft probability (what the CPU backend checks). A sequence
  /// breaking the token rule (a token outside the vocabulary, or one of draft probability 0 at a
  /// tested position) is never read past its rows nor accepted: it gets accepted = -1 and only
  /// -1 tokens.
  static void run(const backend::Cuda& cuda, const ChainBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const auto p = chain_params<float>(args, check_chain_batch<backend::Cuda>(args));
    check_device_workspace(ws, workspace_size(cuda, {.batch = p.batch, .vocab = p.vocab}));
    check_cuda_staged(backend::cuda_impl::verify_chain_batch(p, ws.data, cuda.stream),
                      "verify_chain_batch", chain_host_array(args));
  }

  /// Device logits are not scanned: rows must hold no NaN or +inf and at least one finite value.
  template <class T>
  static void run_logits(const backend::Cuda& cuda, const ChainBatchLogitsArgs<T>& args,
                         const backend::DeviceWorkspace& ws) {
    auto p = chain_params<T>(args, check_chain_batch<backend::Cuda>(args));
    // Device warps are checked where the kernels read them (a bad one fails its sequence).
    p.warps = device_warps(args.warps);
    check_device_workspace(ws, backend::cuda_impl::chain_logits_workspace_bytes(p.batch, p.drafts,
                                                                                p.vocab));
    p.counters = device_counters(ws, backend::cuda_impl::row_counters(p.batch + 2 * p.drafts));
    check_cuda_staged(backend::cuda_impl::verify_chain_batch_logits(p, ws.data, cuda.stream),
                      "verify_chain_batch_logits", chain_host_array(args));
  }
};

/// The launcher's views of a tree batch after check_tree_batch (target-only: no draft rows), and
/// the device pointers the kernels need checked non-null.
inline backend::cuda_impl::TreeVerifyParams tree_params(const TreeBatchArgs& args,
                                                        const RaggedSizes& sizes,
                                                        bool draft_rows) {
  const auto& target = args.target_rows;
  const auto& draft = args.draft_rows;
  if (target.cols > INT_MAX)
    fail("target_rows", "has {} columns, at most {} are supported", target.cols, INT_MAX);
  if (sizes.total > 0) {
    if (args.trees.tokens.data() == nullptr) fail("trees.tokens", "is a null device pointer");
    if (args.trees.parents.data() == nullptr) fail("trees.parents", "is a null device pointer");
    if (args.accepted_nodes.data() == nullptr) fail("accepted_nodes", "is a null device pointer");
  }
  if (target.data == nullptr) fail("target_rows", "is a null device pointer");
  if (draft_rows && draft.data == nullptr) fail("draft_rows", "is a null device pointer");
  if (args.accepted.data() == nullptr) fail("accepted", "is a null device pointer");
  if (args.final_tokens.data() == nullptr) fail("final_tokens", "is a null device pointer");
  return {.node_offsets = args.node_offsets,
          .batch = sizes.batch,
          .max_nodes = sizes.largest,
          .tokens = args.trees.tokens.data(),
          .parents = args.trees.parents.data(),
          .target = target.data,
          .target_stride = target.stride,
          .draft = draft_rows ? draft.data : nullptr,
          .draft_stride = draft_rows ? draft.stride : 0,
          .vocab = target.cols,
          .streams = args.streams,
          .accepted_nodes = args.accepted_nodes.data(),
          .accepted = args.accepted.data(),
          .final_tokens = args.final_tokens.data(),
          .bonus = args.bonus.empty() ? nullptr : args.bonus.data(),
          .status = args.status.empty() ? nullptr : args.status.data()};
}

/// The tree arrays a CUDA call copies from the host: the first named (empty: none).
inline std::string_view tree_host_array(const TreeBatchArgs& args) {
  return first_host_array({{"node_offsets", args.node_offsets}, {"streams", args.streams}});
}

template <>
struct TreeBatchImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and streams, candidate lists and one float row per tree.
  /// The workspace is only written by a call: it needs no zeroing.
  static std::size_t workspace_size(const backend::Cuda&, const TreeBatchShape& shape) {
    return backend::cuda_impl::tree_workspace_size(shape.batch, shape.max_nodes, shape.vocab);
  }

  /// Shapes, offsets, streams and the rule are checked on the host; device tokens, parents and
  /// rows are not scanned: they must be what the CPU backend accepts (level-ordered trees, tokens
  /// with positive draft probability, probability rows). Bad device data cannot make the kernel
  /// fault or hang: a tree holding a token outside the vocabulary fails (accepted = -1, and
  /// SequenceStatus::kTokenOutsideVocab in args.status), as the CPU backend's does.
  /// Rejection runs the multi-round rule (identical for one child per node). With offsets on
  /// the device the workspace is checked against ceil(N / B) nodes per tree (any largest tree is
  /// at least that) and the offsets are not scanned: wrong ones read wrong rows.
  static void run(const backend::Cuda& cuda, const Rule& rule, const TreeBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    using backend::cuda_impl::TreeRule;
    const RaggedSizes sizes = check_tree_batch<backend::Cuda>(args);
    if (!std::holds_alternative<Recursive>(rule) && !std::holds_alternative<MultiRound>(rule) &&
        !std::holds_alternative<Rejection>(rule)) {
      fail("rule",
           "the CUDA backend verifies trees with Recursive, MultiRound or Rejection "
           "(the CPU backend takes every rule)");
    }
    const TreeRule node_rule =
        std::holds_alternative<Recursive>(rule) ? TreeRule::kRecursive : TreeRule::kMultiRound;
    const auto p = tree_params(args, sizes, /*draft_rows=*/true);
    check_device_workspace(ws, workspace_size(cuda, {p.batch, sizes.largest, p.vocab}));
    check_cuda_staged(backend::cuda_impl::verify_tree_batch(node_rule, p, ws.data, cuda.stream),
                      "verify_tree_batch", tree_host_array(args));
  }
};

/// The device workspace of the target-only batches: their staged offsets and streams only
/// (verify_chain_batch's; less than verify_tree_batch's). Their Impls derive from it.
struct StagedArraysWorkspace {
  template <class Shape>
  static std::size_t workspace_size(const backend::Cuda&, const Shape& shape) {
    return backend::cuda_impl::chain_workspace_size(shape.batch);
  }

  /// The check of `ws` for a call whose first host array is `host_array`: with both arrays on the
  /// device (none named) nothing is staged and no workspace is needed.
  static void check(const backend::DeviceWorkspace& ws, std::string_view host_array,
                    std::int64_t batch) {
    check_device_workspace(
        ws, host_array.empty() ? 0 : backend::cuda_impl::chain_workspace_size(batch));
  }
};

template <>
struct ChainBatchTargetOnlyImpl<backend::Cuda> : StagedArraysWorkspace {

  /// Shapes and offsets are checked on the host (check_chain_batch without draft rows, as on the
  /// CPU); device rows and tokens are not scanned. A sequence with a draft token outside the
  /// vocabulary (which the CPU backend rejects) never has it used as an index: it gets
  /// accepted = -1 and only -1 tokens.
  static void run(const backend::Cuda& cuda, const ChainBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const auto p = chain_params<float>(
        args, check_chain_batch<backend::Cuda>(args, /*draft_rows=*/false), /*draft_rows=*/false);
    const std::string_view host_array = chain_host_array(args);
    check(ws, host_array, p.batch);
    check_cuda_staged(backend::cuda_impl::verify_chain_batch_target_only(p, ws.data, cuda.stream),
                      "verify_chain_batch_target_only", host_array);
  }
};

template <>
struct ChainBatchSyntheticImpl<backend::Cuda> : StagedArraysWorkspace {
  /// Checked as verify_chain_batch_target_only's CUDA call; the rates travel as a kernel argument
  /// (at most kMaxSyntheticRates). A sequence longer than the rates, or with a token outside the
  /// vocabulary, gets accepted = -1 and only -1 tokens (status kChainTooLong, kTokenOutsideVocab).
  static void run(const backend::Cuda& cuda, const ChainBatchArgs& args,
                  std::span<const float> rates, const backend::DeviceWorkspace& ws) {
    using backend::cuda_impl::kMaxSyntheticRates;
    if (rates.size() > static_cast<std::size_t>(kMaxSyntheticRates)) {
      fail("synthetic_acceptance_rates", "has {} entries; the CUDA backend takes at most {}",
           rates.size(), kMaxSyntheticRates);
    }
    backend::cuda_impl::SyntheticRates device_rates;
    std::copy(rates.begin(), rates.end(), device_rates.value);
    device_rates.count = static_cast<std::int32_t>(rates.size());
    const auto p = chain_params<float>(
        args, check_chain_batch<backend::Cuda>(args, /*draft_rows=*/false), /*draft_rows=*/false);
    const std::string_view host_array = chain_host_array(args);
    check(ws, host_array, p.batch);
    check_cuda_staged(
        backend::cuda_impl::verify_chain_batch_synthetic(p, device_rates, ws.data, cuda.stream),
        "verify_chain_batch_synthetic", host_array);
  }
};

template <>
struct TreeBatchTargetOnlyImpl<backend::Cuda> : StagedArraysWorkspace {
  /// Shapes and offsets are checked on the host (check_tree_batch without draft rows, as on the
  /// CPU); device tokens, parents and rows are not scanned: they must be what the CPU backend
  /// accepts (level-ordered trees, probability rows). A tree with a token outside the vocabulary
  /// or a node of more than 256 children never has it used as an index: it gets accepted = -1 and
  /// final token -1. Offsets and streams on the device are read in place (not scanned); with both
  /// there the call needs no workspace.
  static void run(const backend::Cuda& cuda, const TreeBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const RaggedSizes sizes = check_tree_batch<backend::Cuda>(args, /*draft_rows=*/false);
    const auto p = tree_params(args, sizes, /*draft_rows=*/false);
    const std::string_view host_array = tree_host_array(args);
    check(ws, host_array, p.batch);
    check_cuda_staged(
        backend::cuda_impl::verify_tree_batch_target_only(p, ws.data, cuda.stream),
        "verify_tree_batch_target_only", host_array);
  }
};

}  // namespace specdec::detail

namespace specdec {

/// Zeroed counter words a CUDA chain batch of `shape` counts in when the caller gives them
/// (DeviceWorkspace::counters): from logits, two for each target and draft row; none otherwise.
inline std::size_t workspace_counters(const backend::Cuda&, const ChainBatchShape& shape) {
  if (!shape.from_logits || shape.batch < 0 || shape.max_gamma < 0) return 0;
  return backend::cuda_impl::row_counters(shape.batch + 2 * shape.batch * shape.max_gamma);
}

}  // namespace specdec
