// SPDX-License-Identifier: MIT
// The shapes a batch entry's workspace is sized for, all in one place: pass one to
// workspace_size(backend, shape) (and, for CUDA's counters, workspace_counters(backend, shape))
// once, at the largest batch the engine will run, then reuse the Workspace every step.
//
//   shape                  sizes                                       declared with
//   ChainBatchShape        verify_chain_batch(_logits), block, lossy   backend/verify_batch.hpp
//   TreeBatchShape         verify_tree_batch(_logits), target-only     backend/verify_batch.hpp
//   WarpBatchShape         warp_batch                                  backend/warp_batch.hpp
//   GumbelTopKBatchShape   gumbel_top_k_batch                          backend/draft_batch.hpp
//   BeamLevelBatchShape    stochastic_beam_level_batch                 backend/draft_batch.hpp
//   FillRandomShape        fill_random                                 backend/fill_random.hpp
//   TreeMaskBatchShape     packed_tree_masks_batch, positions          backend/tree_mask_batch.hpp
//   sglang::TreeBatchShape sglang::verify_tree_batch backend/sglang_tree_batch.hpp
#pragma once

#include <cstdint>

namespace specdec {

/// The shape a batched chain verification is sized for: `batch` sequences of at most `max_gamma`
/// draft tokens each over `vocab` tokens. `from_logits`: sized for verify_chain_batch_logits.
struct ChainBatchShape {
  std::int64_t batch = 0;
  std::int64_t max_gamma = 0;
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

/// The shape a batched warp is sized for: `rows` rows of `vocab` logits.
struct WarpBatchShape {
  std::int64_t rows = 0;
  std::int64_t vocab = 0;
};

/// The shape a batched Gumbel-top-k is sized for: `rows` rows of `vocab` entries, `k` samples.
struct GumbelTopKBatchShape {
  std::int64_t rows = 0;
  std::int64_t vocab = 0;
  std::int64_t k = 0;
};

/// The shape a batched stochastic-beam-search level is sized for: `batch` sequences of at most
/// `width` beams over `vocab` tokens.
struct BeamLevelBatchShape {
  std::int64_t batch = 0;
  std::int64_t width = 0;
  std::int64_t vocab = 0;
};

/// The shape fill_random is sized for: `streams` rows of `count` draws.
struct FillRandomShape {
  std::int64_t streams = 0;
  std::int64_t count = 0;
};

/// The workspace of packed_tree_masks_batch and tree_positions_batch: B trees.
struct TreeMaskBatchShape {
  std::int64_t batch = 0;
};

namespace sglang {

/// The shape a batched SGLang verification is sized for: `batch` sequences of `slots` slots over
/// `vocab` tokens (0 for the greedy walk).
struct TreeBatchShape {
  std::int64_t batch = 0;
  std::int64_t slots = 0;
  std::int64_t vocab = 0;
};

}  // namespace sglang

}  // namespace specdec
