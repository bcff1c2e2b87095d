// SPDX-License-Identifier: MIT
// specdec's view of a kjv::Transformer: a LogitsProvider that scores a draft tree appended to its
// committed context in one forward pass, with specdec's tree mask and positions, and keeps the
// accepted nodes' keys by moving them with specdec's kv_compaction indices. This is the part an
// engine writes around its own model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "kjv_model.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/views.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/kv_compaction.hpp"
#include "specdec/tree/tree_mask.hpp"

namespace kjv {

/// The cache holds the committed context's keys in slots [0, cached_) and, once a tree was
/// scored after the whole context, that tree's nodes in the slots after it, with the rows
/// computed for them. A later batch that extends the scored tree (a draft model adding a level)
/// feeds only its new nodes; after a commit, the accepted nodes' keys move into place and only
/// the correction or bonus token is fed again.
class ModelProvider {
 public:
  /// `extra_slots`: cache room past the model's positions, for the largest tree scored at once.
  explicit ModelProvider(const Transformer& model, std::int64_t extra_slots = 1024)
      : model_(&model),
        cache_(model.config(), model.config().max_positions + extra_slots),
        scratch_(model.config(), cache_.capacity(), cache_.capacity()),
        out_(cache_.capacity(), model.config().vocab),
        rows_(cache_.capacity() + 1, model.config().vocab) {
    const auto capacity = static_cast<std::size_t>(cache_.capacity());
    tokens_.reserve(capacity);
    fed_tokens_.reserve(capacity);
    fed_positions_.reserve(capacity);
    mask_.reserve(capacity * capacity);
    tree_mask_.reserve(capacity * capacity);
    scored_tokens_.reserve(capacity);
    scored_parents_.reserve(capacity);
    source_.reserve(capacity);
    destination_.reserve(capacity);
  }

  std::int64_t vocab_size() const { return model_->config().vocab; }
  std::span<const specdec::Token> context() const { return tokens_; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(tokens_.size()); }
  /// Forward passes run since construction (one per evaluate).
  std::int64_t forward_passes() const { return forward_passes_; }

  void reset(std::span<const specdec::Token> prompt) {
    specdec::provider::check_prompt(prompt, vocab_size());
    if (static_cast<std::int64_t>(prompt.size()) > model_->config().max_positions) {
      specdec::detail::fail("prompt", "has {} tokens; the model has {} positions", prompt.size(),
                            model_->config().max_positions);
    }
    tokens_.assign(prompt.begin(), prompt.end());
    cached_ = 0;
    scored_tokens_.clear();
    scored_parents_.clear();
  }

  void evaluate(const specdec::TreeBatch& batch, specdec::MatrixView<float> logits) {
    const auto committed = committed_length();
    specdec::provider::check_evaluate_arguments(
        batch, committed, specdec::MatrixView<const float>(logits), vocab_size());
    const auto n = static_cast<std::int64_t>(batch.size());
    if (n > 0 && batch.positions.back() >= model_->config().max_positions) {
      specdec::detail::fail("batch.positions", "{} is past the model's {} positions",
                            batch.positions.back(), model_->config().max_positions);
    }
    if (committed + n > cache_.capacity()) {
      specdec::detail::fail("batch", "{} nodes after {} tokens exceed the {} cache slots", n,
                            committed, cache_.capacity());
    }
    // Nodes already scored after this context (the batch extends that tree) keep their keys and
    // rows; otherwise the tree part of the cache is dropped.
    std::int64_t kept = 0;
    if (cached_ == committed) {
      const auto common = std::min<std::size_t>(scored_tokens_.size(), batch.tokens.size());
      while (static_cast<std::size_t>(kept) < common &&
             scored_tokens_[static_cast<std::size_t>(kept)] ==
                 batch.tokens[static_cast<std::size_t>(kept)] &&
             scored_parents_[static_cast<std::size_t>(kept)] ==
                 batch.parents[static_cast<std::size_t>(kept)]) {
        ++kept;
      }
    }
    fed_tokens_.assign(tokens_.begin() + cached_, tokens_.end());  // pending context
    const auto pending = static_cast<std::int64_t>(fed_tokens_.size());
    fed_positions_.clear();
    for (auto p = cached_; p < committed; ++p)
      fed_positions_.push_back(static_cast<std::int32_t>(p));
    fed_tokens_.insert(fed_tokens_.end(), batch.tokens.begin() + kept, batch.tokens.end());
    fed_positions_.insert(fed_positions_.end(), batch.positions.begin() + kept,
                          batch.positions.end());
    const auto fed = static_cast<std::int64_t>(fed_tokens_.size());
    // Pending tokens follow the cached context; new nodes follow the context and the kept nodes.
    cache_.length = pending > 0 ? cached_ : committed + kept;
    const auto total = cache_.length + fed;
    // The mask over [cache, fed tokens]: pending context tokens see the context causally; node i
    // sees the whole context and its ancestors (specdec's dense tree mask, slot committed + j).
    tree_mask_.resize(static_cast<std::size_t>(n * n));
    specdec::build_dense_mask(batch.view(), tree_mask_);
    mask_.assign(static_cast<std::size_t>(fed * total), 0);
    for (std::int64_t r = 0; r < fed; ++r) {
      auto* row = mask_.data() + r * total;
      if (r < pending) {
        std::fill(row, row + cached_ + r + 1, std::uint8_t{1});
        continue;
      }
      const auto node = kept + (r - pending);
      std::fill(row, row + committed, std::uint8_t{1});
      std::copy_n(tree_mask_.data() + node * n, node + 1, row + committed);
    }
    if (fed > 0) {
      model_->forward(fed_tokens_, fed_positions_, mask_, cache_, scratch_, out_);
      ++forward_passes_;
    }
    // Row 0 follows the context (the last pending token's output, or kept from before); row
    // i + 1 follows node i.
    if (pending > 0) rows_.row(0) = out_.row(pending - 1);
    for (auto i = kept; i < n; ++i) rows_.row(i + 1) = out_.row(pending + i - kept);
    for (std::int64_t r = 0; r <= n; ++r) {
      std::copy_n(rows_.row(r).data(), vocab_size(), logits.row_data(r));
    }
    cached_ = committed;
    scored_tokens_.assign(batch.tokens.begin(), batch.tokens.end());
    scored_parents_.assign(batch.parents.begin(), batch.parents.end());
  }

  void commit(const specdec::TreeBatch& batch, std::span<const std::int32_t> kept_nodes,
              specdec::Token next) {
    const auto committed = committed_length();
    specdec::provider::check_commit_arguments(batch, committed, kept_nodes, next, vocab_size());
    if (cached_ == committed) {
      // The cache holds the context, then the scored tree: keep the accepted nodes it scored
      // (a prefix of the path when the tree was a level-order prefix of `batch`).
      const auto scored = scored_tokens_.size();
      const bool same =
          scored <= batch.tokens.size() &&
          std::equal(scored_tokens_.begin(), scored_tokens_.end(), batch.tokens.begin()) &&
          std::equal(scored_parents_.begin(), scored_parents_.end(), batch.parents.begin());
      std::size_t keys = 0;
      while (same && keys < kept_nodes.size() &&
             static_cast<std::size_t>(kept_nodes[keys]) < scored) {
        ++keys;
      }
      source_.resize(keys);
      destination_.resize(keys);
      specdec::kv_compaction(specdec::TreeView{scored_tokens_, scored_parents_},
                             static_cast<std::int32_t>(committed), kept_nodes.first(keys), source_,
                             destination_);
      cache_.move(source_, destination_);
      cached_ = committed + static_cast<std::int64_t>(keys);
    }
    cache_.length = cached_;
    scored_tokens_.clear();
    scored_parents_.clear();
    for (const auto node : kept_nodes)
      tokens_.push_back(batch.tokens[static_cast<std::size_t>(node)]);
    tokens_.push_back(next);
  }

 private:
  const Transformer* model_;
  KVCache cache_;
  Transformer::Scratch scratch_;
  Matrix out_, rows_;
  std::vector<specdec::Token> tokens_;  // the committed context
  std::int64_t cached_ = 0;             // context tokens whose keys sit in slots [0, cached_)
  std::vector<specdec::Token> fed_tokens_, scored_tokens_;
  std::vector<std::int32_t> fed_positions_, scored_parents_, source_, destination_;
  std::vector<std::uint8_t> mask_, tree_mask_;
  std::int64_t forward_passes_ = 0;
};

static_assert(specdec::LogitsProvider<ModelProvider>);

}  // namespace kjv
