// SPDX-License-Identifier: MIT
// Launcher declarations of the CUDA backend: non-template functions over concrete types, compiled
// by nvcc into specdec::cuda and callable from any host compiler. They do not validate (the entry
// points in backend/cuda/*.hpp do), enqueue on `stream`, and return the launch status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/backend/resident.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/draft/drafting_rows.hpp"

namespace specdec::backend::cuda_impl {

/// Element type of a device logits matrix: fp16 and bf16 share the bits of Eigen::half / __half
/// and Eigen::bfloat16 / __nv_bfloat16.
enum class DType : int { kF32 = 0, kF16 = 1, kBF16 = 2 };

/// The device copy of specdec::Warp (same layout; backend/cuda/warp_batch.hpp asserts it).
struct DeviceWarp {
  float temperature;
  std::int32_t top_k;
  float top_p;
  float min_p;
};

/// Threads per block of the warp kernel (one block per row).
inline constexpr int kWarpThreads = 512;
/// Alignment of every buffer carved from a device workspace.
inline constexpr std::size_t kDeviceAlignment = 256;

constexpr std::size_t device_round_up(std::size_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

/// The views of one batched warp (the layout of specdec::warp_logits_batch, strides in elements):
/// device logits and warped rows, host or device warps.
struct WarpBatchParams {
  const void* logits;  // rows x cols of `dtype`
  DType dtype;
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t logits_stride;
  float* warped;  // rows x cols
  std::int64_t warped_stride;
  Resident<const DeviceWarp> warps;  // 1 (every row) or rows
  unsigned int* counters = nullptr;  // row_counters(rows) zeroed words, or null: zeroed here
};

/// One host warp is passed as a kernel argument; `rows` host warps are first copied into the
/// workspace with cudaMemcpyAsync on `stream`; warps on the device are read in place (the
/// statistics path and its cut launch; a row whose warp that path does not take is written as
/// NaN). Warps the statistics path takes (statistics_warp: all but a top-k above kStatisticsTopK;
/// decided from the host warps) take it: the
/// call zeroes the row counters (cudaMemsetAsync; not params.counters, the caller's zeroed
/// ones), row_stats_kernel splits the rows over blocks,
/// nucleus_kernel cuts the rows by top-p, top-k and min-p, then a write pass with the same split
/// writes every entry once, the CPU's bits. A larger top-k: one block per row.
/// The workspace holds warp_workspace_size(rows, cols) bytes.
cudaError_t warp_logits_batch(const WarpBatchParams& params, void* workspace, cudaStream_t stream);

/// The views of one fill_random call: host or device streams (one per row), a device output.
struct FillRandomParams {
  Resident<const RandomStream> streams;
  std::uint32_t first;  // the first draw of every stream
  std::int64_t count;   // draws per stream
  float* out;           // streams.size() rows, out_stride floats apart
  std::int64_t out_stride;
  RandomKind kind;
};

/// Copies host streams into the workspace (streams on the device are read in place and the
/// workspace is not touched), then fills out[s * out_stride + i] =
/// streams[s].uniform(first + i) (kUniform) or .gumbel(first + i) (kGumbel) for i < count.
cudaError_t fill_random(const FillRandomParams& params, void* workspace, cudaStream_t stream);

/// Device bytes verify_chain_batch needs: the staged B + 1 offsets and B streams.
constexpr std::size_t chain_workspace_size(std::int64_t batch) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  return device_round_up((b + 1) * sizeof(std::int32_t)) +
         device_round_up(b * sizeof(RandomStream));
}

/// Candidates of a row's nucleus the statistics path orders on the device (more fall back to a
/// search over the row).
inline constexpr std::int64_t kNucleusListSize = 4096;
/// The largest top-k the statistics path takes (a larger one runs on one block per row): each
/// block of a row keeps its best k in the row's candidate list.
inline constexpr std::int64_t kStatisticsTopK = 1024;
/// Buckets of a row's histogram of its nucleus candidates (their masses and counts): where the
/// list overflows, it says how low the cut lies, so the candidates are gathered again above it.
inline constexpr std::int64_t kNucleusBuckets = 64;

/// Device bytes of the statistics of `rows` rows of `vocab` logits split over blocks: a TileStats
/// (16 bytes) per 1024-entry tile; per row three counters, a RowStats (48 bytes), the gate of its
/// nucleus candidates, a list of kNucleusListSize candidate keys and their histogram
/// (kNucleusBuckets masses and counts).
constexpr std::size_t row_stats_workspace_size(std::int64_t rows, std::int64_t vocab) {
  const auto r = static_cast<std::size_t>(rows < 0 ? 0 : rows);
  const auto tiles = static_cast<std::size_t>(vocab < 1 ? 1 : (vocab + 1023) / 1024);
  const auto buckets = static_cast<std::size_t>(kNucleusBuckets);
  return device_round_up(r * tiles * 16) + device_round_up(3 * r * sizeof(unsigned int)) +
         device_round_up(r * 48) + device_round_up(r * sizeof(float)) +
         device_round_up(r * static_cast<std::size_t>(kNucleusListSize) * sizeof(std::uint64_t)) +
         device_round_up(r * buckets * sizeof(std::uint64_t)) +
         device_round_up(r * buckets * sizeof(unsigned int));
}

/// Block counters the statistics path of `rows` rows counts in (the statistics' and the cut's,
/// a word each a row), the words a caller's zeroed counters need (DeviceWorkspace::counters).
constexpr std::size_t row_counters(std::int64_t rows) {
  return 2 * static_cast<std::size_t>(rows < 0 ? 0 : rows);
}

/// Device bytes warp_logits_batch needs for `rows` rows of `vocab` logits: the staged per-row
/// warps, then the rows' statistics (row_stats_workspace_size). Needs no initialisation.
constexpr std::size_t warp_workspace_size(std::int64_t rows, std::int64_t vocab) {
  const auto r = static_cast<std::size_t>(rows < 0 ? 0 : rows);
  return device_round_up(r * sizeof(DeviceWarp)) + row_stats_workspace_size(rows, vocab);
}

/// Device bytes verify_chain_batch_logits needs for B sequences of G drafts in all:
/// chain_workspace_size's, the staged per-sequence warps, the statistics of every row, and (for
/// warps that cut: top-k, top-p, min-p) two warped rows per sequence.
constexpr std::size_t chain_logits_workspace_bytes(std::int64_t batch, std::int64_t drafts,
                                                   std::int64_t vocab) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  const auto v = static_cast<std::size_t>(vocab < 0 ? 0 : vocab);
  return chain_workspace_size(batch) + device_round_up(b * sizeof(DeviceWarp)) +
         row_stats_workspace_size((batch < 0 ? 0 : batch) + 2 * (drafts < 0 ? 0 : drafts), vocab) +
         device_round_up(b * 2 * v * sizeof(float));
}

/// chain_logits_workspace_bytes for B sequences of at most max_gamma drafts each.
constexpr std::size_t chain_logits_workspace_size(std::int64_t batch, std::int64_t max_gamma,
                                                  std::int64_t vocab) {
  return chain_logits_workspace_bytes(batch, (batch < 0 ? 0 : batch) * (max_gamma < 0 ? 0 : max_gamma),
                                      vocab);
}

/// The views of one ragged chain batch (the layout of specdec::ChainBatchArgs, strides in
/// elements): device rows, tokens and outputs; host or device offsets, streams and warps (read in
/// place on the device, nothing staged: a graph-safe call).
struct ChainVerifyParams {
  const void* target;  // G + B rows: fp32 probabilities, or logits of `dtype`
  std::int64_t target_stride;
  const void* draft;  // G rows
  std::int64_t draft_stride;
  DType dtype;
  std::int64_t batch;
  std::int64_t vocab;
  std::int64_t drafts;                         // G
  Resident<const std::int32_t> draft_offsets;  // B + 1
  const std::int32_t* draft_tokens;            // G
  Resident<const RandomStream> streams;        // B
  std::int32_t* emitted;                       // G + B
  std::int32_t* accepted;                      // B
  Resident<const DeviceWarp> warps = {};       // logits only: 1 (every sequence) or B
  std::int32_t* status = nullptr;              // B + 1 (backend/status.hpp), or null
  unsigned int* counters = nullptr;  // logits: row_counters(G + B + G) zeroed words, or null
};

/// Copies the B + 1 host offsets and B host streams into the workspace, then launches one block
/// per sequence over fp32 warped rows (dtype kF32).
cudaError_t verify_chain_batch(const ChainVerifyParams& params, void* workspace,
                               cudaStream_t stream);

/// As verify_chain_batch over logits of `dtype` warped with params.warps: one shared host warp,
/// B host warps (also copied into the workspace), or B warps on the device (read in place, the
/// statistics path, a sequence whose warp it does not take failed with accepted = -1). Warps the
/// statistics path takes (statistics_warp: all but a top-k above kStatisticsTopK) take two
/// launches, three with a cut: the statistics of every row, split over blocks, the cuts, then one
/// block per sequence drawing from rows recomputed from the logits or from a cut row's listed
/// entries, the CPU's tokens bit for bit; its counters are zeroed by a memset first unless they
/// are the caller's zeroed ones (params.counters), and the status buffer's failure count by the
/// statistics launch. Other warps are warped row by row into the workspace by
/// one block per sequence.
cudaError_t verify_chain_batch_logits(const ChainVerifyParams& params, void* workspace,
                                      cudaStream_t stream);

/// Device bytes verify_tree_batch needs: the staged offsets and streams and 2 * max_nodes ints
/// per tree (room for 2 N: candidate tokens and node ids, tree b's at 2 offsets[b]).
constexpr std::size_t tree_workspace_size(std::int64_t batch, std::int64_t max_nodes,
                                          std::int64_t vocab) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  const auto m = static_cast<std::size_t>(max_nodes < 0 ? 0 : max_nodes);
  (void)vocab;  // the residual rows are recomputed, never written
  return device_round_up((b + 1) * sizeof(std::int32_t)) +
         device_round_up(b * sizeof(RandomStream)) +
         device_round_up(b * 2 * m * sizeof(std::int32_t));
}

/// The node rule of the tree kernel: Recursive (RRS) or MultiRound (also Rejection's, identical
/// for one child per node).
enum class TreeRule : int { kRecursive = 0, kMultiRound = 1 };

/// The views of one tree batch (the layout of specdec::TreeBatchArgs, strides in elements):
/// device nodes, rows and outputs; host or device offsets and streams.
struct TreeVerifyParams {
  Resident<const std::int32_t> node_offsets;  // B + 1
  std::int64_t batch;
  std::int64_t max_nodes;       // the largest tree
  const std::int32_t* tokens;   // N
  const std::int32_t* parents;  // N
  const float* target;          // N + B rows
  std::int64_t target_stride;
  const float* draft;  // N + B rows
  std::int64_t draft_stride;
  std::int64_t vocab;
  Resident<const RandomStream> streams;  // B
  std::int32_t* accepted_nodes;          // N
  std::int32_t* accepted;                // B
  std::int32_t* final_tokens;            // B
  std::uint8_t* bonus;                   // B, or null
  std::int32_t* status = nullptr;        // B + 1 (backend/status.hpp), or null
};

/// Copies the B + 1 host offsets and B host streams into the workspace (each unless it is on the
/// device: a call with both there copies nothing and can be captured in a graph), then launches
/// one block per tree with `rule` over fp32 warped rows. max_nodes: at least ceil(N / B).
cudaError_t verify_tree_batch(TreeRule rule, const TreeVerifyParams& params, void* workspace,
                              cudaStream_t stream);

/// Target-only verification (drafts without draft rows; params.draft unused): copies the B + 1
/// host offsets and B host streams into the workspace (chain_workspace_size(B) bytes), then
/// launches one block per sequence over fp32 warped target rows.
cudaError_t verify_chain_batch_target_only(const ChainVerifyParams& params, void* workspace,
                                           cudaStream_t stream);

/// As verify_chain_batch_target_only for trees (TreeVerifyParams, draft unused): the same
/// chain_workspace_size(B) bytes of staged offsets and streams (arrays on the device are read in
/// place, as verify_tree_batch's), one block per tree.
cudaError_t verify_tree_batch_target_only(const TreeVerifyParams& params, void* workspace,
                                          cudaStream_t stream);

/// Positions vLLM's synthetic rule takes rates for on the CUDA backend (a kernel argument).
inline constexpr int kMaxSyntheticRates = 64;

/// The acceptance rates of verify_chain_batch_synthetic: value[i] for draft position i < count.
struct SyntheticRates {
  float value[kMaxSyntheticRates] = {};
  std::int32_t count = 0;
};

/// vLLM's synthetic rule (verify/synthetic.hpp) for a chain batch without draft rows (params.draft
/// unused), staged and launched as verify_chain_batch_target_only: position i accepted with
/// probability rates.value[i]; a sequence longer than rates.count fails (kChainTooLong).
cudaError_t verify_chain_batch_synthetic(const ChainVerifyParams& params,
                                         const SyntheticRates& rates, void* workspace,
                                         cudaStream_t stream);

/// Largest k of gumbel_top_k_batch and largest beam width of stochastic_beam_level_batch on the
/// CUDA backend: each block keeps its best k in shared memory.
inline constexpr std::int64_t kMaxDeviceTopK = 1024;

/// The most SMs a row split's workspace is sized for: launchers split rows as row_split does for
/// min(the device's SMs, this), never into more blocks per row than the workspace holds lists for.
inline constexpr int kMaxSplitSms = 256;

/// Device bytes of the per-block top-k lists of `rows` rows of `vocab` entries split as
/// row_split(rows, vocab, sm_count): k values and k token ids and a count per block, a finished-
/// block counter per row.
constexpr std::size_t top_k_lists_size(std::int64_t rows, std::int64_t vocab, std::int64_t k,
                                       int sm_count) {
  const auto r = static_cast<std::size_t>(rows < 0 ? 0 : rows);
  const auto kk = static_cast<std::size_t>(k < 0 ? 0 : k);
  const auto blocks =
      r * static_cast<std::size_t>(row_split(rows, vocab < 1 ? 1 : vocab, sm_count).blocks_per_row);
  return 2 * device_round_up(blocks * kk * 4) + device_round_up(blocks * sizeof(std::int32_t)) +
         device_round_up(r * sizeof(unsigned int));
}

/// Device bytes gumbel_top_k_batch needs for k samples: the staged streams and the per-block
/// lists of the row split (O(k) per block; no perturbed row). The call zeroes the list counters
/// itself (cudaMemsetAsync) unless given the caller's zeroed ones, so the workspace needs no
/// initialisation.
constexpr std::size_t gumbel_batch_workspace_size(std::int64_t rows, std::int64_t vocab,
                                                  std::int64_t k) {
  const auto r = static_cast<std::size_t>(rows < 0 ? 0 : rows);
  return device_round_up(r * sizeof(RandomStream)) +
         top_k_lists_size(rows, vocab, k, kMaxSplitSms);
}

/// The views of one batched Gumbel-top-k (the layout of specdec::GumbelTopKBatchArgs, strides in
/// elements): device rows and outputs, host streams.
struct GumbelTopKParams {
  const void* rows;  // row_count rows of `vocab` entries of `dtype`
  DType dtype;
  RowKind kind;
  std::int64_t row_count;
  std::int64_t vocab;
  std::int64_t row_stride;
  std::int64_t k;
  Resident<const RandomStream> streams;  // row_count
  std::int32_t* tokens;                  // row_count x k
  std::int64_t token_stride;
  float* values;  // row_count x k, or null
  std::int64_t value_stride;
  std::int32_t* counts;              // row_count
  unsigned int* counters = nullptr;  // row_count zeroed words, or null: zeroed here
};

/// Copies host streams into the workspace (none on the device), zeroes the list
/// counters (not the caller's zeroed ones, params.counters), then launches a row split (row_split
/// over the device's SMs, at most kMaxSplitSms): Gumbel-top-k of row r, read as `kind` says, with
/// streams[r], in one read of the row.
cudaError_t gumbel_top_k_batch(const GumbelTopKParams& params, void* workspace,
                               cudaStream_t stream);

/// The device matrices of one stochastic beam level (B sequences, beam width W), with their row
/// strides in elements.
struct BeamLevelArgs {
  const float* draft_rows;  // [B W, V]
  std::int64_t draft_stride;
  const std::int32_t* beam_counts;  // [B]
  const std::int32_t* nodes;        // [B, W]
  std::int64_t nodes_stride;
  const float* log_probs;  // [B, W]
  std::int64_t log_probs_stride;
  const float* scores;  // [B, W]
  std::int64_t scores_stride;
  std::int32_t* next_parents;  // [B, W]
  std::int64_t next_parents_stride;
  std::int32_t* next_tokens;  // [B, W]
  std::int64_t next_tokens_stride;
  float* next_log_probs;  // [B, W]
  std::int64_t next_log_probs_stride;
  float* next_scores;  // [B, W]
  std::int64_t next_scores_stride;
  std::int32_t* next_counts;  // [B]
};

/// Device bytes stochastic_beam_level_batch needs: the staged streams, W candidates and a child
/// count per beam, and the per-block top-W lists of the beams' row split (no perturbed row).
constexpr std::size_t beam_level_workspace_size(std::int64_t batch, std::int64_t width,
                                                std::int64_t vocab) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  const auto w = static_cast<std::size_t>(width < 0 ? 0 : width);
  return device_round_up(b * sizeof(RandomStream)) +
         device_round_up(b * w * w * sizeof(specdec::detail::BeamCandidate)) +
         device_round_up(b * w * sizeof(std::int32_t)) +
         top_k_lists_size(batch * width, vocab, width, kMaxSplitSms);
}

/// The views of one stochastic beam level: the device matrices, the sizes and the streams.
struct BeamLevelParams {
  BeamLevelArgs matrices;
  std::int64_t batch;
  std::int64_t width;
  std::int64_t vocab;
  Resident<const RandomStream> streams;  // batch
  unsigned int* counters = nullptr;      // batch * width zeroed words, or null: zeroed here
};

/// Copies the `batch` host streams into the workspace (none on the device), zeroes the list
/// counters (not the caller's zeroed ones, params.counters), then launches a row split of every
/// beam's row (its top-W children and their candidates, in one read of the row) and one block per
/// sequence (the W best candidates).
cudaError_t stochastic_beam_level_batch(const BeamLevelParams& params, void* workspace,
                                        cudaStream_t stream);

/// Device bytes packed_tree_masks_batch and tree_positions_batch need: the staged B + 1 offsets
/// and B context lengths.
constexpr std::size_t tree_mask_workspace_size(std::int64_t batch) {
  const auto b = static_cast<std::size_t>(batch < 0 ? 0 : batch);
  return device_round_up((b + 1) * sizeof(std::int32_t)) +
         device_round_up(b * sizeof(std::int32_t));
}

/// The views of a batch of tree masks (the layout of specdec::packed_tree_masks_batch): host or
/// device offsets, device parents and masks (`words` words per row, rows `mask_stride` words
/// apart).
struct TreeMaskParams {
  Resident<const std::int32_t> node_offsets;  // B + 1
  std::int64_t batch;
  const std::int32_t* parents;  // N
  std::uint32_t* masks;         // N rows
  std::int64_t words;
  std::int64_t mask_stride;
};

/// Copies the B + 1 host offsets into the workspace (unless they are on the device), then
/// launches one block per tree.
cudaError_t packed_tree_masks_batch(const TreeMaskParams& params, void* workspace,
                                    cudaStream_t stream);

/// The views of a batch of tree position ids (the layout of specdec::tree_positions_batch): host
/// offsets and context lengths, device parents and positions.
struct TreePositionsParams {
  Resident<const std::int32_t> node_offsets;  // B + 1
  std::int64_t batch;
  const std::int32_t* parents;                   // N
  Resident<const std::int32_t> context_lengths;  // B
  std::int32_t* positions;                       // N
};

/// Copies the B + 1 host offsets and B host context lengths into the workspace (each unless it is
/// on the device), then launches one thread per tree.
cudaError_t tree_positions_batch(const TreePositionsParams& params, void* workspace,
                                 cudaStream_t stream);

/// One thread per row of `width` beams of `length` tokens; no workspace.
cudaError_t prefix_match_batch(const std::int32_t* beams, std::int64_t rows,
                               std::int64_t beam_stride, std::int32_t width, std::int32_t length,
                               std::int32_t* out, std::int64_t out_stride, cudaStream_t stream);

}  // namespace specdec::backend::cuda_impl
