// SPDX-License-Identifier: MIT
// Batched verification: chain (standard rejection) and tree verification for B sequences, on any
// backend.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "specdec/backend/policy.hpp"
#include "specdec/backend/sequence_error.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/verify/rule.hpp"

namespace specdec {

/// The shape a batched chain verification is sized for: `batch` sequences of `gamma` draft tokens
/// over `vocab` tokens. `from_logits` = rows arrive as logits and are warped first.
struct ChainBatchShape {
  std::int64_t batch = 0;
  std::int64_t gamma = 0;
  std::int64_t vocab = 0;
  bool from_logits = false;
};

/// The shape a batched tree verification is sized for: `batch` trees of at most `max_nodes` nodes
/// each over `vocab` tokens.
struct TreeBatchShape {
  std::int64_t batch = 0;
  std::int64_t max_nodes = 0;
  std::int64_t vocab = 0;
};

namespace detail {

/// One specialisation per backend (backend/cpu/verify_batch.hpp, backend/cuda/verify_batch.hpp).
template <class Backend>
struct ChainBatchImpl {
  static_assert(dependent_false<Backend>,
                "verify_chain_batch: no implementation for this backend; include "
                "specdec/backend/cpu/verify_batch.hpp or specdec/backend/cuda/verify_batch.hpp");
};
template <class Backend>
struct TreeBatchImpl {
  static_assert(dependent_false<Backend>,
                "verify_tree_batch: no implementation for this backend; include "
                "specdec/backend/cpu/verify_batch.hpp or specdec/backend/cuda/verify_batch.hpp");
};

/// The shape checks every backend makes on the host for a chain batch.
inline void check_chain_batch(std::int64_t target_rows, std::int64_t target_cols,
                              std::int64_t target_stride, std::int64_t draft_rows,
                              std::int64_t draft_cols, std::int64_t draft_stride,
                              std::int64_t token_rows, std::int64_t token_cols,
                              std::int64_t token_stride, std::size_t streams,
                              std::int64_t emitted_rows, std::int64_t emitted_cols,
                              std::int64_t emitted_stride, std::size_t accepted,
                              std::string_view target_name, std::string_view draft_name) {
  const std::int64_t batch = token_rows;
  const std::int64_t gamma = token_cols;
  if (batch < 1) fail("draft_tokens", "has {} rows (sequences), expected at least 1", batch);
  if (gamma < 1) fail("draft_tokens", "has {} columns (gamma), expected at least 1", gamma);
  if (token_stride < gamma)
    fail("draft_tokens", "stride {} is smaller than its {} columns", token_stride, gamma);
  if (target_cols < 1) fail(target_name, "has {} columns, expected at least 1", target_cols);
  if (target_rows != batch * (gamma + 1)) {
    fail(target_name, "has {} rows, expected B * (gamma + 1) = {} * {} = {}", target_rows, batch,
         gamma + 1, batch * (gamma + 1));
  }
  if (target_stride < target_cols)
    fail(target_name, "stride {} is smaller than its {} columns", target_stride, target_cols);
  if (draft_rows != batch * gamma || draft_cols != target_cols) {
    fail(draft_name, "is {} x {}, expected B * gamma x V = {} x {}", draft_rows, draft_cols,
         batch * gamma, target_cols);
  }
  if (draft_stride < draft_cols)
    fail(draft_name, "stride {} is smaller than its {} columns", draft_stride, draft_cols);
  if (streams != static_cast<std::size_t>(batch))
    fail("streams", "has {} entries, expected one per sequence ({})", streams, batch);
  if (emitted_rows != batch || emitted_cols != gamma + 1) {
    fail("emitted", "is {} x {}, expected B x (gamma + 1) = {} x {}", emitted_rows, emitted_cols,
         batch, gamma + 1);
  }
  if (emitted_stride < emitted_cols)
    fail("emitted", "stride {} is smaller than its {} columns", emitted_stride, emitted_cols);
  if (accepted != static_cast<std::size_t>(batch))
    fail("accepted", "has {} entries, expected one per sequence ({})", accepted, batch);
}

/// The checks every backend makes on warps given per sequence (one shared, or one per sequence).
inline void check_sequence_warps(std::span<const Warp> warps, std::int64_t batch,
                                 std::int64_t vocab) {
  check_warp_list(warps, batch, vocab, "sequence");
}

/// Host checks of a tree batch's CSR offsets and shapes; returns the largest tree.
inline std::int64_t check_tree_batch(std::span<const std::int32_t> node_offsets, std::size_t tokens,
                                     std::size_t parents, std::int64_t target_rows,
                                     std::int64_t target_cols, std::int64_t draft_rows,
                                     std::int64_t draft_cols, std::size_t streams,
                                     std::size_t accepted_nodes, std::size_t accepted,
                                     std::size_t final_tokens, std::size_t bonus) {
  if (node_offsets.size() < 2)
    fail("node_offsets", "has {} entries, expected B + 1 >= 2", node_offsets.size());
  const auto batch = static_cast<std::int64_t>(node_offsets.size() - 1);
  if (node_offsets[0] != 0) fail("node_offsets[0]", "is {}, expected 0", node_offsets[0]);
  std::int64_t largest = 0;
  for (std::size_t b = 1; b < node_offsets.size(); ++b) {
    if (node_offsets[b] < node_offsets[b - 1]) {
      fail(fmt::format("node_offsets[{}]", b), "{} is smaller than node_offsets[{}] = {}",
           node_offsets[b], b - 1, node_offsets[b - 1]);
    }
    largest = std::max<std::int64_t>(largest, node_offsets[b] - node_offsets[b - 1]);
  }
  const auto total = static_cast<std::size_t>(node_offsets.back());
  check_size("tokens", tokens, total);
  check_size("parents", parents, total);
  if (target_cols < 1) fail("target_rows", "has {} columns, expected at least 1", target_cols);
  if (target_rows != static_cast<std::int64_t>(total) + batch) {
    fail("target_rows", "has {} rows, expected N + B = {} + {}", target_rows, total, batch);
  }
  if (draft_rows != target_rows || draft_cols != target_cols) {
    fail("draft_rows", "is {} x {}, expected {} x {} like target_rows", draft_rows, draft_cols,
         target_rows, target_cols);
  }
  if (streams != static_cast<std::size_t>(batch))
    fail("streams", "has {} entries, expected one per sequence ({})", streams, batch);
  check_size("accepted_nodes", accepted_nodes, total);
  check_size("accepted", accepted, static_cast<std::size_t>(batch));
  check_size("final_tokens", final_tokens, static_cast<std::size_t>(batch));
  if (bonus != 0) check_size("bonus", bonus, static_cast<std::size_t>(batch));
  return largest;
}

}  // namespace detail

/// Bytes of workspace a batched chain verification needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const ChainBatchShape& shape) {
  return detail::ChainBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Bytes of workspace a batched tree verification needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const TreeBatchShape& shape) {
  return detail::TreeBatchImpl<Backend>::workspace_size(backend, shape);
}

/// Chain verification with standard rejection sampling for B sequences of gamma draft tokens:
/// sequence b is verify_chain(Rejection{}, ...) of its rows, bit for bit on the CPU backend.
/// Layout (all rows warped fp32 probabilities, V = vocab columns, row-major):
///   target_rows:  B * (gamma + 1) rows; row b * (gamma + 1) + i = the target of sequence b at
///                 position i (after its first i draft tokens; row gamma gives the bonus token);
///   draft_rows:   B * gamma rows; row b * gamma + i = the row draft token i of b was drawn from;
///   draft_tokens: B x gamma;
///   streams:      one RandomStream per sequence (host memory);
///   emitted:      B x (gamma + 1): the accepted tokens, then the correction or bonus token, then
///                 -1 (kNoToken) padding;
///   accepted:     B accepted counts (0..gamma); sequence b emitted accepted[b] + 1 tokens.
/// Randomness: that of verify_chain per sequence (position i: draw 0 of
/// `streams[b].at_position(streams[b].position + i)` tests, draw 1 corrects; the bonus token is
/// draw 0 at position + gamma), so results depend neither on B nor on the backend.
/// Rows, tokens and outputs live where the backend computes; `streams` is host memory.
/// `workspace`: a specdec::Workspace (CPU) or a backend::DeviceWorkspace of at least
/// workspace_size(backend, ChainBatchShape{B, gamma, V}) bytes (CUDA).
/// Throws specdec::Error naming the bad argument ("draft_tokens[3][1]" = sequence 3, token 1;
/// the CPU backend checks every row and token, the CUDA backend shapes and parameters only).
/// The CPU backend needs contiguous rows (stride == V); CUDA takes any stride >= V.
template <backend::BackendPolicy Backend, class Scratch>
void verify_chain_batch(const Backend& backend, MatrixView<const float> target_rows,
                        MatrixView<const float> draft_rows, MatrixView<const Token> draft_tokens,
                        std::span<const RandomStream> streams, MatrixView<Token> emitted,
                        std::span<std::int32_t> accepted, Scratch&& workspace) {
  detail::ChainBatchImpl<Backend>::run(backend, target_rows, draft_rows, draft_tokens, streams,
                                       emitted, accepted, std::forward<Scratch>(workspace));
}

/// As verify_chain_batch, from raw logits (T = float, Eigen::half, Eigen::bfloat16; on CUDA the
/// same bits as __half / __nv_bfloat16) in the same layouts: each row is first warped as
/// warp_logits_batch warps it, with warps[b] (or warps[0] for every sequence) applied to both the
/// target and the draft rows of sequence b, then verified. The warped rows are never written back.
/// Size the workspace with ChainBatchShape{B, gamma, V, .from_logits = true}. Same draws.
template <backend::BackendPolicy Backend, class T, class Scratch>
void verify_chain_batch_logits(const Backend& backend, MatrixView<T> target_logits,
                               MatrixView<T> draft_logits, std::span<const Warp> warps,
                               MatrixView<const Token> draft_tokens,
                               std::span<const RandomStream> streams, MatrixView<Token> emitted,
                               std::span<std::int32_t> accepted, Scratch&& workspace) {
  using Value = std::remove_const_t<T>;
  detail::ChainBatchImpl<Backend>::template run_logits<Value>(
      backend,
      MatrixView<const Value>(target_logits.data, target_logits.rows, target_logits.cols,
                              target_logits.stride),
      MatrixView<const Value>(draft_logits.data, draft_logits.rows, draft_logits.cols,
                              draft_logits.stride),
      warps, draft_tokens, streams, emitted, accepted, std::forward<Scratch>(workspace));
}

/// Tree verification for B ragged trees in a CSR layout: sequence b is verify_tree(rule, ...) of
/// its tree, bit for bit on the CPU backend. `rule` is Recursive (RRS, trees drawn without
/// replacement), MultiRound (i.i.d. children), Rejection (one child per node) or any other Rule.
/// The CUDA backend takes Recursive, MultiRound and Rejection (one block per tree).
/// Layout (N = total nodes, N_b = node_offsets[b + 1] - node_offsets[b]):
///   node_offsets: B + 1 entries, node_offsets[0] = 0 (host memory);
///   tokens, parents: N entries; sequence b's nodes at node_offsets[b] .. node_offsets[b + 1],
///                 parents local to the tree (-1 = root, else an earlier node of the same tree);
///   target_rows, draft_rows: N + B warped rows; sequence b owns the N_b + 1 rows from
///                 node_offsets[b] + b, laid out as verify_tree's (root row first);
///   streams:      one RandomStream per sequence (host memory);
///   accepted_nodes: N entries, CSR with node_offsets: sequence b's accepted (local) node ids at
///                 node_offsets[b] .. node_offsets[b] + accepted[b] (the rest untouched);
///   accepted:     B counts; final_tokens: B correction or bonus tokens; bonus: B flags
///                 (1 = the walk ended at a leaf), or empty.
/// Randomness: verify_tree's per sequence (node n's children use streams[b].at_node(n + 1)).
template <backend::BackendPolicy Backend, class Scratch>
void verify_tree_batch(const Backend& backend, const Rule& rule,
                       std::span<const std::int32_t> node_offsets, std::span<const Token> tokens,
                       std::span<const std::int32_t> parents, MatrixView<const float> target_rows,
                       MatrixView<const float> draft_rows, std::span<const RandomStream> streams,
                       std::span<std::int32_t> accepted_nodes, std::span<std::int32_t> accepted,
                       std::span<Token> final_tokens, std::span<std::uint8_t> bonus,
                       Scratch&& workspace) {
  detail::TreeBatchImpl<Backend>::run(backend, rule, node_offsets, tokens, parents, target_rows,
                                      draft_rows, streams, accepted_nodes, accepted, final_tokens,
                                      bonus, std::forward<Scratch>(workspace));
}

}  // namespace specdec
