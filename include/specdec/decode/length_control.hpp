// SPDX-License-Identifier: MIT
// Draft-length controllers: how many tokens to draft next, from what the last steps accepted
// (SpecDec++'s cumulative rule, Hugging Face's schedule and confidence stop, an average per batch
// size, and the length that maximises goodput).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"

namespace specdec {

namespace detail {

inline void check_probability(const ArgName& name, double p) {
  if (!(p >= 0.0 && p <= 1.0)) fail(name, "{} is not a probability in [0, 1]", p);
}

inline void check_lengths(std::int32_t min_length, std::int32_t max_length, std::int32_t lowest) {
  if (min_length < lowest) fail("min_length", "{} must be >= {}", min_length, lowest);
  if (max_length < min_length) {
    fail("max_length", "{} must be >= min_length ({})", max_length, min_length);
  }
}

/// check_lengths, then `initial` within [min_length, max_length].
inline void check_lengths(std::int32_t min_length, std::int32_t max_length, std::int32_t lowest,
                          std::int32_t initial) {
  check_lengths(min_length, max_length, lowest);
  if (initial < min_length || initial > max_length) {
    fail("initial", "{} is outside [min_length, max_length] = [{}, {}]", initial, min_length,
         max_length);
  }
}

inline void check_step(std::int32_t drafted, std::int32_t accepted) {
  if (drafted < 0) fail("drafted", "{} must be >= 0", drafted);
  if (accepted < 0 || accepted > drafted) {
    fail("accepted", "{} must be in [0, drafted = {}]", accepted, drafted);
  }
}

}  // namespace detail

// ---- SpecDec++ --------------------------------------------------------------------------------

struct CumulativeStopOptions {
  /// Stop once the chance that some drafted token is rejected, 1 - prod(acceptance), exceeds this.
  double threshold = 0.7;
  std::int32_t min_length = 1;
  std::int32_t max_length = 16;
};

/// SpecDec++'s stopping rule for one chain. Call start() before drafting, then stop_after(a) for
/// each drafted token with its predicted acceptance probability a (an acceptance head's output,
/// or the draft's own probability of the token where there is none); it returns true when
/// drafting should stop after that token: at max_length, or once 1 - prod(a) > threshold with at
/// least min_length tokens drafted.
class CumulativeStop {
 public:
  explicit CumulativeStop(CumulativeStopOptions options = {}) : options_(options) {
    detail::check_probability("threshold", options.threshold);
    detail::check_lengths(options.min_length, options.max_length, 1);
  }

  void start() {
    length_ = 0;
    all_accepted_ = 1.0;
  }

  /// Throws specdec::Error naming predicted_acceptance unless it lies in [0, 1].
  bool stop_after(double predicted_acceptance) {
    detail::check_probability("predicted_acceptance", predicted_acceptance);
    ++length_;
    all_accepted_ *= predicted_acceptance;
    if (length_ >= options_.max_length) return true;
    return length_ >= options_.min_length && rejection_probability() > options_.threshold;
  }

  /// Tokens drafted since start().
  std::int32_t length() const { return length_; }
  /// 1 - prod(predicted acceptance) over the tokens drafted since start().
  double rejection_probability() const { return 1.0 - all_accepted_; }

 private:
  CumulativeStopOptions options_;
  std::int32_t length_ = 0;
  double all_accepted_ = 1.0;
};

// ---- Hugging Face -----------------------------------------------------------------------------

struct HeuristicLengthOptions {
  std::int32_t initial = 5;
  std::int32_t increase = 2;  ///< added when every scheduled token was accepted
  std::int32_t decrease = 1;  ///< taken away otherwise
  std::int32_t min_length = 1;
  std::int32_t max_length = 64;
  /// Stop drafting a token whose draft probability is below this (0: never).
  double confidence_threshold = 0.4;
};

/// Hugging Face's heuristic schedule and confidence threshold: draft length() tokens, stopping
/// early at a token the draft is less sure of than confidence_threshold; after verification the
/// length grows by `increase` when all length() scheduled tokens were accepted and shrinks by
/// `decrease` otherwise (a draft cut short by the confidence stop counts as not all accepted),
/// within [min_length, max_length].
class HeuristicLength {
 public:
  explicit HeuristicLength(HeuristicLengthOptions options = {}) : options_(options) {
    detail::check_lengths(options.min_length, options.max_length, 1, options.initial);
    if (options.increase < 0) detail::fail("increase", "{} must be >= 0", options.increase);
    if (options.decrease < 0) detail::fail("decrease", "{} must be >= 0", options.decrease);
    detail::check_probability("confidence_threshold", options.confidence_threshold);
    length_ = options.initial;
  }

  /// Tokens to draft in the next step.
  std::int32_t length() const { return length_; }

  /// Whether to stop drafting after a token the draft gave `draft_probability`. Throws
  /// specdec::Error naming draft_probability unless it lies in [0, 1].
  bool stop_after(double draft_probability) const {
    detail::check_probability("draft_probability", draft_probability);
    return draft_probability < options_.confidence_threshold;
  }

  /// Records a verified step. Throws specdec::Error naming accepted unless in [0, length()].
  void update(std::int32_t accepted) {
    if (accepted < 0 || accepted > length_) {
      detail::fail("accepted", "{} must be in [0, length() = {}]", accepted, length_);
    }
    const auto next = accepted == length_ ? std::int64_t{length_} + options_.increase
                                          : std::int64_t{length_} - options_.decrease;
    length_ = static_cast<std::int32_t>(
        std::clamp<std::int64_t>(next, options_.min_length, options_.max_length));
  }

 private:
  HeuristicLengthOptions options_;
  std::int32_t length_ = 0;
};

// ---- average per batch size -------------------------------------------------------------------

struct BatchAverageOptions {
  std::int32_t initial = 4;  ///< the length for a batch size not seen yet
  std::int32_t min_length = 1;
  std::int32_t max_length = 16;
  /// Weight of the newest step in the moving average of accepted tokens (1: only the last).
  double smoothing = 0.2;
  /// Tokens drafted beyond the average accepted, so the length can grow when drafts do well.
  std::int32_t headroom = 1;
};

/// A draft length per batch size: a moving average of the accepted tokens per sequence at each
/// batch size, and length(b) = ceil(average) + headroom within [min_length, max_length].
class BatchAverageLength {
 public:
  explicit BatchAverageLength(BatchAverageOptions options = {}) : options_(options) {
    detail::check_lengths(options.min_length, options.max_length, 0, options.initial);
    if (!(options.smoothing > 0.0 && options.smoothing <= 1.0)) {
      detail::fail("smoothing", "{} is outside (0, 1]", options.smoothing);
    }
    if (options.headroom < 0) detail::fail("headroom", "{} must be >= 0", options.headroom);
  }

  /// Tokens to draft per sequence at this batch size. Throws specdec::Error naming batch_size < 1.
  std::int32_t length(std::int32_t batch_size) const {
    check_batch_size(batch_size);
    const auto k = static_cast<std::size_t>(batch_size);
    if (k >= seen_.size() || !seen_[k]) return options_.initial;
    const double want = std::ceil(average_[k] - 1e-9) + options_.headroom;
    return static_cast<std::int32_t>(
        std::clamp<double>(want, options_.min_length, options_.max_length));
  }

  /// The moving average of accepted tokens per sequence at this batch size (0 before any step).
  double average(std::int32_t batch_size) const {
    check_batch_size(batch_size);
    const auto k = static_cast<std::size_t>(batch_size);
    return k < seen_.size() && seen_[k] ? average_[k] : 0.0;
  }

  /// Records a step at `batch_size` whose sequences accepted `mean_accepted` tokens on average.
  /// Throws specdec::Error naming batch_size or mean_accepted (negative or not finite).
  void update(std::int32_t batch_size, double mean_accepted) {
    check_batch_size(batch_size);
    if (!(std::isfinite(mean_accepted) && mean_accepted >= 0.0)) {
      detail::fail("mean_accepted", "{} must be finite and >= 0", mean_accepted);
    }
    const auto k = static_cast<std::size_t>(batch_size);
    if (k >= seen_.size()) {
      seen_.resize(k + 1, false);
      average_.resize(k + 1, 0.0);
    }
    average_[k] =
        seen_[k] ? average_[k] + options_.smoothing * (mean_accepted - average_[k]) : mean_accepted;
    seen_[k] = true;
  }

 private:
  static void check_batch_size(std::int32_t batch_size) {
    if (batch_size < 1) detail::fail("batch_size", "{} must be >= 1", batch_size);
  }

  BatchAverageOptions options_;
  std::vector<bool> seen_;
  std::vector<double> average_;
};

// ---- goodput ----------------------------------------------------------------------------------

struct GoodputCosts {
  double draft_cost = 1.0;   ///< one draft pass (one drafted token)
  double verify_cost = 1.0;  ///< one target pass over the drafted chain
  std::int32_t min_length = 1;
  std::int32_t max_length = 16;
};

/// Tokens a step drafting a chain of k emits on average: 1 + sum over i <= k of the product of
/// acceptance_by_depth[0 .. i) (the last entry stands for deeper positions), the bonus counted.
/// Throws specdec::Error naming acceptance_by_depth ([r] not in [0, 1], or empty) or k < 0.
inline double expected_chain_tokens(std::span<const double> acceptance_by_depth, std::int32_t k) {
  if (acceptance_by_depth.empty()) detail::fail("acceptance_by_depth", "is empty");
  for (std::size_t d = 0; d < acceptance_by_depth.size(); ++d) {
    detail::check_probability(ArgName("acceptance_by_depth", static_cast<std::int64_t>(d)),
                              acceptance_by_depth[d]);
  }
  if (k < 0) detail::fail("k", "{} must be >= 0", k);
  double total = 1.0, reach = 1.0;
  for (std::int32_t i = 0; i < k; ++i) {
    reach *= acceptance_by_depth[std::min<std::size_t>(static_cast<std::size_t>(i),
                                                       acceptance_by_depth.size() - 1)];
    total += reach;
  }
  return total;
}

/// The chain length k in [min_length, max_length] maximising goodput, expected_chain_tokens(k) /
/// (k x draft_cost + verify_cost); ties go to the shorter chain. Throws specdec::Error naming
/// acceptance_by_depth, draft_cost, verify_cost (negative, not finite, or both 0), min_length or
/// max_length. Complexity: O(max_length).
inline std::int32_t goodput_length(std::span<const double> acceptance_by_depth,
                                   const GoodputCosts& costs) {
  expected_chain_tokens(acceptance_by_depth, 0);  // validates the acceptance
  if (!(std::isfinite(costs.draft_cost) && costs.draft_cost >= 0.0)) {
    detail::fail("draft_cost", "{} must be finite and >= 0", costs.draft_cost);
  }
  if (!(std::isfinite(costs.verify_cost) && costs.verify_cost >= 0.0)) {
    detail::fail("verify_cost", "{} must be finite and >= 0", costs.verify_cost);
  }
  if (costs.draft_cost == 0.0 && costs.verify_cost == 0.0) {
    detail::fail("verify_cost", "and draft_cost are both 0 (a step must cost something)");
  }
  detail::check_lengths(costs.min_length, costs.max_length, 0);
  std::int32_t best = costs.min_length;
  double best_rate = -1.0, tokens = 1.0, reach = 1.0;
  for (std::int32_t k = 0; k <= costs.max_length; ++k) {
    if (k > 0) {
      reach *= acceptance_by_depth[std::min<std::size_t>(static_cast<std::size_t>(k - 1),
                                                         acceptance_by_depth.size() - 1)];
      tokens += reach;
    }
    if (k < costs.min_length) continue;
    const double cost = k * costs.draft_cost + costs.verify_cost;
    const double rate = cost > 0.0 ? tokens / cost : std::numeric_limits<double>::infinity();
    if (rate > best_rate) {
      best_rate = rate;
      best = k;
    }
  }
  return best;
}

/// The goodput controller: estimates the per-token acceptance rate of the chains verified so far
/// (accepted tokens over accepted tokens plus rejections, after `prior`) and drafts
/// goodput_length of it.
class GoodputLength {
 public:
  explicit GoodputLength(GoodputCosts costs = {}, double prior_rate = 0.5,
                         double prior_weight = 1.0)
      : costs_(costs), prior_rate_(prior_rate), prior_weight_(prior_weight) {
    detail::check_probability("prior_rate", prior_rate);
    if (!(std::isfinite(prior_weight) && prior_weight >= 0.0)) {
      detail::fail("prior_weight", "{} must be finite and >= 0", prior_weight);
    }
    length();  // validates the costs
  }

  /// The estimated probability that a drafted token is accepted given the one before it was.
  double acceptance() const {
    const double trials = static_cast<double>(accepted_ + rejected_) + prior_weight_;
    return trials > 0.0 ? (static_cast<double>(accepted_) + prior_rate_ * prior_weight_) / trials
                        : prior_rate_;
  }

  /// Tokens to draft in the next step.
  std::int32_t length() const {
    const double rate = acceptance();
    return goodput_length(std::span<const double>(&rate, 1), costs_);
  }

  /// Records a verified chain. Throws specdec::Error naming drafted (< 0) or accepted (outside
  /// [0, drafted]).
  void update(std::int32_t drafted, std::int32_t accepted) {
    detail::check_step(drafted, accepted);
    accepted_ += accepted;
    if (accepted < drafted) ++rejected_;
  }

 private:
  GoodputCosts costs_;
  double prior_rate_, prior_weight_;
  std::int64_t accepted_ = 0, rejected_ = 0;
};

}  // namespace specdec
