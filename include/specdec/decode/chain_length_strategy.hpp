// SPDX-License-Identifier: MIT
// Speculative sampling whose chain length changes every step: the draft-length controllers of
// decode/length_control.hpp (SpecDec++'s cumulative stop, Hugging Face's schedule, an average
// per batch size, goodput) decide how many tokens the draft model proposes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/core/enum_names.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/draft_calls.hpp"
#include "specdec/decode/length_control.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/rule.hpp"

namespace specdec {

/// Which controller of decode/length_control.hpp sets the chain length.
enum class LengthPolicy {
  kCumulative,    // CumulativeStop: stop once 1 - prod(draft probabilities) passes the threshold
  kHeuristic,     // HeuristicLength: +increase / -decrease per step, confidence stop
  kBatchAverage,  // BatchAverageLength at batch size 1: average accepted + headroom
  kGoodput,       // GoodputLength: the k maximising expected tokens per unit of cost
};

inline constexpr LengthPolicy kAllLengthPolicies[] = {
    LengthPolicy::kCumulative, LengthPolicy::kHeuristic, LengthPolicy::kBatchAverage,
    LengthPolicy::kGoodput};

namespace detail {

/// The names of kAllLengthPolicies, in its order (with the words of parse errors).
inline constexpr EnumNames<LengthPolicy, 4> kLengthPolicyNames{
    kAllLengthPolicies,
    {"cumulative", "heuristic", "batch_average", "goodput"},
    "length",
    "a LengthPolicy",
    "a length controller"};

}  // namespace detail

/// "cumulative", "heuristic", "batch_average" or "goodput".
inline std::string_view length_policy_name(LengthPolicy p) {
  return detail::kLengthPolicyNames.name(p);
}

/// Parses a name of length_policy_name. Throws specdec::Error("length") for any other string.
inline LengthPolicy parse_length_policy(std::string_view name) {
  return detail::kLengthPolicyNames.parse(name);
}

/// Options of ChainLengthStrategy: the policy and each controller's own options (only the
/// chosen one is used and checked).
struct ChainLengthOptions {
  LengthPolicy policy = LengthPolicy::kHeuristic;
  Warp draft_warp{};  // maps the draft's logits to the rows the chain is sampled from
  CumulativeStopOptions cumulative{};
  HeuristicLengthOptions heuristic{};
  BatchAverageOptions batch_average{};
  GoodputCosts goodput{};

  /// `policy` for chains of at most `max_length` tokens: every controller's own defaults, its
  /// max_length set and its initial length cut to it, and the goodput controller's cost of one
  /// draft pass `draft_cost` (one verification costing 1; 0 = a free draft).
  static ChainLengthOptions up_to(LengthPolicy policy, std::int32_t max_length,
                                  double draft_cost = 0.0) {
    ChainLengthOptions o{.policy = policy};
    o.cumulative.max_length = max_length;
    o.heuristic.max_length = max_length;
    o.heuristic.initial = std::min(o.heuristic.initial, max_length);
    o.batch_average.max_length = max_length;
    o.batch_average.initial = std::min(o.batch_average.initial, max_length);
    o.goodput.max_length = max_length;
    o.goodput.draft_cost = draft_cost;
    return o;
  }

  /// Sets the threshold of the controllers that stop on one: the cumulative stop's threshold and
  /// the heuristic's confidence threshold (each defaults to its own).
  ChainLengthOptions& with_threshold(double threshold) {
    cumulative.threshold = threshold;
    heuristic.confidence_threshold = threshold;
    return *this;
  }

  /// The chosen controller's max_length.
  std::int32_t max_length() const {
    switch (policy) {
      case LengthPolicy::kCumulative:
        return cumulative.max_length;
      case LengthPolicy::kHeuristic:
        return heuristic.max_length;
      case LengthPolicy::kBatchAverage:
        return batch_average.max_length;
      default:
        return goodput.max_length;
    }
  }
};

/// Speculative sampling over a draft LogitsProvider (held by reference; it must outlive the
/// strategy) with a chain length chosen per step by a controller. Draft token i is sampled from
/// the draft's row through `draft_warp` with draw 0 of `draft_stream().at_node(i)`, one draft call
/// per token, and the chain is verified with verify_chain and the Rejection rule: lossless (the
/// output law is the warped target's) for any length rule, as the decision to stop depends only
/// on the tokens drafted so far. The controllers:
/// - kCumulative: CumulativeStop, fed each drafted token's draft probability (no acceptance head);
/// - kHeuristic: length() tokens, cut short by stop_after(draft probability); update(accepted);
/// - kBatchAverage: length(1) tokens; update(1, accepted);
/// - kGoodput: length() tokens; update(drafted, accepted).
/// Each sequence (reset) starts a fresh controller, so its tokens depend only on the seed and the
/// sequence id. Allocates nothing after the first steps.
template <LogitsProvider Draft>
class ChainLengthStrategy {
 public:
  ChainLengthStrategy(Draft& draft, ChainLengthOptions options)
      : draft_(draft), options_(std::move(options)) {}

  const ChainLengthOptions& options() const { return options_; }
  /// The chain drafted by the last step (kept until the next draft).
  const DraftTree& drafted() const { return chain_; }

  /// Throws specdec::Error naming "draft" (a vocabulary other than the target's), "policy",
  /// "draft_warp.<field>" or "<policy>.<field>" for the chosen controller's options, whose
  /// max_length must also be at most 4096.
  void prepare(std::int64_t vocab, Workspace& workspace) {
    provider::check_same_vocabulary(static_cast<std::int64_t>(draft_.model().vocab_size()), vocab);
    try {
      length_policy_name(options_.policy);
    } catch (const Error& e) {
      throw Error("policy", e.problem());
    }
    prefixed("draft_warp", [&] { options_.draft_warp.validate(vocab); });
    prefixed(length_policy_name(options_.policy), [&] {
      start_controller();
      if (options_.max_length() > kMaxLength) {
        detail::fail("max_length", "{} is above {}", options_.max_length(), kMaxLength);
      }
    });
    const auto most = static_cast<std::size_t>(options_.max_length());
    chain_.reserve(most);
    rows_.reserve(most * static_cast<std::size_t>(vocab));
    kept_.reserve(most);
    out_.reserve(most + 1);
    workspace.reserve(static_cast<std::size_t>(vocab) * 16 + (1 << 12));
  }

  /// Starts the draft model and a fresh controller: a sequence's lengths depend on it alone.
  void reset(std::span<const Token> prompt) {
    draft_.model().reset(prompt);
    start_controller();
  }

  const DraftTree& draft(const StepContext& context) {
    draft_.clear_calls();
    draft_.check_committed(context.sequence.length());
    chain_.clear();
    const auto v = static_cast<std::size_t>(context.vocab);
    const std::int32_t planned = planned_length();
    rows_.resize(static_cast<std::size_t>(planned) * v);
    if (cumulative_) cumulative_->start();
    const auto stream = context.sequence.draft_stream();
    for (std::int32_t i = 0; i < planned; ++i) {
      const auto logits = draft_.evaluate(chain_, context.sequence.length(), context.vocab);
      const std::span<float> row(rows_.data() + static_cast<std::size_t>(i) * v, v);
      detail::warp_row(options_.draft_warp, logits.row(i), row, nullptr, context.workspace);
      const Token x = detail::sample_row(row.data(), context.vocab,
                                         stream.at_node(static_cast<std::uint32_t>(i)).uniform(0));
      chain_.add(x, i - 1);
      const double q = row[static_cast<std::size_t>(x)];
      if (cumulative_ && cumulative_->stop_after(q)) break;
      if (heuristic_ && heuristic_->stop_after(q)) break;
    }
    return chain_;
  }

  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    const auto length = static_cast<std::size_t>(chain_.size());
    const auto v = static_cast<std::size_t>(context.vocab);
    out_.resize(length + 1);
    const auto verdict = verify_chain<float>(
        Rejection{}, std::span<const float>(scores.rows.data, (length + 1) * v),
        std::span<const float>(rows_.data(), length * v), chain_.tokens, context.vocab,
        context.sequence.verify_stream(), std::span<Token>(out_), context.workspace);
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    for (std::int32_t i = 0; i < verdict.accepted; ++i) kept_[static_cast<std::size_t>(i)] = i;
    return {kept_, out_[static_cast<std::size_t>(verdict.accepted)], draft_.calls()};
  }

  void commit(const TreeBatch& batch, std::span<const std::int32_t> accepted, Token next) {
    draft_.model().commit(batch, accepted, next);
    const auto kept = static_cast<std::int32_t>(accepted.size());
    if (heuristic_) heuristic_->update(kept);
    if (batch_average_) batch_average_->update(1, kept);
    if (goodput_) goodput_->update(chain_.size(), kept);
  }

 private:
  static constexpr std::int32_t kMaxLength = 4096;

  // Rethrows a controller's error with its argument under `prefix` ("heuristic.min_length").
  template <class F>
  static void prefixed(std::string_view prefix, F&& check) {
    try {
      check();
    } catch (const Error& e) {
      throw Error(fmt::format("{}.{}", prefix, e.argument()), e.problem());
    }
  }

  // The chosen controller in its initial state (its constructor checks its options).
  void start_controller() {
    switch (options_.policy) {
      case LengthPolicy::kCumulative:
        cumulative_.emplace(options_.cumulative);
        break;
      case LengthPolicy::kHeuristic:
        heuristic_.emplace(options_.heuristic);
        break;
      case LengthPolicy::kBatchAverage:
        batch_average_.emplace(options_.batch_average);
        break;
      case LengthPolicy::kGoodput:
        goodput_.emplace(options_.goodput);
        break;
    }
  }

  // Tokens this step may draft (kCumulative stops by its own rule within max_length).
  std::int32_t planned_length() const {
    if (heuristic_) return heuristic_->length();
    if (batch_average_) return batch_average_->length(1);
    if (goodput_) return goodput_->length();
    return options_.cumulative.max_length;
  }

  detail::DraftModelCalls<Draft> draft_;
  ChainLengthOptions options_;
  std::optional<CumulativeStop> cumulative_;
  std::optional<HeuristicLength> heuristic_;
  std::optional<BatchAverageLength> batch_average_;
  std::optional<GoodputLength> goodput_;
  DraftTree chain_;
  std::vector<float> rows_;
  std::vector<std::int32_t> kept_;
  std::vector<Token> out_;
};

}  // namespace specdec
