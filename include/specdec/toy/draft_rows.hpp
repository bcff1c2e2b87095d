// SPDX-License-Identifier: MIT
// Adapts a toy model to the drafters' draft-row callback: the row of a tree node is the model's
// next-token distribution after the committed context plus the node's root-to-node path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"
#include "specdec/toy/markov.hpp"
#include "specdec/tree/draft_tree.hpp"

namespace specdec::toy {

template <ToyModel M>
class ToyDraftRows {
 public:
  ToyDraftRows(const M& model, std::vector<Token> context)
      : model_(&model), context_(std::move(context)) {}

  /// Fills rows.row(r) with the model's distribution after context + path(nodes[r]).
  void operator()(const DraftTree& tree, std::span<const std::int32_t> nodes,
                  MatrixView<float> rows) {
    for (std::size_t r = 0; r < nodes.size(); ++r) {
      scratch_ = context_;
      const auto base = scratch_.size();
      for (auto n = nodes[r]; n >= 0; n = tree.parents[static_cast<std::size_t>(n)]) {
        scratch_.push_back(tree.tokens[static_cast<std::size_t>(n)]);
      }
      std::reverse(scratch_.begin() + static_cast<std::ptrdiff_t>(base), scratch_.end());
      model_->next_probabilities(scratch_, rows.row(static_cast<std::int64_t>(r)));
    }
    ++calls_;
  }

  /// How many times the drafter asked for rows (once per level).
  std::int64_t calls() const { return calls_; }

 private:
  const M* model_;
  std::vector<Token> context_;
  std::vector<Token> scratch_;
  std::int64_t calls_ = 0;
};

}  // namespace specdec::toy
