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
#include "specdec/backend/verify_batch.hpp"

namespace specdec::detail {

template <>
struct ChainBatchImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and streams; from logits also the warps, the statistics of
  /// every row and two warped rows per sequence.
  static std::size_t workspace_size(const backend::Cuda&, const ChainBatchShape& shape) {
    return shape.from_logits ? backend::cuda_impl::chain_logits_workspace_size(
                                   shape.batch, shape.max_gamma, shape.vocab)
                             : backend::cuda_impl::chain_workspace_size(shape.batch);
  }

  /// The host checks of a chain batch (ChainBatchArgs or ChainBatchLogitsArgs<T>, whose rows are
  /// `target` and `draft`) and of the device pointers the kernel needs; returns the launcher's
  /// views.
  template <class T, class Args>
  static backend::cuda_impl::ChainVerifyParams params(const Args& args, MatrixView<const T> target,
                                                      MatrixView<const T> draft,
                                                      std::string_view target_name,
                                                      std::string_view draft_name) {
    check_chain_batch<T>(args.draft_offsets, target, draft, args.draft_tokens.size(),
                         args.streams.size(), args.emitted.size(), args.accepted.size(),
                         target_name, draft_name);
    const auto& draft_offsets = args.draft_offsets;
    const auto& draft_tokens = args.draft_tokens;
    const auto& streams = args.streams;
    const auto& emitted = args.emitted;
    const auto& accepted = args.accepted;
    if (target.cols > INT_MAX)
      fail(target_name, "has {} columns, at most {} are supported", target.cols, INT_MAX);
    if (target.data == nullptr) fail(target_name, "is a null device pointer");
    if (!draft_tokens.empty()) {
      if (draft.data == nullptr) fail(draft_name, "is a null device pointer");
      if (draft_tokens.data() == nullptr) fail("draft_tokens", "is a null device pointer");
    }
    if (emitted.data() == nullptr) fail("emitted", "is a null device pointer");
    if (accepted.data() == nullptr) fail("accepted", "is a null device pointer");
    return {
        target.data,    target.stride,        draft.data,
        draft.stride,   device_dtype<T>(),    static_cast<std::int64_t>(draft_offsets.size() - 1),
        target.cols,    draft_offsets.data(), draft_tokens.data(),
        streams.data(), emitted.data(),       accepted.data()};
  }

  /// Device rows are not scanned: they must be probability rows, and every draft token must lie
  /// in the vocabulary with positive draft probability (what the CPU backend checks). A sequence
  /// breaking the token rule (a token outside the vocabulary, or one of draft probability 0 at a
  /// tested position) is never read past its rows nor accepted: it gets accepted = -1 and only
  /// -1 tokens.
  static void run(const backend::Cuda& cuda, const ChainBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const bool on_device = resident(args);
    const auto p = on_device ? resident_params<float>(args, args.target_rows, args.draft_rows,
                                                      "target_rows", "draft_rows")
                             : params<float>(args, args.target_rows, args.draft_rows,
                                             "target_rows", "draft_rows");
    check_device_workspace(ws, workspace_size(cuda, {.batch = p.batch, .vocab = p.vocab}));
    check_cuda_staged(backend::cuda_impl::verify_chain_batch(p, ws.data, cuda.stream),
                      "verify_chain_batch", !on_device, "draft_offsets",
                      "device_draft_offsets and device_streams");
  }

  /// The host checks of a graph-safe chain batch (device_draft_offsets and device_streams set;
  /// ChainBatchArgs or ChainBatchLogitsArgs<T>, whose rows are `target` and `draft`, draft rows
  /// optional for target-only verification): B = accepted.size(), G = draft_tokens.size();
  /// returns the launcher's views.
  template <class T, class Args>
  static backend::cuda_impl::ChainVerifyParams resident_params(
      const Args& args, MatrixView<const T> target, MatrixView<const T> draft,
      std::string_view target_name, std::string_view draft_name, bool draft_rows = true) {
    if (args.device_draft_offsets == nullptr)
      fail("device_draft_offsets", "is null while device_streams is set: give both");
    if (args.device_streams == nullptr)
      fail("device_streams", "is null while device_draft_offsets is set: give both");
    const auto batch = static_cast<std::int64_t>(args.accepted.size());
    const auto drafts = static_cast<std::int64_t>(args.draft_tokens.size());
    if (batch < 1) fail("accepted", "is empty: with device_draft_offsets it holds the B >= 1 counts");
    check_rows(target_name, target.rows, target.cols, target.stride, drafts + batch, "G + B");
    if (draft_rows) {
      check_rows(draft_name, draft.rows, draft.cols, draft.stride, drafts, "G");
      if (draft.cols != target.cols) {
        fail(draft_name, "has {} columns, expected {} like {}", draft.cols, target.cols,
             target_name);
      }
    } else if (draft.rows != 0 || draft.data != nullptr) {
      fail(draft_name, "has {} rows; target-only verification reads none: leave it empty",
           draft.rows);
    }
    check_size("emitted", args.emitted.size(), static_cast<std::size_t>(drafts + batch));
    if (target.cols > INT_MAX)
      fail(target_name, "has {} columns, at most {} are supported", target.cols, INT_MAX);
    if (target.data == nullptr) fail(target_name, "is a null device pointer");
    if (drafts > 0) {
      if (draft_rows && draft.data == nullptr) fail(draft_name, "is a null device pointer");
      if (args.draft_tokens.data() == nullptr) fail("draft_tokens", "is a null device pointer");
    }
    if (args.emitted.data() == nullptr) fail("emitted", "is a null device pointer");
    if (args.accepted.data() == nullptr) fail("accepted", "is a null device pointer");
    backend::cuda_impl::ChainVerifyParams p{
        target.data,       target.stride, draft.data,  draft.stride,
        device_dtype<T>(), batch,         target.cols, nullptr,
        args.draft_tokens.data(), nullptr, args.emitted.data(), args.accepted.data()};
    p.device_draft_offsets = args.device_draft_offsets;
    p.device_streams = args.device_streams;
    p.drafts = drafts;
    return p;
  }

  /// Whether a chain batch's offsets and streams are device-resident.
  template <class Args>
  static bool resident(const Args& args) {
    return args.device_draft_offsets != nullptr || args.device_streams != nullptr;
  }

  /// Device logits are not scanned: rows must hold no NaN or +inf and at least one finite value.
  template <class T>
  static void run_logits(const backend::Cuda& cuda, const ChainBatchLogitsArgs<T>& args,
                         const backend::DeviceWorkspace& ws) {
    const bool on_device = resident(args);
    const auto p = on_device ? resident_params<T>(args, args.target_logits, args.draft_logits,
                                                  "target_logits", "draft_logits")
                             : params<T>(args, args.target_logits, args.draft_logits,
                                         "target_logits", "draft_logits");
    // Device warps are checked where the kernels read them (a bad one fails its sequence).
    const bool device_warps = args.device_warps != nullptr;
    if (!device_warps) check_sequence_warps(args.warps, p.batch, p.vocab);
    const std::int64_t drafts = on_device ? p.drafts : args.draft_offsets.back();
    check_device_workspace(ws, backend::cuda_impl::chain_logits_workspace_bytes(p.batch, drafts,
                                                                                p.vocab));
    const auto* warps = reinterpret_cast<const backend::cuda_impl::DeviceWarp*>(
        device_warps ? args.device_warps : args.warps.data());
    check_cuda_staged(backend::cuda_impl::verify_chain_batch_logits(
                          p, warps, device_warps ? -p.batch : static_cast<std::int64_t>(args.warps.size()),
                          ws.data, cuda.stream),
                      "verify_chain_batch_logits",
                      !on_device || (!device_warps && args.warps.size() > 1),
                      on_device ? "warps" : "draft_offsets",
                      on_device ? "one warp for every sequence, or device_warps"
                                : "device_draft_offsets and device_streams");
  }
};

/// The device pointer checks of a tree batch and the launcher's views (target-only: no draft).
inline backend::cuda_impl::TreeVerifyParams tree_params(const TreeBatchArgs& args,
                                                        std::int64_t largest, bool draft_rows) {
  const TreeBatchSizes sizes = tree_batch_sizes(args);
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
  return {.host_node_offsets = args.node_offsets.data(),
          .batch = sizes.batch,
          .max_nodes = largest,
          .tokens = args.trees.tokens.data(),
          .parents = args.trees.parents.data(),
          .target = target.data,
          .target_stride = target.stride,
          .draft = draft_rows ? draft.data : nullptr,
          .draft_stride = draft_rows ? draft.stride : 0,
          .vocab = target.cols,
          .host_streams = args.streams.data(),
          .accepted_nodes = args.accepted_nodes.data(),
          .accepted = args.accepted.data(),
          .final_tokens = args.final_tokens.data(),
          .bonus = args.bonus.empty() ? nullptr : args.bonus.data(),
          .device_node_offsets = args.device_offsets,
          .device_streams = args.device_streams};
}

/// check_cuda for a tree batch call: a capture refusing its host offsets or streams is a
/// specdec::Error naming the host array to move to the device.
inline void check_tree_call(cudaError_t code, std::string_view call, const TreeBatchArgs& args) {
  const bool offsets_staged = args.device_offsets == nullptr;
  check_cuda_staged(code, call, offsets_staged || args.device_streams == nullptr,
                    offsets_staged ? "node_offsets" : "streams",
                    "device_offsets and device_streams");
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
  /// fault or hang: a child whose token lies outside the vocabulary is never accepted.
  /// Rejection runs the multi-round rule (identical for one child per node). With
  /// device_offsets the workspace is checked against ceil(N / B) nodes per tree (any largest
  /// tree is at least that) and device offsets are not scanned: wrong ones read wrong rows.
  static void run(const backend::Cuda& cuda, const Rule& rule, const TreeBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    using backend::cuda_impl::TreeRule;
    const std::int64_t largest = check_tree_batch(args);
    if (!std::holds_alternative<Recursive>(rule) && !std::holds_alternative<MultiRound>(rule) &&
        !std::holds_alternative<Rejection>(rule)) {
      fail("rule",
           "the CUDA backend verifies trees with Recursive, MultiRound or Rejection "
           "(the CPU backend takes every rule)");
    }
    const TreeRule node_rule =
        std::holds_alternative<Recursive>(rule) ? TreeRule::kRecursive : TreeRule::kMultiRound;
    const auto p = tree_params(args, largest, /*draft_rows=*/true);
    check_device_workspace(ws, workspace_size(cuda, {p.batch, largest, p.vocab}));
    check_tree_call(backend::cuda_impl::verify_tree_batch(node_rule, p, ws.data, cuda.stream),
                    "verify_tree_batch", args);
  }
};

template <>
struct ChainBatchTargetOnlyImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and streams (verify_chain_batch's).
  static std::size_t workspace_size(const backend::Cuda&, const ChainBatchShape& shape) {
    return backend::cuda_impl::chain_workspace_size(shape.batch);
  }

  /// Shapes and offsets are checked on the host (check_chain_batch_target_only, as on the CPU);
  /// device rows and tokens are not scanned. A sequence with a draft token outside the vocabulary
  /// (which the CPU backend rejects) never has it used as an index: it gets accepted = -1 and
  /// only -1 tokens.
  static void run(const backend::Cuda& cuda, const ChainBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const bool on_device = ChainBatchImpl<backend::Cuda>::resident(args);
    backend::cuda_impl::ChainVerifyParams p{};
    if (on_device) {
      p = ChainBatchImpl<backend::Cuda>::resident_params<float>(
          args, args.target_rows, args.draft_rows, "target_rows", "draft_rows", false);
    } else {
      check_chain_batch_target_only(args);
      const auto& target = args.target_rows;
      if (target.data == nullptr) fail("target_rows", "is a null device pointer");
      if (!args.draft_tokens.empty() && args.draft_tokens.data() == nullptr)
        fail("draft_tokens", "is a null device pointer");
      if (args.emitted.data() == nullptr) fail("emitted", "is a null device pointer");
      if (args.accepted.data() == nullptr) fail("accepted", "is a null device pointer");
      p = {target.data,
           target.stride,
           nullptr,
           0,
           backend::cuda_impl::DType::kF32,
           static_cast<std::int64_t>(args.draft_offsets.size() - 1),
           target.cols,
           args.draft_offsets.data(),
           args.draft_tokens.data(),
           args.streams.data(),
           args.emitted.data(),
           args.accepted.data()};
    }
    // With both device arrays nothing is staged: no workspace is needed.
    check_device_workspace(ws, on_device ? 0 : backend::cuda_impl::chain_workspace_size(p.batch));
    check_cuda_staged(backend::cuda_impl::verify_chain_batch_target_only(p, ws.data, cuda.stream),
                      "verify_chain_batch_target_only", !on_device, "draft_offsets",
                      "device_draft_offsets and device_streams");
  }
};

template <>
struct TreeBatchTargetOnlyImpl<backend::Cuda> {
  /// Device bytes: the staged offsets and streams (less than verify_tree_batch's).
  static std::size_t workspace_size(const backend::Cuda&, const TreeBatchShape& shape) {
    return backend::cuda_impl::chain_workspace_size(shape.batch);
  }

  /// Shapes and offsets are checked on the host (check_tree_batch without draft rows, as on the
  /// CPU); device tokens, parents and rows are not scanned: they must be what the CPU backend
  /// accepts (level-ordered trees, probability rows). A tree with a token outside the vocabulary
  /// or a node of more than 256 children never has it used as an index: it gets accepted = -1 and
  /// final token -1. device_offsets and device_streams are read in place (not scanned); with both
  /// the call needs no workspace.
  static void run(const backend::Cuda& cuda, const TreeBatchArgs& args,
                  const backend::DeviceWorkspace& ws) {
    const std::int64_t largest = check_tree_batch(args, /*draft_rows=*/false);
    const auto p = tree_params(args, largest, /*draft_rows=*/false);
    const bool staged = args.device_offsets == nullptr || args.device_streams == nullptr;
    check_device_workspace(ws, staged ? backend::cuda_impl::chain_workspace_size(p.batch) : 0);
    check_tree_call(backend::cuda_impl::verify_tree_batch_target_only(p, ws.data, cuda.stream),
                    "verify_tree_batch_target_only", args);
  }
};

}  // namespace specdec::detail
