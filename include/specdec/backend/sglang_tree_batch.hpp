// SPDX-License-Identifier: MIT
// SGLang's tree verification for B sequences in sgl-kernel's own tensors (the batch form of
// verify/sglang_tree.hpp), on any backend that implements it (the CPU for now).
#pragma once

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/shapes.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/verify/target_only_lossy.hpp"

namespace specdec {

namespace sglang {

/// sgl-kernel's arguments for B sequences of N slots each (names as SGLang spells them; the
/// sequence's own layout is sglang::TreeArgs'):
///   candidates, retrive_index, retrive_next_token, retrive_next_sibling: B x N; retrive_index
///                  [b][s] is slot s's place in the caller's flat `predicts` of `predicts_size`;
///   target_probs:  B * N rows of V (sequence b's N rows from row b * N): the sampled walk, with
///                  `draft_probs` (empty or the same shape), `thresholds`, and `uniform_samples`
///                  (B x N) with `uniform_samples_for_final_sampling` (B), or both empty and
///                  `streams` (B);
///   target_predict: instead of target_probs, the greedy walk: the target's argmax after slot s
///                  of sequence b at target_predict[retrive_index[b][s]] (B * N entries);
///   accept_index:  B x S (S = the most accepted nodes + 1): the retrive index of the root and
///                  of each accepted node, then -1;
///   emitted:       B x S: the token that goes to predicts[accept_index[b][j]], then -1;
///   accept_token_num: B accepted counts.
struct TreeBatchArgs {
  MatrixView<const std::int64_t> candidates{};
  MatrixView<const std::int64_t> retrive_index{};
  MatrixView<const std::int64_t> retrive_next_token{};
  MatrixView<const std::int64_t> retrive_next_sibling{};
  std::int64_t predicts_size = 0;
  MatrixView<const float> target_probs{};
  MatrixView<const float> draft_probs{};
  std::span<const std::int64_t> target_predict{};
  AcceptanceThresholds thresholds{};
  MatrixView<const float> uniform_samples{};
  std::span<const float> uniform_samples_for_final_sampling{};
  std::span<const RandomStream> streams{};
  MatrixView<std::int32_t> accept_index{};
  MatrixView<Token> emitted{};
  std::span<std::int32_t> accept_token_num{};
};

}  // namespace sglang

namespace detail {

/// One specialisation per backend (backend/cpu/sglang_tree_batch.hpp).
template <class Backend>
struct SglangTreeBatchImpl : NoBackendImpl<Backend> {};

}  // namespace detail

/// Bytes of workspace a batched SGLang verification needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const sglang::TreeBatchShape& shape) {
  return detail::SglangTreeBatchImpl<Backend>::workspace_size(backend, shape);
}

/// SGLang's tree verification of B sequences (layout: sglang::TreeBatchArgs): sequence b is
/// sglang::verify_tree of its slots with streams[b] (or its uniforms), bit for bit. Throws
/// specdec::Error naming the bad argument ("retrive_next_token[1][4]" = sequence 1, slot 4):
/// shapes, retrive indices outside predicts (and target_predict), and what sglang::verify_tree
/// refuses. The rows must be contiguous within a sequence's N rows (any stride >= V).
namespace sglang {

template <backend::BackendPolicy Backend, class Scratch>
void verify_tree_batch(const Backend& backend, const sglang::TreeBatchArgs& args,
                       Scratch&& workspace) {
  detail::SglangTreeBatchImpl<Backend>::run(backend, args, std::forward<Scratch>(workspace));
}

}  // namespace sglang

}  // namespace specdec
