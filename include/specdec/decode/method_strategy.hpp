// SPDX-License-Identifier: MIT
// The built-in decoding methods (autoregressive, SD, block SD, SpecInfer, SpecTr, RSD-C, RSD-S,
// MTAD, cascades, lossy) as one DraftStrategy over a draft LogitsProvider.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/core/enum_names.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/draft/beam_search.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/iid.hpp"
#include "specdec/draft/rsd_c.hpp"
#include "specdec/draft/stochastic_beam.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/block_logits.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/mtad.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/tree.hpp"
#include "specdec/verify/tree_logits.hpp"

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

namespace detail {

/// The names of kAllMethods, in its order (with the words of parse errors).
inline constexpr EnumNames<Method, 10> kMethodNames{
    kAllMethods,
    {"autoregressive", "sd", "sd_block", "specinfer", "spectr", "rsd_c", "rsd_s", "mtad", "cascade",
     "lossy"},
    "method",
    "a decoding method",
    "a decoding method"};

}  // namespace detail

/// The method's name as parse_method reads it ("autoregressive", "sd", "sd_block", "specinfer",
/// "spectr", "rsd_c", "rsd_s", "mtad", "cascade", "lossy").
inline std::string_view method_name(Method m) { return detail::kMethodNames.name(m); }

/// Parses a method name (see method_name). Throws specdec::Error("method") for any other string.
inline Method parse_method(std::string_view name) { return detail::kMethodNames.parse(name); }

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
    loop().validate(vocab);
    method_name(method);  // throws for a value outside Method
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
        throw Error(fmt::format("cascade.{}", e.argument()), e.problem());
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
  }

  /// The fields every method shares (warp, max_new_tokens, end_token, seed).
  LoopOptions loop() const { return {warp, max_new_tokens, end_token, seed}; }
};

/// The DraftStrategy of every Method over a draft LogitsProvider (held by reference; it must
/// outlive the strategy). Draft rows are checked (provider::check_output names "draft.logits") and
/// warped with `options.warp`, like the target's; the cascade deferral and the greedy lossy test
/// read the unwarped softmax rows of both.
///
/// Randomness (decode/sequence.hpp): drafting uses the step's draft stream, verification its
/// verify stream, autoregressive sampling draw 0 of its sample stream; each drafter and verifier
/// documents its per-node draws. Plain sampling, SD, block SD and the tree methods verify from
/// the target's logits (needs_target_rows() is false: verify_chain_logits, verify_block_logits,
/// verify_tree_logits with the draft rows drafting wrote), with the same draws and tokens as on
/// warped rows; MTAD, cascade and lossy read the warped target rows. Chain methods (SD, cascade,
/// lossy) verify with verify_chain,
/// whose position i uses the stream at root position + i; block SD uses the verify stream's
/// draws 0..L; tree methods use verify_tree's node streams; MTAD draw 0 of the verify stream.
template <LogitsProvider Draft>
class MethodStrategy {
 public:
  MethodStrategy(Draft& draft, DecodeOptions options)
      : draft_(&draft), options_(std::move(options)) {}

  const DecodeOptions& options() const { return options_; }

  /// Validates the options (and, for methods with a draft, its vocabulary) against the target's.
  void prepare(std::int64_t vocab, Workspace& workspace) {
    if (uses_draft(options_.method)) {
      provider::check_same_vocabulary(static_cast<std::int64_t>(draft_->vocab_size()), vocab);
    }
    options_.validate(vocab);
    rule_ = make_rule();
    workspace.reserve(std::max<std::size_t>(
        1 << 16, 4 * (rsd_s_workspace_size(std::max(options_.width, 1), vocab) +
                      static_cast<std::size_t>(vocab) * 16)));
  }

  void reset(std::span<const Token> prompt) {
    if (uses_draft(options_.method)) draft_->reset(prompt);
  }

  /// False where verification reads the target's logits only (every method but MTAD, cascade and
  /// lossy, whose rules read whole warped rows).
  bool needs_target_rows() const {
    return options_.method == Method::kMtad || options_.method == Method::kCascade ||
           options_.method == Method::kLossy;
  }

  const DraftTree& draft(const StepContext& context) {
    draft_calls_ = 0;
    raw_draft_rows_.clear();
    if (!uses_draft(options_.method)) return empty_tree_;
    if (draft_->committed_length() != context.sequence.length()) {
      detail::fail("draft", "committed length {} differs from the sequence's {}",
                   draft_->committed_length(), context.sequence.length());
    }
    auto rows = [this, &context](const DraftTree& tree, std::span<const std::int32_t> nodes,
                                 MatrixView<float> out) { draft_rows(context, tree, nodes, out); };
    const auto stream = context.sequence.draft_stream();
    switch (options_.method) {
      case Method::kSd:
      case Method::kSdBlock:
      case Method::kCascade:
      case Method::kLossy:
        draft_iid_chains(1, options_.depth, context.vocab, rows, stream, drafted_,
                         context.workspace);
        return drafted_.tree;
      case Method::kSpecInfer:
      case Method::kSpecTr:
        draft_iid_chains(options_.width, options_.depth, context.vocab, rows, stream, drafted_,
                         context.workspace);
        return drafted_.tree;
      case Method::kRsdC:
        draft_rsd_c(options_.branching, context.vocab, rows, stream, drafted_, context.workspace);
        return drafted_.tree;
      case Method::kRsdS:
        draft_rsd_s(options_.width, options_.depth, context.vocab, rows, stream, drafted_,
                    context.workspace);
        return drafted_.tree;
      default: {  // kMtad: the best beam becomes a chain
        beam_search({.width = options_.width,
                     .length = options_.depth,
                     .mode = options_.mtad_beam_search ? BeamMode::kDeterministic
                                                       : BeamMode::kSampling},
                    context.vocab, rows, stream, drafted_, best_, context.workspace);
        chain_.clear();
        for (std::size_t i = 0; i < best_.tokens.size(); ++i) {
          chain_.add(best_.tokens[i], static_cast<std::int32_t>(i) - 1);
        }
        return chain_;
      }
    }
  }

  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    switch (options_.method) {
      case Method::kAutoregressive:
        return verify_autoregressive(context, scores);
      case Method::kMtad:
        return verify_mtad(context, scores);
      case Method::kSd:
      case Method::kSdBlock:
      case Method::kCascade:
      case Method::kLossy:
        return verify_chain(context, scores);
      default:
        return verify_tree(context, scores);
    }
  }

  void commit(const TreeBatch& batch, std::span<const std::int32_t> accepted, Token next) {
    if (uses_draft(options_.method)) draft_->commit(batch, accepted, next);
  }

 private:
  Rule make_rule() const {
    switch (options_.method) {
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

  // The cascade deferral and the greedy lossy test read unwarped rows.
  bool needs_raw() const {
    return options_.method == Method::kCascade ||
           (options_.method == Method::kLossy && options_.lossy.greedy);
  }

  // The draft-row callback: evaluates the draft over the tree so far (one draft call) and writes
  // the warped rows of `nodes`; keeps the unwarped rows (in the same order as the drafted tree's
  // rows) for the cascade deferral.
  void draft_rows(const StepContext& context, const DraftTree& tree,
                  std::span<const std::int32_t> nodes, MatrixView<float> rows) {
    draft_batch_.assign(tree, context.sequence.length());
    const auto n = static_cast<std::size_t>(draft_batch_.rows());
    const auto v = static_cast<std::size_t>(context.vocab);
    draft_logits_.resize(n * v);
    MatrixView<float> logits(draft_logits_.data(), static_cast<std::int64_t>(n), context.vocab);
    draft_->evaluate(draft_batch_, logits);
    provider::check_output("draft.logits", MatrixView<const float>(logits),
                           static_cast<std::int64_t>(n), context.vocab);
    ++draft_calls_;
    const auto first = raw_draft_rows_.size();
    if (needs_raw()) raw_draft_rows_.resize(first + nodes.size() * v);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto r = static_cast<std::size_t>(nodes[i] + 1);
      detail::warp_row(options_.warp, std::span<const float>(draft_logits_.data() + r * v, v),
                       rows.row(static_cast<std::int64_t>(i)),
                       needs_raw() ? raw_draft_rows_.data() + first + i * v : nullptr,
                       context.workspace);
    }
  }

  // The target's logits as the from-logits verifiers read them.
  static detail::LogitRows<float> target_logits(const TargetScores& scores) {
    return {scores.logits.data, scores.logits.stride, "target.logits", 0};
  }

  // Plain sampling from the target: draw 0 of the sample stream.
  StepVerdict verify_autoregressive(const StepContext& context, const TargetScores& scores) {
    const float u = context.sequence.sample_stream().uniform(0);
    if (scores.rows.rows > 0) {
      return {{}, static_cast<Token>(detail::sample_row(scores.rows.data, context.vocab, u)), 0};
    }
    auto scope = context.workspace.scope();
    auto bytes = context.workspace.take<std::byte>(detail::chain_logits_scratch_size(context.vocab));
    const Token next =
        detail::sample_warped_logits(scores.warp, target_logits(scores), 0, context.vocab, u,
                                     detail::chain_logits_scratch(bytes.data(), context.vocab));
    return {{}, next, 0};
  }

  // SD and block SD from the target's logits and the draft rows drafting wrote.
  StepVerdict verify_chain_from_logits(const StepContext& context, const TargetScores& scores) {
    const auto length = static_cast<std::int64_t>(drafted_.size());
    out_.resize(static_cast<std::size_t>(length) + 1);
    auto scope = context.workspace.scope();
    auto bytes = context.workspace.take<std::byte>(detail::chain_logits_scratch_size(context.vocab));
    const auto scratch = detail::chain_logits_scratch(bytes.data(), context.vocab);
    const detail::ChainLogitRows<float> chain{
        .target = target_logits(scores),
        .draft = {nullptr, context.vocab, "draft.logits", 0},
        .tokens = drafted_.tree.tokens.data(),
        .length = length,
        .vocab = context.vocab,
        .draft_probs = drafted_.rows.data()};
    std::int32_t accepted;
    if (options_.method == Method::kSdBlock) {
      auto weights = context.workspace.take<double>(static_cast<std::size_t>(length) + 1);
      accepted = detail::block_verify_logits_unchecked<float>(
          scores.warp, chain, context.sequence.verify_stream(), weights.data(), "draft_tokens",
          scratch, out_.data());
    } else {
      accepted = detail::verify_chain_logits_unchecked<float>(
                     scores.warp, chain, context.sequence.verify_stream(), out_.data(),
                     "draft_tokens", scratch)
                     .accepted;
    }
    return chain_verdict(accepted, out_[static_cast<std::size_t>(accepted)]);
  }

  // SD, block SD, cascade, lossy: one chain of L draft tokens.
  StepVerdict verify_chain(const StepContext& context, const TargetScores& scores) {
    if (scores.rows.rows == 0) return verify_chain_from_logits(context, scores);
    const auto length = static_cast<std::size_t>(drafted_.size());
    const auto v = static_cast<std::size_t>(context.vocab);
    const std::span<const float> target_rows(scores.rows.data, (length + 1) * v);
    const std::span<const float> draft_rows(drafted_.rows.data(), length * v);
    const std::span<const Token> tokens(drafted_.tree.tokens);
    out_.resize(length + 1);
    ChainVerdict verdict;
    if (options_.method == Method::kSdBlock) {
      verdict =
          verify_block(target_rows, draft_rows, tokens, context.vocab,
                       context.sequence.verify_stream(), std::span<Token>(out_), context.workspace);
    } else {
      raw_target_rows_.resize(needs_raw() ? (length + 1) * v : 0);
      for (std::size_t r = 0; r < raw_target_rows_.size() / v; ++r) {
        auto scope = context.workspace.scope();
        auto idx = context.workspace.take<std::int32_t>(warp_workspace_size(context.vocab) /
                                                        sizeof(std::int32_t));
        unchecked::warp_logits<float>(Warp{}, scores.logits.row(static_cast<std::int64_t>(r)),
                                      std::span<float>(raw_target_rows_.data() + r * v, v),
                                      idx.data());
      }
      const RowSpans<float> rows{
          .target = target_rows,
          .draft = draft_rows,
          .raw_target = raw_target_rows_,
          .raw_draft = std::span<const float>(raw_draft_rows_.data(), needs_raw() ? length * v : 0)};
      verdict = specdec::verify_chain(rule_, rows, tokens, context.vocab,
                                      context.sequence.verify_stream(), std::span<Token>(out_),
                                      context.workspace);
    }
    return chain_verdict(verdict.accepted, out_[static_cast<std::size_t>(verdict.accepted)]);
  }

  // SpecInfer, SpecTr, RSD-C, RSD-S: a tree verified from the root.
  StepVerdict verify_tree(const StepContext& context, const TargetScores& scores) {
    const auto n = static_cast<std::size_t>(drafted_.size());
    const auto v = static_cast<std::size_t>(context.vocab);
    if (scores.rows.rows == 0) {
      // From the target's logits; the draft rows drafting wrote, where a node has one.
      draft_row_of_.resize(n + 1);
      for (std::size_t r = 0; r <= n; ++r) {
        const auto node = static_cast<std::int32_t>(r) - 1;
        draft_row_of_[r] = drafted_.has_row(node) ? drafted_.row(node).data() : nullptr;
      }
      kept_.resize(static_cast<std::size_t>(drafted_.tree.max_depth()));
      auto scope = context.workspace.scope();
      auto candidates = context.workspace.take<Token>(n + 1);
      auto ids = context.workspace.take<std::int32_t>(n + 1);
      auto bytes =
          context.workspace.take<std::byte>(detail::tree_logits_scratch_size(context.vocab));
      const auto verdict = detail::verify_tree_logits_unchecked<float>(
          rule_, scores.warp, drafted_.tree.view(),
          detail::TreeLogitRows<float>{
              .target = target_logits(scores),
              .draft = detail::LogitRows<float>{nullptr, context.vocab, "draft.logits", 0},
              .draft_probs = draft_row_of_.data(),
              .vocab = context.vocab},
          context.sequence.verify_stream(),
          TreeBuffers{.accepted_nodes = kept_.data(), .candidates = candidates.data(),
                      .ids = ids.data()},
          detail::tree_logits_scratch(bytes.data(), context.vocab));
      kept_.resize(static_cast<std::size_t>(verdict.accepted));
      return {kept_, verdict.token, draft_calls_};
    }
    // Draft rows by node (row 0 = root); leaves get the target row (never read).
    tree_draft_rows_.resize((n + 1) * v);
    for (std::size_t r = 0; r <= n; ++r) {
      const auto node = static_cast<std::int32_t>(r) - 1;
      const float* src =
          drafted_.has_row(node) ? drafted_.row(node).data() : scores.rows.data + r * v;
      std::copy(src, src + v, tree_draft_rows_.data() + r * v);
    }
    kept_.resize(static_cast<std::size_t>(drafted_.tree.max_depth()));
    const auto verdict = specdec::verify_tree(rule_, drafted_.tree.view(),
                                              std::span<const float>(scores.rows.data, (n + 1) * v),
                                              std::span<const float>(tree_draft_rows_),
                                              context.vocab, context.sequence.verify_stream(),
                                              std::span<std::int32_t>(kept_), context.workspace);
    kept_.resize(static_cast<std::size_t>(verdict.accepted));
    return {kept_, verdict.token, draft_calls_};
  }

  // MTAD: the best beam verified as one block.
  StepVerdict verify_mtad(const StepContext& context, const TargetScores& scores) {
    const auto length = best_.tokens.size();
    log_probs_.resize(length);
    for (std::size_t i = 0; i < length; ++i) {
      log_probs_[i] = std::min(
          0.0f, best_.prefix_log_probs[i] - (i == 0 ? 0.0f : best_.prefix_log_probs[i - 1]));
    }
    const auto verdict = specdec::verify_mtad(
        std::span<const Token>(best_.tokens), std::span<const float>(log_probs_),
        MatrixView<const float>(scores.rows.data, static_cast<std::int64_t>(length) + 1,
                                context.vocab),
        options_.tau, context.sequence.verify_stream());
    return chain_verdict(verdict.accepted, verdict.token);
  }

  // A chain's first `accepted` nodes and the token after them.
  StepVerdict chain_verdict(std::int32_t accepted, Token next) {
    kept_.resize(static_cast<std::size_t>(accepted));
    for (std::int32_t i = 0; i < accepted; ++i) kept_[static_cast<std::size_t>(i)] = i;
    return {kept_, next, draft_calls_};
  }

  Draft* draft_;
  DecodeOptions options_;
  Rule rule_;
  std::int64_t draft_calls_ = 0;
  DraftTree empty_tree_;
  DraftTree chain_;
  DraftedTree drafted_;
  BeamSearchResult best_;
  TreeBatch draft_batch_;
  std::vector<float> draft_logits_, raw_draft_rows_, raw_target_rows_, tree_draft_rows_;
  std::vector<float> log_probs_;
  std::vector<std::int32_t> kept_;
  std::vector<const float*> draft_row_of_;
  std::vector<Token> out_;
};

}  // namespace specdec
