// SPDX-License-Identifier: MIT
// Prompt lookup: draft by copying what followed an earlier occurrence of the context's last n
// tokens, verified against the target alone (verify_chain_target_only). No draft model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/verify/target_only.hpp"

namespace specdec {

/// Options of NGramStrategy.
struct NGramOptions {
  std::int32_t max_ngram = 3;  // the longest suffix matched
  std::int32_t min_ngram = 1;  // the shortest suffix tried before drafting nothing
  std::int32_t max_draft = 4;  // k: at most this many draft tokens per step

  /// Throws specdec::Error naming the field: min_ngram ([1, 1024]), max_ngram ([min_ngram,
  /// 1024]), max_draft ([1, 2^16]).
  void validate() const {
    if (min_ngram < 1 || min_ngram > 1024) {
      detail::fail("min_ngram", "{} is outside [1, 1024]", min_ngram);
    }
    if (max_ngram < min_ngram || max_ngram > 1024) {
      detail::fail("max_ngram", "{} is outside [min_ngram = {}, 1024]", max_ngram, min_ngram);
    }
    if (max_draft < 1 || max_draft > (1 << 16)) {
      detail::fail("max_draft", "{} is outside [1, 2^16]", max_draft);
    }
  }
};

/// A continuation found by find_ngram_continuation: tokens[begin, begin + length).
struct NGramMatch {
  std::size_t begin = 0;
  std::size_t length = 0;  // 0: nothing to draft
};

/// Where prompt lookup copies from: for n = max_ngram down to min_ngram, the earlier
/// occurrences i of the last n tokens (tokens[i, i + n) equal to them, i + n < tokens.size()); of
/// these the latest that is followed by max_draft tokens, else the earliest (the one followed by
/// the most), so a recent match is preferred unless it would cut the draft short. The draft is
/// tokens[i + n, i + n + max_draft) cut at the end of the context. Length 0 when no suffix of
/// min_ngram tokens or more recurs. O(max_ngram^2 x tokens.size()), no allocation.
inline NGramMatch find_ngram_continuation(std::span<const Token> tokens,
                                          const NGramOptions& options) {
  const std::size_t size = tokens.size();
  const auto k = static_cast<std::size_t>(options.max_draft);
  for (auto n = static_cast<std::size_t>(options.max_ngram);
       n >= static_cast<std::size_t>(options.min_ngram); --n) {
    if (n >= size) continue;  // an earlier occurrence needs n + 1 tokens at least
    const auto suffix = tokens.subspan(size - n);
    NGramMatch best;
    for (std::size_t i = size - n; i-- > 0;) {
      bool same = true;
      for (std::size_t j = 0; j < n && same; ++j) same = tokens[i + j] == suffix[j];
      if (!same) continue;
      const std::size_t room = size - (i + n);  // grows as i falls: the earliest has the most
      best = {i + n, room < k ? room : k};
      if (room >= k) break;
    }
    if (best.length > 0) return best;
  }
  return {};
}

/// Prompt lookup (n-gram) drafting as a DraftStrategy: each step drafts the chain of
/// find_ngram_continuation over the sequence so far (prompt and generated tokens) and verifies
/// it with verify_chain_target_only, whose output law is the warped target's: lossless. A step
/// that finds no match drafts nothing and emits one token from the target. No draft calls; no
/// draws besides verify_chain_target_only's (verify stream). Allocates nothing after the first
/// steps.
class NGramStrategy {
 public:
  explicit NGramStrategy(NGramOptions options = {}) : options_(options) {}

  const NGramOptions& options() const { return options_; }

  /// Throws specdec::Error naming the bad field of the options.
  void prepare(std::int64_t /*vocab*/, Workspace& workspace) {
    options_.validate();
    chain_.reserve(static_cast<std::size_t>(options_.max_draft));
    kept_.reserve(static_cast<std::size_t>(options_.max_draft));
    out_.reserve(static_cast<std::size_t>(options_.max_draft) + 1);
    workspace.reserve(1 << 12);
  }

  void reset(std::span<const Token> /*prompt*/) {}

  const DraftTree& draft(const StepContext& context) {
    const std::span<const Token> tokens(context.sequence.tokens);
    const auto match = find_ngram_continuation(tokens, options_);
    chain_.clear();
    for (std::size_t i = 0; i < match.length; ++i) {
      chain_.add(tokens[match.begin + i], static_cast<std::int32_t>(i) - 1);
    }
    return chain_;
  }

  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    const auto length = static_cast<std::size_t>(chain_.size());
    out_.resize(length + 1);
    const auto verdict = verify_chain_target_only<float>(
        std::span<const float>(scores.rows.data,
                               (length + 1) * static_cast<std::size_t>(context.vocab)),
        chain_.tokens, context.vocab, context.sequence.verify_stream(), std::span<Token>(out_),
        context.workspace);
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    for (std::int32_t i = 0; i < verdict.accepted; ++i) kept_[static_cast<std::size_t>(i)] = i;
    return {kept_, out_[static_cast<std::size_t>(verdict.accepted)], 0};
  }

  void commit(const TreeBatch& /*batch*/, std::span<const std::int32_t> /*accepted*/,
              Token /*next*/) {}

 private:
  NGramOptions options_;
  DraftTree chain_;
  std::vector<std::int32_t> kept_;
  std::vector<Token> out_;
};

}  // namespace specdec
