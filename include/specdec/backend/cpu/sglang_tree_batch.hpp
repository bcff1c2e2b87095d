// SPDX-License-Identifier: MIT
// The CPU backend of SGLang's batched tree verification: sequences in parallel on the thread pool
// (for_each_sequence), each through verify/sglang_tree.hpp's walk.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/cpu/batch_loop.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/sglang_tree_batch.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/verify/sglang_tree.hpp"

namespace specdec::detail {

/// The host checks of an SGLang batch, and its retrive indices (each must index `predicts`, and
/// target_predict in the greedy walk) before any sequence is walked.
inline void check_sglang_batch(const sglang::TreeBatchArgs& args) {
  const std::int64_t batch = args.candidates.rows, slots = args.candidates.cols;
  if (slots < 1) fail("candidates", "has no columns; slot 0 (the root) is required");
  const MatrixShape tree_shape{
      .rows = batch, .formula = "B", .cols = slots, .cols_of = "candidates"};
  check_matrix("retrive_index", args.retrive_index, tree_shape);
  check_matrix("retrive_next_token", args.retrive_next_token, tree_shape);
  check_matrix("retrive_next_sibling", args.retrive_next_sibling, tree_shape);
  if (args.accept_index.cols < 1) {
    fail("accept_index", "has {} columns; expected >= 1", args.accept_index.cols);
  }
  check_matrix("accept_index", args.accept_index, {.rows = batch, .formula = "B"});
  check_matrix(
      "emitted", args.emitted,
      {.rows = batch, .formula = "B", .cols = args.accept_index.cols, .cols_of = "accept_index"});
  check_size("accept_token_num", args.accept_token_num.size(), static_cast<std::size_t>(batch));
  const bool greedy = args.target_probs.data == nullptr;
  std::int64_t limit = args.predicts_size;
  if (greedy) {
    if (args.target_predict.data() == nullptr)
      fail("target_probs", "is required (or target_predict)");
    limit = std::min<std::int64_t>(limit, static_cast<std::int64_t>(args.target_predict.size()));
  } else {
    check_matrix("target_probs", args.target_probs, {.rows = batch * slots, .formula = "B * N"});
    if (args.draft_probs.data != nullptr) {
      check_matrix("draft_probs", args.draft_probs,
                   {.rows = batch * slots,
                    .formula = "B * N",
                    .cols = args.target_probs.cols,
                    .cols_of = "target_probs"});
      if (args.draft_probs.stride != args.target_probs.stride) {
        fail("draft_probs", "has stride {}; expected target_probs' {}", args.draft_probs.stride,
             args.target_probs.stride);
      }
    }
    const bool coins = args.uniform_samples.data != nullptr;
    if (coins != !args.uniform_samples_for_final_sampling.empty()) {
      fail(coins ? "uniform_samples_for_final_sampling" : "uniform_samples",
           "must be given with the other uniform tensor, or both left empty");
    }
    if (coins) {
      check_matrix("uniform_samples", args.uniform_samples, tree_shape);
      check_size("uniform_samples_for_final_sampling",
                 args.uniform_samples_for_final_sampling.size(), static_cast<std::size_t>(batch));
    } else {
      check_size("streams", args.streams.size(), static_cast<std::size_t>(batch));
    }
    check_thresholds(args.thresholds);
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < slots; ++s) {
      const auto value = args.retrive_index(b, s);
      if (value < 0 || value >= limit) {
        fail(ArgName("retrive_index", b)[s], "{} is outside [0, {}): it indexes predicts{}", value,
             limit, greedy ? " and target_predict" : "");
      }
    }
  }
}

/// Sequence b of a checked batch as sglang::verify_tree's raw memory; its accepted slots go to
/// accept_index[b][1..] (mapped to retrive indices once walked).
inline SglangSequence sglang_batch_sequence(const sglang::TreeBatchArgs& args, std::int64_t b) {
  const std::int64_t slots = args.candidates.cols;
  const bool coins = args.uniform_samples.data != nullptr;
  const bool greedy = args.target_probs.data == nullptr;
  return {
      .sequence = b,
      .slots = static_cast<std::size_t>(slots),
      .candidates = args.candidates.row_data(b),
      .next_token = args.retrive_next_token.row_data(b),
      .next_sibling = args.retrive_next_sibling.row_data(b),
      .target = greedy ? nullptr : args.target_probs.row_data(b * slots),
      .draft = args.draft_probs.data == nullptr ? nullptr : args.draft_probs.row_data(b * slots),
      .vocab = greedy ? 0 : args.target_probs.cols,
      .stride = args.target_probs.stride,
      .predict = args.target_predict.data(),
      .predict_index = args.retrive_index.row_data(b),
      .thresholds = args.thresholds,
      .coins = coins ? args.uniform_samples.row_data(b) : nullptr,
      .final_uniform =
          coins ? args.uniform_samples_for_final_sampling[static_cast<std::size_t>(b)] : 0.5f,
      .stream = coins || greedy ? RandomStream{} : args.streams[static_cast<std::size_t>(b)],
      .max_accepted = static_cast<std::int32_t>(args.accept_index.cols - 1),
      .accepted_slots = args.accept_index.row_data(b) + 1,
      .emitted = args.emitted.row_data(b)};
}

template <>
struct SglangTreeBatchImpl<backend::Cpu> {
  static std::size_t workspace_size(const backend::Cpu& cpu, const sglang::TreeBatchShape& shape) {
    return sequence_loop_bytes(cpu, shape.batch,
                               sglang_tree_scratch_bytes(shape.slots, shape.vocab));
  }

  static void run(const backend::Cpu& cpu, const sglang::TreeBatchArgs& args, Workspace& ws) {
    check_sglang_batch(args);
    const std::int64_t steps = args.accept_index.cols;
    const bool greedy = args.target_probs.data == nullptr;
    const SequenceLoop loop{.batch = args.candidates.rows,
                            .scratch_bytes = sglang_tree_scratch_bytes(
                                args.candidates.cols, greedy ? 0 : args.target_probs.cols),
                            .name_sequence = false};
    for_each_sequence(cpu, ws, loop, [&](std::int64_t b, std::byte* bytes) {
      std::int32_t* accept_row = args.accept_index.row_data(b);
      Token* emitted_row = args.emitted.row_data(b);
      std::fill(accept_row, accept_row + steps, -1);
      std::fill(emitted_row, emitted_row + steps, kNoToken);
      const SglangSequence seq = sglang_batch_sequence(args, b);
      if (seq.coins != nullptr && !(seq.final_uniform >= 0.0f && seq.final_uniform <= 1.0f)) {
        fail(ArgName("uniform_samples_for_final_sampling", b), "{} is outside [0, 1]",
             seq.final_uniform);
      }
      ScratchBytes scratch{bytes};
      const TreeVerdict verdict = sglang_tree_sequence(seq, scratch);
      const std::int64_t* index = args.retrive_index.row_data(b);
      accept_row[0] = static_cast<std::int32_t>(index[0]);
      for (std::int32_t j = 1; j <= verdict.accepted; ++j) {
        accept_row[j] = static_cast<std::int32_t>(index[accept_row[j]]);
      }
      args.accept_token_num[static_cast<std::size_t>(b)] = verdict.accepted;
    });
  }
};

}  // namespace specdec::detail
