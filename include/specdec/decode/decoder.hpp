// SPDX-License-Identifier: MIT
// The decoding loop: draft -> evaluate the tree with the target -> verify -> commit, one loop for
// every method: the built-in ones (MethodStrategy: autoregressive, SD, block SD, SpecInfer,
// SpecTr, RSD-C, RSD-S, MTAD, cascades, lossy), ReDrafter (decode/redrafter_strategy.hpp) and any
// user DraftStrategy; one sequence (Decoder, decode) or many (decode_batch).
#pragma once

#include <algorithm>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/method_strategy.hpp"
#include "specdec/decode/metrics.hpp"
#include "specdec/decode/sequence.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"

namespace specdec {

/// What a run produced.
struct DecodeResult {
  std::vector<Token> tokens;  // generated tokens only (prompt excluded), at most max_new_tokens
  DecodeMetrics metrics;      // decode/metrics.hpp
};

/// One sequence's decoding loop over a target provider (held by reference; it must outlive the
/// Decoder) and a DraftStrategy (decode/strategy.hpp; held by value). `reset(prompt, sequence)`
/// starts a sequence (resetting the target and the strategy); each `step()` runs
/// strategy.draft -> one target evaluate over the whole tree -> strategy.verify -> commit (target
/// then strategy) and returns the tokens it emitted (empty once finished): the accepted nodes'
/// tokens then the next token, cut after `end_token` or at `max_new_tokens`. Buffers are kept
/// across steps and sequences, so a steady tree shape allocates nothing after the first step (the
/// providers and the metrics' per-level vectors aside).
///
/// Rows: the target returns raw logits; every row is checked (provider::check_output names
/// "target.logits", provider::check_hidden_output "target.hidden") and mapped through `loop.warp`,
/// unless the strategy verifies from the logits (its needs_target_rows() is false: MethodStrategy's
/// plain sampling, SD, block SD and tree methods), which then warps only what its verification
/// reads.
/// Metrics: one StepRecord per target call (tree size and depth, accepted depth, tokens emitted,
/// the verdict's draft calls).
///
/// `Decoder(target, draft, DecodeOptions)` builds the MethodStrategy of a built-in method.
template <LogitsProvider Target, DraftStrategy Strategy>
class Decoder {
 public:
  /// Throws specdec::Error for a bad option (strategy.prepare, then LoopOptions::validate).
  Decoder(Target& target, Strategy strategy, LoopOptions loop)
      : target_(&target), strategy_(std::move(strategy)), loop_(loop) {
    static_assert(!uses_hidden_states<Strategy> || HiddenStateProvider<Target>,
                  "this strategy drafts from hidden states: the target must be a "
                  "HiddenStateProvider");
    vocab_ = static_cast<std::int64_t>(target.vocab_size());
    if (vocab_ < 1) detail::fail("target", "vocabulary size {} must be >= 1", vocab_);
    strategy_.prepare(vocab_, workspace_);
    loop_.validate(vocab_);
  }

  /// A built-in method over a draft provider (unused, and its vocabulary unchecked, for
  /// kAutoregressive). Throws specdec::Error naming the bad field of `options`, or "draft" for a
  /// vocabulary mismatch.
  template <LogitsProvider Draft>
  requires std::same_as<Strategy, MethodStrategy<Draft>> Decoder(Target& target, Draft& draft,
                                                                 DecodeOptions options)
      : Decoder(target, Strategy(draft, options), options.loop()) {}

  const LoopOptions& loop_options() const { return loop_; }
  Strategy& strategy() { return strategy_; }
  const Strategy& strategy() const { return strategy_; }
  std::int64_t vocab_size() const { return vocab_; }

  /// Starts sequence `sequence` from `prompt` (non-empty, tokens in the vocabulary): resets the
  /// target, the strategy and the metrics. Throws specdec::Error("prompt") otherwise.
  void reset(std::span<const Token> prompt, std::uint32_t sequence = 0) {
    state_ = SequenceState(prompt, vocab_, loop_.seed, sequence);
    // Room for the whole output (up to 2^16 tokens), so appending never reallocates mid-run.
    state_.tokens.reserve(prompt.size() +
                          static_cast<std::size_t>(std::min(loop_.max_new_tokens, 1 << 16)));
    target_->reset(prompt);
    strategy_.reset(prompt);
    metrics_ = DecodeMetrics{};
    metrics_.sequences = 1;
    state_.finished = loop_.max_new_tokens == 0;
    started_ = true;
  }

  bool finished() const { return state_.finished; }
  const SequenceState& state() const { return state_; }
  /// Tokens generated since reset (prompt excluded).
  std::span<const Token> generated() const { return state_.generated(); }
  const DecodeMetrics& metrics() const { return metrics_; }

  /// One step. Returns the tokens emitted (valid until the next step or reset); empty when the
  /// sequence is already finished. Throws specdec::Error if reset was never called or a provider
  /// misbehaves.
  std::span<const Token> step() {
    if (!started_) detail::fail("decoder", "call reset(prompt) before step()");
    emitted_.clear();
    if (state_.finished) return emitted_;
    if (target_->committed_length() != state_.length()) {
      detail::fail("target", "committed length {} differs from the sequence's {}",
                   target_->committed_length(), state_.length());
    }
    const StepContext context{state_, vocab_, workspace_};
    const DraftTree& tree = strategy_.draft(context);
    batch_.assign(tree, state_.length());
    score();
    const StepVerdict verdict = strategy_.verify(context, scores());
    target_->commit(batch_, verdict.accepted, verdict.next);
    strategy_.commit(batch_, verdict.accepted, verdict.next);
    for (const auto node : verdict.accepted) {
      emitted_.push_back(tree.tokens[static_cast<std::size_t>(node)]);
    }
    emitted_.push_back(verdict.next);
    // Output: stop at the end token or max_new_tokens.
    const auto room = static_cast<std::size_t>(loop_.max_new_tokens - state_.generated_count());
    std::size_t keep = std::min(room, emitted_.size());
    for (std::size_t i = 0; i < keep; ++i) {
      if (loop_.end_token != kNoToken && emitted_[i] == loop_.end_token) {
        keep = i + 1;
        state_.finished = true;
        break;
      }
    }
    emitted_.resize(keep);
    state_.append(emitted_);
    if (state_.generated_count() >= loop_.max_new_tokens) state_.finished = true;
    metrics_.record_step({tree.size(), tree.max_depth(),
                          static_cast<std::int32_t>(verdict.accepted.size()),
                          static_cast<std::int64_t>(keep), verdict.draft_calls});
    return emitted_;
  }

  /// Runs steps until finished; returns the generated tokens and the metrics (with wall time).
  DecodeResult run() {
    const auto start = std::chrono::steady_clock::now();
    while (!finished()) step();
    DecodeResult result;
    const auto gen = generated();
    result.tokens.assign(gen.begin(), gen.end());
    result.metrics = metrics_;
    result.metrics.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

 private:
  // Evaluates the target over batch_ (with hidden states when the strategy drafts from them),
  // checks its answer and warps every row into target_rows_ if the strategy reads them.
  void score() {
    const auto rows = static_cast<std::size_t>(batch_.rows());
    const auto v = static_cast<std::size_t>(vocab_);
    target_logits_.resize(rows * v);
    MatrixView<float> logits(target_logits_.data(), batch_.rows(), vocab_);
    if constexpr (uses_hidden_states<Strategy>) {
      const auto width = static_cast<std::int64_t>(target_->hidden_size());
      hidden_.resize(rows * static_cast<std::size_t>(width));
      MatrixView<float> hidden(hidden_.data(), batch_.rows(), width);
      target_->evaluate_with_hidden(batch_, logits, hidden);
      provider::check_output("target.logits", MatrixView<const float>(logits), batch_.rows(),
                             vocab_);
      provider::check_hidden_output("target.hidden", MatrixView<const float>(hidden), batch_.rows(),
                                    width);
      hidden_width_ = width;
    } else {
      target_->evaluate(batch_, logits);
      provider::check_output("target.logits", MatrixView<const float>(logits), batch_.rows(),
                             vocab_);
    }
    warped_ = detail::needs_target_rows(strategy_);
    if (!warped_) return;
    target_rows_.resize(rows * v);
    for (std::size_t r = 0; r < rows; ++r) {
      detail::warp_row(loop_.warp, std::span<const float>(target_logits_.data() + r * v, v),
                       std::span<float>(target_rows_.data() + r * v, v), nullptr, workspace_);
    }
  }

  TargetScores scores() const {
    return {batch_, MatrixView<const float>(target_logits_.data(), batch_.rows(), vocab_),
            MatrixView<const float>(target_rows_.data(), warped_ ? batch_.rows() : 0, vocab_),
            MatrixView<const float>(hidden_.data(), batch_.rows(), hidden_width_), loop_.warp};
  }

  Target* target_;
  Strategy strategy_;
  LoopOptions loop_;
  std::int64_t vocab_ = 0;
  std::int64_t hidden_width_ = 0;
  SequenceState state_;
  DecodeMetrics metrics_;
  bool started_ = false;
  bool warped_ = true;  // target_rows_ holds this step's warped rows

  Workspace workspace_;
  TreeBatch batch_;
  std::vector<float> target_logits_, target_rows_, hidden_;
  std::vector<Token> emitted_;
};

template <LogitsProvider Target, LogitsProvider Draft>
Decoder(Target&, Draft&, DecodeOptions) -> Decoder<Target, MethodStrategy<Draft>>;

/// The Decoder of a built-in method with a draft provider of type Draft.
template <LogitsProvider Target, LogitsProvider Draft>
using MethodDecoder = Decoder<Target, MethodStrategy<Draft>>;

/// Generates from `prompt` with `target` and `draft` (any LogitsProvider; draft unused for
/// kAutoregressive, and then its vocabulary is not checked). Same seed + sequence id = same
/// tokens. Throws specdec::Error naming the bad argument (prompt, a field of options, draft for
/// a vocabulary mismatch, target.logits / draft.logits for bad provider rows).
template <LogitsProvider Target, LogitsProvider Draft>
DecodeResult decode(Target& target, Draft& draft, std::span<const Token> prompt,
                    const DecodeOptions& options, std::uint32_t sequence = 0) {
  MethodDecoder<Target, Draft> decoder(target, draft, options);
  decoder.reset(prompt, sequence);
  return decoder.run();
}

/// Generates from `prompt` with `target` and any DraftStrategy (decode/strategy.hpp). Same seed
/// and sequence id, same tokens. Throws specdec::Error naming the bad argument.
template <LogitsProvider Target, DraftStrategy Strategy>
DecodeResult decode(Target& target, Strategy strategy, const LoopOptions& loop,
                    std::span<const Token> prompt, std::uint32_t sequence = 0) {
  Decoder<Target, Strategy> decoder(target, std::move(strategy), loop);
  decoder.reset(prompt, sequence);
  return decoder.run();
}

namespace detail {

/// results[i] = decode_one(i) for i in [0, count), on the backend::Cpu pool; the error of the
/// lowest-numbered sequence that failed is rethrown.
template <class DecodeOne>
std::vector<DecodeResult> decode_each(std::size_t count, backend::Cpu cpu, DecodeOne&& decode_one) {
  if (cpu.threads < 0) fail("cpu.threads", "{} must be >= 0 (0 = all)", cpu.threads);
  std::vector<DecodeResult> results(count);
  backend::default_thread_pool().run(static_cast<std::int64_t>(count), cpu.threads,
                                     [&](std::int64_t i, int /*slot*/) {
                                       const auto k = static_cast<std::size_t>(i);
                                       results[k] = decode_one(k);
                                     });
  return results;
}

}  // namespace detail

/// Several sequences in parallel on a backend::Cpu thread pool; make_target(i) / make_draft(i)
/// build sequence i's providers; results[i] equals decode(... , sequence = i) whatever the
/// thread count (0 = every hardware thread). The error of the lowest-numbered sequence that failed
/// is rethrown, whatever the thread count.
/// Runs on backend::default_thread_pool(), so it must not be called from one of that pool's tasks.
template <class MakeTarget, class MakeDraft>
std::vector<DecodeResult> decode_batch(MakeTarget&& make_target, MakeDraft&& make_draft,
                                       std::span<const std::vector<Token>> prompts,
                                       const DecodeOptions& options,
                                       backend::Cpu cpu = backend::cpu) {
  return detail::decode_each(prompts.size(), cpu, [&](std::size_t i) {
    auto target = make_target(i);
    auto draft = make_draft(i);
    return decode(target, draft, std::span<const Token>(prompts[i]), options,
                  static_cast<std::uint32_t>(i));
  });
}

/// decode_batch with any DraftStrategy: make_target(i) gives sequence i's target provider (a
/// value, or a reference to one kept by the caller), make_strategy(i) its strategy (over a draft
/// that outlives the call); results[i] equals decode(target, strategy, loop, prompts[i], i)
/// whatever the thread count. Same pool and errors as above.
template <class MakeTarget, class MakeStrategy>
requires DraftStrategy<std::invoke_result_t<MakeStrategy&, std::size_t>>
std::vector<DecodeResult> decode_batch(MakeTarget&& make_target, MakeStrategy&& make_strategy,
                                       std::span<const std::vector<Token>> prompts,
                                       const LoopOptions& loop, backend::Cpu cpu = backend::cpu) {
  return detail::decode_each(prompts.size(), cpu, [&](std::size_t i) {
    decltype(auto) target = make_target(i);
    return decode(target, make_strategy(i), loop, std::span<const Token>(prompts[i]),
                  static_cast<std::uint32_t>(i));
  });
}

}  // namespace specdec
