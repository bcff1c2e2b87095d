// SPDX-License-Identifier: MIT
// What the drafting strategies without draft-row verification share: one checked, counted draft
// model call over a tree, and the draft's top tokens and log-probabilities read from its logits.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"

namespace specdec::detail {

/// The `count` largest entries of `logits` (count <= vocab), largest first, ties to the smaller
/// token id, written to `out`. O(vocab x count), no allocation.
inline void top_tokens(std::span<const float> logits, std::int32_t count, Token* out) {
  std::int32_t filled = 0;
  for (std::size_t x = 0; x < logits.size(); ++x) {
    const float value = logits[x];
    // Insertion into the sorted prefix; an equal value stays behind (smaller id first).
    std::int32_t at = filled;
    while (at > 0 && logits[static_cast<std::size_t>(out[at - 1])] < value) --at;
    if (at >= count) continue;
    for (std::int32_t k = std::min(filled, count - 1); k > at; --k) out[k] = out[k - 1];
    out[at] = static_cast<Token>(x);
    if (filled < count) ++filled;
  }
}

/// log(sum(exp(logits))), for the draft's log-probability of a token: logits[x] - this. A value
/// >= the row's maximum, so every log-probability it gives is <= 0.
inline double log_normaliser(std::span<const float> logits) {
  float top = -std::numeric_limits<float>::infinity();
  for (const float l : logits) top = l > top ? l : top;
  double sum = 0.0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l) - top);
  return static_cast<double>(top) + std::log(sum);
}

/// The draft's log-probability of `token` from its logits row and that row's log_normaliser,
/// clamped to <= 0 (rounding) as the tree selectors require.
inline float draft_log_prob(std::span<const float> logits, double normaliser, Token token) {
  const double lp = static_cast<double>(logits[static_cast<std::size_t>(token)]) - normaliser;
  return static_cast<float>(lp < 0.0 ? lp : 0.0);
}

/// Calls a draft LogitsProvider (held by reference) over a tree after the committed context and
/// keeps its checked logits ("draft.logits" in errors): row 0 the root, row i + 1 after node i.
/// Buffers are kept, so calls over trees no larger than before allocate nothing.
template <LogitsProvider Draft>
class DraftModelCalls {
 public:
  explicit DraftModelCalls(Draft& draft) : draft_(&draft) {}

  Draft& model() const { return *draft_; }

  /// One draft call over `tree`; counts it.
  MatrixView<const float> evaluate(const DraftTree& tree, std::int64_t committed_length,
                                   std::int64_t vocab) {
    batch_.assign(tree, committed_length);
    const auto rows = batch_.rows();
    logits_.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(vocab));
    MatrixView<float> out(logits_.data(), rows, vocab);
    draft_->evaluate(batch_, out);
    const MatrixView<const float> view(logits_.data(), rows, vocab);
    provider::check_output("draft.logits", view, rows, vocab);
    ++calls_;
    return view;
  }

  /// The draft must sit at the sequence's committed length before a step drafts.
  void check_committed(std::int64_t length) const {
    if (draft_->committed_length() != length) {
      fail("draft", "committed length {} differs from the sequence's {}",
           draft_->committed_length(), length);
    }
  }

  std::int64_t calls() const { return calls_; }
  void clear_calls() { calls_ = 0; }

 private:
  Draft* draft_;
  TreeBatch batch_;
  std::vector<float> logits_;
  std::int64_t calls_ = 0;
};

}  // namespace specdec::detail
