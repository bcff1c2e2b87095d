// SPDX-License-Identifier: MIT
// A built-in strategy chosen at run time (a method, the top-k tree, prompt lookup or a
// length-controlled chain): one Decoder type for all of them, as a binding or a tool needs.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>

#include "specdec/core/token.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/chain_length_strategy.hpp"
#include "specdec/decode/method_strategy.hpp"
#include "specdec/decode/ngram_strategy.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"

namespace specdec {

/// The options of one built-in strategy: a method's (MethodStrategy; its loop options are then
/// the run's too), the top-k tree's, prompt lookup's or a length-controlled chain's.
using StrategyOptions = std::variant<DecodeOptions, TopKTreeOptions, NGramOptions,
                                     ChainLengthOptions>;

/// The DraftStrategy that `options` names, over a draft provider held by reference (unused by
/// NGramStrategy and Method::kAutoregressive). Every call is the chosen strategy's own, so the
/// tokens are those of a Decoder over that strategy.
template <LogitsProvider Draft>
class AnyStrategy {
 public:
  AnyStrategy(Draft& draft, const StrategyOptions& options)
      : strategy_(std::visit([&](const auto& o) { return make(draft, o); }, options)) {}

  void prepare(std::int64_t vocab, Workspace& workspace) {
    std::visit([&](auto& s) { s.prepare(vocab, workspace); }, strategy_);
  }
  void reset(std::span<const Token> prompt) {
    std::visit([&](auto& s) { s.reset(prompt); }, strategy_);
  }
  const DraftTree& draft(const StepContext& context) {
    return std::visit([&](auto& s) -> const DraftTree& { return s.draft(context); }, strategy_);
  }
  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    return std::visit([&](auto& s) { return s.verify(context, scores); }, strategy_);
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> accepted, Token next) {
    std::visit([&](auto& s) { s.commit(batch, accepted, next); }, strategy_);
  }
  bool needs_target_rows() const {
    return std::visit([](const auto& s) { return detail::needs_target_rows(s); }, strategy_);
  }

 private:
  using Variant = std::variant<MethodStrategy<Draft>, TopKTreeStrategy<Draft>, NGramStrategy,
                               ChainLengthStrategy<Draft>>;

  static Variant make(Draft& draft, const DecodeOptions& o) {
    return Variant(std::in_place_type<MethodStrategy<Draft>>, draft, o);
  }
  static Variant make(Draft& draft, const TopKTreeOptions& o) {
    return Variant(std::in_place_type<TopKTreeStrategy<Draft>>, draft, o);
  }
  static Variant make(Draft& /*draft*/, const NGramOptions& o) {
    return Variant(std::in_place_type<NGramStrategy>, o);
  }
  static Variant make(Draft& draft, const ChainLengthOptions& o) {
    return Variant(std::in_place_type<ChainLengthStrategy<Draft>>, draft, o);
  }

  Variant strategy_;
};

/// Whether `options` drafts with a draft model (prompt lookup and autoregressive decoding do not).
inline bool uses_draft(const StrategyOptions& options) {
  if (const auto* method = std::get_if<DecodeOptions>(&options)) return uses_draft(method->method);
  return !std::holds_alternative<NGramOptions>(options);
}

}  // namespace specdec
