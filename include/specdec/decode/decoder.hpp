// SPDX-License-Identifier: MIT
// The decoding loop: draft -> evaluate the tree with the target -> verify -> commit, for every
// method (autoregressive, SD, block SD, SpecInfer, SpecTr, RSD-C, RSD-S, MTAD, cascades, lossy),
// over any pair of LogitsProviders, one sequence (Decoder, decode) or many (decode_batch).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/metrics.hpp"
#include "specdec/decode/sequence.hpp"
#include "specdec/draft/beam_search.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/iid.hpp"
#include "specdec/draft/rsd_c.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/unchecked.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/mtad.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec {

/// The decoding methods. Lossless (output distributed exactly as the warped target):
/// kAutoregressive, kSd, kSdBlock, kSpecInfer, kSpecTr, kRsdC, kRsdS; and kCascade / kLossy at
/// the parameters that make them lossless (a rule that always defers; alpha = 0, beta = 1).
enum class Method {
  kAutoregressive,  // plain sampling from the target (the reference)
  kSd,              // chain of L draft tokens + standard rejection (Rejection rule)
  kSdBlock,         // chain of L draft tokens + block verification
  kSpecInfer,  // K i.i.d. draft sequences (width) of depth L + multi-round rejection on the tree
  kSpecTr,     // K i.i.d. draft sequences + K-SEQ (SpecTr rule, gamma auto unless given)
  kRsdC,       // RSD-C tree (branching) + recursive rejection sampling
  kRsdS,       // RSD-S stochastic beam search (width W, depth L) + recursive rejection sampling
  kMtad,       // beam sampling (or beam search) with the draft + longest joint-ratio prefix (tau)
  kCascade,    // chain of L draft tokens, speculative cascade rule (cascade.rule, cascade.alpha)
  kLossy,      // chain of L draft tokens, lossy speculative sampling (lossy.alpha, lossy.beta)
};

inline constexpr Method kAllMethods[] = {
    Method::kAutoregressive, Method::kSd,   Method::kSdBlock, Method::kSpecInfer, Method::kSpecTr,
    Method::kRsdC,           Method::kRsdS, Method::kMtad,    Method::kCascade,   Method::kLossy};

/// The method's name as parse_method reads it ("autoregressive", "sd", "sd_block", "specinfer",
/// "spectr", "rsd_c", "rsd_s", "mtad", "cascade", "lossy").
inline std::string_view method_name(Method m) {
  switch (m) {
    case Method::kAutoregressive:
      return "autoregressive";
    case Method::kSd:
      return "sd";
    case Method::kSdBlock:
      return "sd_block";
    case Method::kSpecInfer:
      return "specinfer";
    case Method::kSpecTr:
      return "spectr";
    case Method::kRsdC:
      return "rsd_c";
    case Method::kRsdS:
      return "rsd_s";
    case Method::kMtad:
      return "mtad";
    case Method::kCascade:
      return "cascade";
    case Method::kLossy:
      return "lossy";
  }
  detail::fail("method", "{} is not a decoding method", static_cast<int>(m));
}

/// Parses a method name (see method_name). Throws specdec::Error("method") for any other string.
inline Method parse_method(std::string_view name) {
  for (auto m : kAllMethods) {
    if (method_name(m) == name) return m;
  }
  detail::fail("method",
               "'{}' is not a decoding method (autoregressive, sd, sd_block, specinfer, spectr, "
               "rsd_c, rsd_s, mtad, cascade, lossy)",
               name);
}

/// True for the methods that use a draft model (all but kAutoregressive).
inline bool uses_draft(Method m) { return m != Method::kAutoregressive; }

/// Options of one decoding run. Every field is validated by `validate` (called by the Decoder).
struct DecodeOptions {
  Method method = Method::kSd;
  Warp warp{};                          // applied identically to draft and target rows
  std::int32_t depth = 4;               // L: draft length / tree depth
  std::int32_t width = 2;               // K sequences (SpecInfer, SpecTr), W beams (RSD-S, MTAD)
  std::vector<std::int32_t> branching;  // RSD-C branching factors b0..b(L-1) (depth ignored)
  float tau = 0.5f;                     // MTAD threshold in [0, 1]
  bool mtad_beam_search = false;        // MTAD: deterministic beam search instead of sampling
  float spectr_gamma = 0.0f;            // 0 = automatic
  Cascade cascade{};                    // the verify/rule.hpp parameter struct (rule + alpha)
  Lossy lossy{};                        // the verify/rule.hpp parameter struct (alpha, beta)
  std::int32_t max_new_tokens = 32;
  Token end_token = kNoToken;  // stop after emitting it (kNoToken = never)
  std::uint64_t seed = 0;

  /// Throws specdec::Error naming the field: the warp's fields (temperature, top_k, top_p,
  /// min_p), method, depth (>= 1 where used, at most 2^20), width (>= 1 where used),
  /// branching (non-empty for RSD-C, each factor in [1, vocab]), tau ([0, 1]), spectr_gamma
  /// (finite, >= 0), cascade.alpha, lossy.alpha ([0, 1)), lossy.beta (> 0), max_new_tokens
  /// (>= 0), end_token (kNoToken or in [0, vocab)).
  void validate(std::int64_t vocab) const {
    if (vocab < 1) detail::fail("vocab", "{} must be >= 1", vocab);
    warp.validate(vocab);
    const auto m = static_cast<int>(method);
    if (m < 0 || m > static_cast<int>(Method::kLossy)) {
      detail::fail("method", "{} is not a decoding method", m);
    }
    const bool chain_or_tree = method != Method::kAutoregressive && method != Method::kRsdC;
    if (chain_or_tree && (depth < 1 || depth > (1 << 20))) {
      detail::fail("depth", "{} must be in [1, 2^20]", depth);
    }
    const bool wide = method == Method::kSpecInfer || method == Method::kSpecTr ||
                      method == Method::kRsdS || method == Method::kMtad;
    if (wide && (width < 1 || width > (1 << 20))) {
      detail::fail("width", "{} must be in [1, 2^20]", width);
    }
    if (method == Method::kRsdC) {
      if (branching.empty()) detail::fail("branching", "is empty: RSD-C needs depth >= 1");
      for (std::size_t l = 0; l < branching.size(); ++l) {
        if (branching[l] < 1 || branching[l] > vocab) {
          detail::fail(fmt::format("branching[{}]", l), "{} must be in [1, {}] (the vocabulary)",
                       branching[l], vocab);
        }
      }
    }
    if (!(tau >= 0.0f && tau <= 1.0f)) detail::fail("tau", "{} is outside [0, 1]", tau);
    if (!std::isfinite(spectr_gamma) || spectr_gamma < 0.0f) {
      detail::fail("spectr_gamma", "{} must be finite and >= 0 (0 = automatic)", spectr_gamma);
    }
    if (method == Method::kCascade) {
      try {
        check_deferral(cascade.deferral, cascade.alpha);
      } catch (const Error& e) {
        detail::fail("cascade", "{}", e.what());
      }
    }
    if (method == Method::kLossy) {
      if (!(lossy.alpha >= 0.0f && lossy.alpha < 1.0f)) {
        detail::fail("lossy.alpha", "{} is outside [0, 1)", lossy.alpha);
      }
      if (!(lossy.beta > 0.0f) || !std::isfinite(lossy.beta)) {
        detail::fail("lossy.beta", "{} must be finite and > 0", lossy.beta);
      }
    }
    if (max_new_tokens < 0) detail::fail("max_new_tokens", "{} must be >= 0", max_new_tokens);
    if (end_token != kNoToken && (end_token < 0 || end_token >= vocab)) {
      detail::fail("end_token", "{} is outside the vocabulary [0, {}) (kNoToken = none)", end_token,
                   vocab);
    }
  }

  /// The draft depth of one step (branching.size() for RSD-C, 0 for autoregressive, else depth).
  std::int32_t draft_depth() const {
    if (method == Method::kAutoregressive) return 0;
    if (method == Method::kRsdC) return static_cast<std::int32_t>(branching.size());
    return depth;
  }
};

/// What a run produced.
struct DecodeResult {
  std::vector<Token> tokens;  // generated tokens only (prompt excluded), at most max_new_tokens
  DecodeMetrics metrics;      // decode/metrics.hpp
};

/// One sequence's decoding loop over a target and a draft provider (held by reference; they must
/// outlive the Decoder). `reset(prompt, sequence)` starts a sequence (resetting both providers);
/// each `step()` runs draft -> one target evaluate over the whole tree -> verify -> commit and
/// returns the tokens it emitted (empty once finished). Buffers are kept across steps and
/// sequences, so a steady tree shape allocates nothing after the first step (the providers and
/// the metrics' per-level vectors aside).
///
/// Rows: the providers return raw logits; every row (draft and target) is checked
/// (check_provider_output: names "draft.logits" / "target.logits") and mapped through the same
/// `options.warp` before drafting and verification. The cascade deferral and greedy lossy test
/// read the unwarped softmax rows.
///
/// Randomness (decode/sequence.hpp): drafting uses the step's draft stream, verification its
/// verify stream, autoregressive sampling draw 0 of its sample stream; each drafter and verifier
/// documents its per-node draws. Chain methods (SD, cascade, lossy) verify with verify_chain,
/// whose position i uses the stream at root position + i; block SD uses the verify stream's
/// draws 0..L; tree methods use verify_tree's node streams; MTAD draw 0 of the verify stream.
template <LogitsProvider Target, LogitsProvider Draft>
class Decoder {
 public:
  Decoder(Target& target, Draft& draft, DecodeOptions options)
      : target_(&target), draft_(&draft), options_(std::move(options)) {
    vocab_ = static_cast<std::int64_t>(target.vocab_size());
    if (vocab_ < 1) detail::fail("target", "vocabulary size {} must be >= 1", vocab_);
    if (uses_draft(options_.method)) {
      check_same_vocabulary(static_cast<std::int64_t>(draft.vocab_size()), vocab_);
    }
    options_.validate(vocab_);
    rule_ = make_rule();
    workspace_.reserve(std::max<std::size_t>(
        1 << 16, 4 * (rsd_s_workspace_size(std::max(options_.width, 1), vocab_) +
                      static_cast<std::size_t>(vocab_) * 16)));
  }

  const DecodeOptions& options() const { return options_; }
  std::int64_t vocab_size() const { return vocab_; }

  /// Starts sequence `sequence` from `prompt` (non-empty, tokens in the vocabulary): resets both
  /// providers and the metrics. Throws specdec::Error("prompt") otherwise.
  void reset(std::span<const Token> prompt, std::uint32_t sequence = 0) {
    state_ = SequenceState(prompt, vocab_, options_.seed, sequence);
    target_->reset(prompt);
    if (uses_draft(options_.method)) draft_->reset(prompt);
    metrics_ = DecodeMetrics{};
    metrics_.sequences = 1;
    state_.finished = options_.max_new_tokens == 0;
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
    const auto committed = state_.length();
    if (target_->committed_length() != committed) {
      detail::fail("target", "committed length {} differs from the sequence's {}",
                   target_->committed_length(), committed);
    }
    if (uses_draft(options_.method) && draft_->committed_length() != committed) {
      detail::fail("draft", "committed length {} differs from the sequence's {}",
                   draft_->committed_length(), committed);
    }
    StepRecord record;
    switch (options_.method) {
      case Method::kAutoregressive:
        step_autoregressive();
        break;
      case Method::kMtad:
        step_mtad(record);
        break;
      case Method::kSd:
      case Method::kSdBlock:
      case Method::kCascade:
      case Method::kLossy:
        step_chain(record);
        break;
      default:
        step_tree(record);
        break;
    }
    // Output: stop at the end token or max_new_tokens.
    const auto room = static_cast<std::size_t>(options_.max_new_tokens - state_.generated_count());
    std::size_t keep = std::min(room, emitted_.size());
    for (std::size_t i = 0; i < keep; ++i) {
      if (options_.end_token != kNoToken && emitted_[i] == options_.end_token) {
        keep = i + 1;
        state_.finished = true;
        break;
      }
    }
    emitted_.resize(keep);
    state_.append(emitted_);
    if (state_.generated_count() >= options_.max_new_tokens) state_.finished = true;
    record.emitted = static_cast<std::int64_t>(keep);
    metrics_.record_step(record);
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
  Rule make_rule() const {
    switch (options_.method) {
      case Method::kSd:
        return Rejection{};
      case Method::kSpecInfer:
        return MultiRound{};
      case Method::kSpecTr:
        return SpecTr{static_cast<double>(options_.spectr_gamma)};
      case Method::kRsdC:
      case Method::kRsdS:
        return Recursive{};
      case Method::kCascade:
        return options_.cascade;
      case Method::kLossy:
        return options_.lossy;
      default:
        return Rejection{};
    }
  }

  // Warps logits row `r` of `logits` into `out` (and the unwarped softmax into `raw` if given).
  void warp_row(std::span<const float> logits, std::span<float> out, float* raw) {
    auto scope = workspace_.scope();
    auto idx = workspace_.take<std::int32_t>(static_cast<std::size_t>(vocab_));
    unchecked::warp_logits<float>(options_.warp, logits, out, idx.data());
    if (raw != nullptr) {
      unchecked::warp_logits<float>(Warp{}, logits, std::span<float>(raw, out.size()), idx.data());
    }
  }

  // The cascade deferral and the greedy lossy test read unwarped rows.
  bool needs_raw() const {
    return options_.method == Method::kCascade ||
           (options_.method == Method::kLossy && options_.lossy.greedy);
  }

  // Evaluates the target over batch_ and fills target_rows_ (+ raw_target_rows_).
  void evaluate_target() {
    const auto rows = static_cast<std::size_t>(batch_.rows());
    const auto v = static_cast<std::size_t>(vocab_);
    target_logits_.resize(rows * v);
    MatrixView<float> logits(target_logits_.data(), static_cast<std::int64_t>(rows), vocab_);
    target_->evaluate(batch_, logits);
    check_provider_output("target.logits", MatrixView<const float>(logits),
                          static_cast<std::int64_t>(rows), vocab_);
    target_rows_.resize(rows * v);
    raw_target_rows_.resize(needs_raw() ? rows * v : 0);
    for (std::size_t r = 0; r < rows; ++r) {
      warp_row(std::span<const float>(target_logits_.data() + r * v, v),
               std::span<float>(target_rows_.data() + r * v, v),
               needs_raw() ? raw_target_rows_.data() + r * v : nullptr);
    }
  }

  // The draft-row callback: evaluates the draft over the tree so far (one draft call) and writes
  // the warped rows of `nodes`; keeps the unwarped rows (in the same order as the drafted tree's
  // rows) for the cascade deferral.
  void draft_rows(const DraftTree& tree, std::span<const std::int32_t> nodes,
                  MatrixView<float> rows) {
    draft_batch_.assign(tree, state_.length());
    const auto n = static_cast<std::size_t>(draft_batch_.rows());
    const auto v = static_cast<std::size_t>(vocab_);
    draft_logits_.resize(n * v);
    MatrixView<float> logits(draft_logits_.data(), static_cast<std::int64_t>(n), vocab_);
    draft_->evaluate(draft_batch_, logits);
    check_provider_output("draft.logits", MatrixView<const float>(logits),
                          static_cast<std::int64_t>(n), vocab_);
    ++draft_calls_;
    const auto first = raw_draft_rows_.size();
    if (needs_raw()) raw_draft_rows_.resize(first + nodes.size() * v);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto r = static_cast<std::size_t>(nodes[i] + 1);
      warp_row(std::span<const float>(draft_logits_.data() + r * v, v),
               rows.row(static_cast<std::int64_t>(i)),
               needs_raw() ? raw_draft_rows_.data() + first + i * v : nullptr);
    }
  }

  auto row_function() {
    return [this](const DraftTree& tree, std::span<const std::int32_t> nodes,
                  MatrixView<float> rows) { draft_rows(tree, nodes, rows); };
  }

  void commit(std::span<const std::int32_t> kept, Token next) {
    target_->commit(batch_, kept, next);
    if (uses_draft(options_.method)) draft_->commit(batch_, kept, next);
  }

  void step_autoregressive() {
    batch_.assign(empty_tree_, state_.length());
    evaluate_target();
    const auto v = static_cast<std::size_t>(vocab_);
    const Token t = static_cast<Token>(
        detail::sample_row(target_rows_.data(), vocab_, state_.sample_stream().uniform(0)));
    (void)v;
    commit({}, t);
    emitted_.push_back(t);
  }

  // SD, block SD, cascade, lossy: one chain of L draft tokens.
  void step_chain(StepRecord& record) {
    draft_calls_ = 0;
    raw_draft_rows_.clear();
    draft_iid_chains(1, options_.depth, vocab_, row_function(), state_.draft_stream(), drafted_,
                     workspace_);
    const auto length = static_cast<std::size_t>(drafted_.size());
    const auto v = static_cast<std::size_t>(vocab_);
    batch_.assign(drafted_.tree, state_.length());
    evaluate_target();
    out_.resize(length + 1);
    const std::span<const float> draft_rows(drafted_.rows.data(), length * v);
    const std::span<const Token> tokens(drafted_.tree.tokens);
    ChainVerdict verdict;
    if (options_.method == Method::kSdBlock) {
      verdict = verify_block(std::span<const float>(target_rows_), draft_rows, tokens, vocab_,
                             state_.verify_stream(), std::span<Token>(out_), workspace_);
    } else {
      verdict = verify_chain(
          rule_, std::span<const float>(target_rows_), draft_rows, tokens, vocab_,
          state_.verify_stream(), std::span<Token>(out_), workspace_,
          std::span<const float>(raw_target_rows_),
          std::span<const float>(raw_draft_rows_.data(), needs_raw() ? length * v : 0));
    }
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    for (std::int32_t i = 0; i < verdict.accepted; ++i) kept_[static_cast<std::size_t>(i)] = i;
    commit(kept_, out_[static_cast<std::size_t>(verdict.accepted)]);
    emitted_.assign(out_.begin(), out_.begin() + verdict.emitted);
    record.tree_tokens = static_cast<std::int64_t>(length);
    record.tree_depth = static_cast<std::int32_t>(length);
    record.accepted_depth = verdict.accepted;
    record.draft_calls = draft_calls_;
  }

  // SpecInfer, SpecTr, RSD-C, RSD-S: a tree verified from the root.
  void step_tree(StepRecord& record) {
    draft_calls_ = 0;
    raw_draft_rows_.clear();
    switch (options_.method) {
      case Method::kSpecInfer:
      case Method::kSpecTr:
        draft_iid_chains(options_.width, options_.depth, vocab_, row_function(),
                         state_.draft_stream(), drafted_, workspace_);
        break;
      case Method::kRsdC:
        draft_rsd_c(options_.branching, vocab_, row_function(), state_.draft_stream(), drafted_,
                    workspace_);
        break;
      default:
        draft_rsd_s(options_.width, options_.depth, vocab_, row_function(), state_.draft_stream(),
                    drafted_, workspace_);
        break;
    }
    const auto n = static_cast<std::size_t>(drafted_.size());
    const auto v = static_cast<std::size_t>(vocab_);
    batch_.assign(drafted_.tree, state_.length());
    evaluate_target();
    // Draft rows by node (row 0 = root); leaves get the target row (never read).
    tree_draft_rows_.resize((n + 1) * v);
    for (std::size_t r = 0; r <= n; ++r) {
      const auto node = static_cast<std::int32_t>(r) - 1;
      const float* src =
          drafted_.has_row(node) ? drafted_.row(node).data() : target_rows_.data() + r * v;
      std::copy(src, src + v, tree_draft_rows_.data() + r * v);
    }
    const auto depth = drafted_.tree.max_depth();
    kept_.resize(static_cast<std::size_t>(depth));
    const auto verdict =
        verify_tree(rule_, drafted_.tree.tokens, drafted_.tree.parents,
                    std::span<const float>(target_rows_), std::span<const float>(tree_draft_rows_),
                    vocab_, state_.verify_stream(), std::span<std::int32_t>(kept_), workspace_);
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    commit(kept_, verdict.token);
    emitted_.clear();
    for (auto node : kept_)
      emitted_.push_back(drafted_.tree.tokens[static_cast<std::size_t>(node)]);
    emitted_.push_back(verdict.token);
    record.tree_tokens = static_cast<std::int64_t>(n);
    record.tree_depth = depth;
    record.accepted_depth = verdict.accepted;
    record.draft_calls = draft_calls_;
  }

  // MTAD: beam sampling / search with the draft, the best beam verified as one block.
  void step_mtad(StepRecord& record) {
    draft_calls_ = 0;
    raw_draft_rows_.clear();
    beam_search(options_.width, options_.depth, vocab_, row_function(),
                options_.mtad_beam_search ? BeamMode::kDeterministic : BeamMode::kSampling,
                state_.draft_stream(), drafted_, best_, workspace_);
    const auto length = best_.tokens.size();
    chain_.clear();
    for (std::size_t i = 0; i < length; ++i) {
      chain_.add(best_.tokens[i], static_cast<std::int32_t>(i) - 1);
    }
    batch_.assign(chain_, state_.length());
    evaluate_target();
    log_probs_.resize(length);
    for (std::size_t i = 0; i < length; ++i) {
      log_probs_[i] = std::min(
          0.0f, best_.prefix_log_probs[i] - (i == 0 ? 0.0f : best_.prefix_log_probs[i - 1]));
    }
    const auto verdict = verify_mtad(
        std::span<const Token>(best_.tokens), std::span<const float>(log_probs_),
        MatrixView<const float>(target_rows_.data(), static_cast<std::int64_t>(length) + 1, vocab_),
        options_.tau, state_.verify_stream());
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    for (std::int32_t i = 0; i < verdict.accepted; ++i) kept_[static_cast<std::size_t>(i)] = i;
    commit(kept_, verdict.token);
    emitted_.assign(best_.tokens.begin(), best_.tokens.begin() + verdict.accepted);
    emitted_.push_back(verdict.token);
    record.tree_tokens = static_cast<std::int64_t>(length);
    record.tree_depth = static_cast<std::int32_t>(length);
    record.accepted_depth = verdict.accepted;
    record.draft_calls = draft_calls_;
  }

  Target* target_;
  Draft* draft_;
  DecodeOptions options_;
  std::int64_t vocab_ = 0;
  Rule rule_;
  SequenceState state_;
  DecodeMetrics metrics_;
  bool started_ = false;
  std::int64_t draft_calls_ = 0;

  Workspace workspace_;
  DraftTree empty_tree_;
  DraftTree chain_;
  DraftedTree drafted_;
  BeamSearchResult best_;
  TreeBatch batch_;
  TreeBatch draft_batch_;
  std::vector<float> target_logits_, target_rows_, raw_target_rows_;
  std::vector<float> draft_logits_, raw_draft_rows_, tree_draft_rows_;
  std::vector<float> log_probs_;
  std::vector<std::int32_t> kept_;
  std::vector<Token> out_;
  std::vector<Token> emitted_;
};

/// Generates from `prompt` with `target` and `draft` (any LogitsProvider; draft unused for
/// kAutoregressive, and then its vocabulary is not checked). Same seed + sequence id = same
/// tokens. Throws specdec::Error naming the bad argument (prompt, a field of options, draft for
/// a vocabulary mismatch, target.logits / draft.logits for bad provider rows).
template <LogitsProvider Target, LogitsProvider Draft>
DecodeResult decode(Target& target, Draft& draft, std::span<const Token> prompt,
                    const DecodeOptions& options, std::uint32_t sequence = 0) {
  Decoder<Target, Draft> decoder(target, draft, options);
  decoder.reset(prompt, sequence);
  return decoder.run();
}

/// Several sequences in parallel on a backend::Cpu thread pool; make_target(i) / make_draft(i)
/// build sequence i's providers; results[i] equals decode(... , sequence = i) whatever the
/// thread count (0 = every hardware thread). The first error thrown by any sequence is rethrown.
/// Runs on backend::default_thread_pool(), so it must not be called from one of that pool's tasks.
template <class MakeTarget, class MakeDraft>
std::vector<DecodeResult> decode_batch(MakeTarget&& make_target, MakeDraft&& make_draft,
                                       std::span<const std::vector<Token>> prompts,
                                       const DecodeOptions& options,
                                       backend::Cpu cpu = backend::cpu) {
  if (cpu.threads < 0) detail::fail("cpu.threads", "{} must be >= 0 (0 = all)", cpu.threads);
  std::vector<DecodeResult> results(prompts.size());
  backend::default_thread_pool().run(
      static_cast<std::int64_t>(prompts.size()), cpu.threads, [&](std::int64_t i, int /*slot*/) {
        auto target = make_target(static_cast<std::size_t>(i));
        auto draft = make_draft(static_cast<std::size_t>(i));
        results[static_cast<std::size_t>(i)] =
            decode(target, draft, std::span<const Token>(prompts[static_cast<std::size_t>(i)]),
                   options, static_cast<std::uint32_t>(i));
      });
  return results;
}

}  // namespace specdec
