// SPDX-License-Identifier: MIT
// ReDrafter as a DraftStrategy: the recurrent draft head (draft/redrafter.hpp) drafts from the
// target's hidden states, dynamic tree attention dedups its beams, and four verification modes
// (exact, greedy, typical, parity) verify the scored tree; the Decoder runs the loop.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/metrics.hpp"
#include "specdec/decode/sequence.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/draft/redrafter.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec {

/// How a ReDrafter step is drafted and verified.
enum class ReDrafterVerification {
  /// Stochastic beam search through the head (sibling sets are samples without replacement) and
  /// recursive rejection sampling on the tree: lossless (the output is the warped target's law).
  kExact,
  /// The reference's deterministic beam search and greedy matching: the longest beam prefix equal
  /// to the target's argmax tokens, then the argmax token. Equals greedy decoding of the target.
  kGreedy,
  /// Deterministic beam search and typical acceptance (Medusa's criterion) walked over the tree.
  /// Not lossless.
  kTypical,
  /// The reference's sampling rule, kept for parity with it: each beam's draft tokens are tested
  /// independently (u * draft < target), the beam with the longest accepted prefix wins (first
  /// beam on ties) and the next token comes from that beam's residual. NOT lossless: the beams
  /// are the draft's top sequences, not samples from it (docs/redrafter.md gives the bias).
  kParity,
};

inline std::string_view redrafter_verification_name(ReDrafterVerification v) {
  switch (v) {
    case ReDrafterVerification::kExact:
      return "exact";
    case ReDrafterVerification::kGreedy:
      return "greedy";
    case ReDrafterVerification::kTypical:
      return "typical";
    case ReDrafterVerification::kParity:
      return "parity";
  }
  return "unknown";
}

/// Parses "exact", "greedy", "typical" or "parity"; throws specdec::Error("verification").
inline ReDrafterVerification parse_redrafter_verification(std::string_view name) {
  for (auto v : {ReDrafterVerification::kExact, ReDrafterVerification::kGreedy,
                 ReDrafterVerification::kTypical, ReDrafterVerification::kParity}) {
    if (redrafter_verification_name(v) == name) return v;
  }
  detail::fail("verification", "'{}' is not one of exact, greedy, typical, parity", name);
}

/// Options of ReDrafterStrategy and decode_redrafter.
struct ReDrafterOptions {
  ReDrafterVerification verification = ReDrafterVerification::kExact;
  Warp warp{};  // applied to the target rows; the head's rows are its own (top-k, no temperature)
  std::int32_t width = 4;  // W beams
  std::int32_t depth = 4;  // draft tokens per beam (the reference's beam length is depth + 1)
  Typical typical{};       // kTypical: epsilon and delta
  std::int32_t max_new_tokens = 32;
  Token end_token = kNoToken;  // stop after emitting it (kNoToken = never)
  std::uint64_t seed = 0;

  /// Throws specdec::Error naming the first bad field.
  void validate(std::int64_t vocab) const {
    switch (verification) {
      case ReDrafterVerification::kExact:
      case ReDrafterVerification::kGreedy:
      case ReDrafterVerification::kTypical:
      case ReDrafterVerification::kParity:
        break;
      default:
        detail::fail("verification", "{} is not a ReDrafterVerification",
                     static_cast<int>(verification));
    }
    warp.validate(vocab);
    if (width < 1) detail::fail("width", "{} must be >= 1", width);
    if (depth < 1) detail::fail("depth", "{} must be >= 1", depth);
    if (static_cast<std::int64_t>(width) * depth > (std::int64_t{1} << 20)) {
      detail::fail("width", "{} beams of depth {} exceed 2^20 tree nodes", width, depth);
    }
    check_typical_parameters(typical.epsilon, typical.delta);
    loop().validate(vocab);
  }

  /// The fields every method shares (warp, max_new_tokens, end_token, seed).
  LoopOptions loop() const { return {warp, max_new_tokens, end_token, seed}; }
};

namespace detail {

/// exp of a head log-probability row, exactly 0 for the head's stand-in for log 0.
inline void head_probabilities(std::span<const float> log_probs, float* out) {
  for (std::size_t x = 0; x < log_probs.size(); ++x) {
    out[x] = log_probs[x] < -80.0f ? 0.0f : std::exp(log_probs[x]);
  }
}

/// The reference's sampling rule on deterministic beams (see ReDrafterVerification::kParity).
/// `node_of_beam[w * depth + k]` is the tree node holding beam w's draft token k; target rows are
/// laid out as for verify_tree. Draws: the test of beam w's token k is draw k of
/// `stream.at_node(w + 1)`; the next token is draw 0 of `stream.at_node(0)`.
inline TreeVerdict redrafter_parity_verdict(const ReDrafterBeams& beams,
                                            std::span<const std::int32_t> node_of_beam,
                                            std::span<const float> target_rows, std::int64_t vocab,
                                            const RandomStream& stream,
                                            std::span<std::int32_t> accepted_nodes,
                                            std::vector<float>& scratch) {
  const std::int32_t width = beams.width, depth = beams.length - 1;
  const auto v = static_cast<std::size_t>(vocab);
  scratch.resize(v);
  const auto row_of = [&](std::int32_t w, std::int32_t k) -> std::size_t {
    // The target row that scores beam w's draft token k: the root's, or its parent node's.
    return k == 0 ? 0
                  : static_cast<std::size_t>(
                        node_of_beam[static_cast<std::size_t>(w * depth + k - 1)] + 1);
  };
  std::int32_t best = 0, best_length = -1;
  for (std::int32_t w = 0; w < width; ++w) {
    const auto s = stream.at_node(static_cast<std::uint32_t>(w + 1));
    std::int32_t n = 0;
    while (n < depth) {
      const Token x = beams.token(w, n + 1);
      const float target = target_rows[row_of(w, n) * v + static_cast<std::size_t>(x)];
      const float lq = beams.row(w, n, vocab)[static_cast<std::size_t>(x)];
      const float draft = lq < -80.0f ? 0.0f : std::exp(lq);
      if (!detail::accepts(s.uniform(static_cast<std::uint32_t>(n)), draft, 1.0f, target)) break;
      ++n;
    }
    if (n > best_length) best_length = n, best = w;
  }
  TreeVerdict verdict;
  verdict.accepted = best_length;
  for (std::int32_t k = 0; k < best_length; ++k) {
    accepted_nodes[static_cast<std::size_t>(k)] =
        node_of_beam[static_cast<std::size_t>(best * depth + k)];
  }
  const float u = stream.at_node(0).uniform(0);
  const float* target = target_rows.data() + row_of(best, best_length) * v;
  if (best_length == depth) {
    // The whole beam was accepted: the bonus token comes from the target after its last token.
    const float* bonus = target_rows.data() +
                         static_cast<std::size_t>(
                             node_of_beam[static_cast<std::size_t>(best * depth + depth - 1)] + 1) *
                             v;
    verdict.token = sample_row(bonus, vocab, u);
    verdict.bonus = true;
    return verdict;
  }
  // The chosen beam's residual [target - draft]+ at its first rejected token (the target row
  // itself when that residual is empty).
  head_probabilities(beams.row(best, best_length, vocab), scratch.data());
  double mass = 0.0;
  for (std::size_t x = 0; x < v; ++x) {
    scratch[x] = positive_part(target[x] - scratch[x]);
    mass += scratch[x];
  }
  verdict.token =
      mass >= kResidualFloor ? sample_row(scratch.data(), vocab, u) : sample_row(target, vocab, u);
  return verdict;
}

}  // namespace detail

/// ReDrafter as a DraftStrategy (decode/strategy.hpp): run it with a Decoder over a target that
/// is a HiddenStateProvider whose hidden_size() equals head.config.hidden and whose vocabulary
/// equals head.config.vocab. Holds the head by reference (it must outlive the strategy).
///
/// The loop follows the reference. The first step after reset drafts nothing: the target scores
/// the prompt, which gives the first token (sampled from the warped target row; its argmax for
/// kGreedy) and the hidden state h of the prompt's last token. Every later step starts at the
/// last committed token (the reference's init token) with the hidden state h of the token before
/// it, drafts with the head, and verifies the tree the target scored in one call; the next h is
/// the hidden row of the last kept node (the root when none was kept).
/// - kExact: redrafter_stochastic_beam_search (width W, depth L) draws the tree; verify_tree with
///   the Recursive rule verifies it against the warped target rows. Lossless.
/// - kGreedy / kTypical / kParity: redrafter_beam_search (W beams of L draft tokens); the beams
///   are deduplicated by compress_beams / compressed_to_draft_tree, so the target scores every
///   distinct prefix once. kGreedy and kTypical walk that tree with verify_tree and the Greedy /
///   Typical rule; kParity applies the reference's per-beam rule.
/// Randomness (SequenceState streams): the first token is draw 0 of the sample stream; drafting
/// (kExact) uses the draft stream as draft_rsd_s documents; verification uses the verify stream
/// (verify_tree's draws, or redrafter_parity_verdict's for kParity).
/// Draft calls count head evaluations (one per tree level).
class ReDrafterStrategy {
 public:
  static constexpr bool uses_hidden_states = true;

  ReDrafterStrategy(const ReDrafterHead& head, ReDrafterOptions options)
      : head_(&head), options_(std::move(options)), tree_rows_(head) {}

  const ReDrafterOptions& options() const { return options_; }

  /// Throws specdec::Error: "options.<field>" for a bad option, the head's tensor names (shape), or
  /// "head" for a vocabulary that differs from the target's.
  void prepare(std::int64_t vocab, Workspace& /*workspace*/) {
    try {
      options_.validate(vocab);
    } catch (const Error& e) {
      throw Error(fmt::format("options.{}", e.argument()), e.problem());
    }
    head_->validate();
    if (head_->config.vocab != vocab) {
      detail::fail("head", "vocabulary size {} differs from the target's {}", head_->config.vocab,
                   vocab);
    }
    context_hidden_.resize(static_cast<std::size_t>(head_->config.hidden));
    accepted_.resize(static_cast<std::size_t>(options_.depth));
  }

  void reset(std::span<const Token> /*prompt*/) { has_context_ = false; }

  const DraftTree& draft(const StepContext& context) {
    draft_calls_ = 0;
    tree_.clear();
    if (!has_context_) return tree_;  // the first step scores the prompt alone
    const Token root = context.sequence.tokens.back();
    if (options_.verification == ReDrafterVerification::kExact) {
      redrafter_stochastic_beam_search(tree_rows_, context_hidden_, root, options_.width,
                                       options_.depth, context.sequence.draft_stream(), drafted_,
                                       context.workspace);
      draft_calls_ = drafted_.row_count() > 0 ? drafted_.tree.max_depth() : 0;
      return drafted_.tree;
    }
    redrafter_beam_search(*head_, context_hidden_, root, options_.width, options_.depth + 1,
                          beams_, head_scratch_);
    flat_.clear();
    for (std::int32_t w = 0; w < options_.width; ++w) {
      for (std::int32_t k = 1; k <= options_.depth; ++k) flat_.push_back(beams_.token(w, k));
    }
    compress_beams(flat_, options_.width, context.vocab, compressed_);
    node_of_.resize(static_cast<std::size_t>(compressed_.size()));
    compressed_to_draft_tree(compressed_, tree_, node_of_);
    node_of_beam_.resize(flat_.size());
    for (std::size_t x = 0; x < flat_.size(); ++x) {
      node_of_beam_[x] = node_of_[static_cast<std::size_t>(compressed_.unpacker[x])];
    }
    draft_calls_ = options_.depth;
    return tree_;
  }

  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    if (scores.hidden.cols != head_->config.hidden) {
      detail::fail("head", "hidden size {} differs from the target's hidden_size() {}",
                   head_->config.hidden, scores.hidden.cols);
    }
    const auto v = static_cast<std::size_t>(context.vocab);
    const auto rows = static_cast<std::size_t>(scores.rows.rows);
    const std::span<const float> target_rows(scores.rows.data, rows * v);
    const auto& stream = context.sequence.verify_stream();
    const bool greedy = options_.verification == ReDrafterVerification::kGreedy;
    TreeVerdict verdict;
    if (!has_context_) {
      verdict.token =
          greedy ? static_cast<Token>(detail::row_argmax(target_rows.data(), context.vocab))
                 : detail::sample_row(target_rows.data(), context.vocab,
                                      context.sequence.sample_stream().uniform(0));
      has_context_ = true;
    } else {
      const DraftTree& tree =
          options_.verification == ReDrafterVerification::kExact ? drafted_.tree : tree_;
      switch (options_.verification) {
        case ReDrafterVerification::kExact:
          draft_rows_.resize(rows * v);
          for (std::size_t r = 0; r < rows; ++r) {
            const auto node = static_cast<std::int32_t>(r) - 1;
            // A leaf has no draft row and is never read by the walk: give it the target's.
            const float* row =
                drafted_.has_row(node) ? drafted_.row(node).data() : target_rows.data() + r * v;
            std::copy_n(row, v, draft_rows_.begin() + static_cast<std::ptrdiff_t>(r * v));
          }
          verdict =
              verify_tree<float>(Recursive{}, tree.view(), target_rows, draft_rows_,
                                 context.vocab, stream, accepted_, context.workspace);
          break;
        case ReDrafterVerification::kGreedy:
          verdict =
              verify_tree<float>(Greedy{}, tree.view(), target_rows, target_rows,
                                 context.vocab, stream, accepted_, context.workspace);
          break;
        case ReDrafterVerification::kTypical:
          verdict =
              verify_tree<float>(options_.typical, tree.view(), target_rows,
                                 target_rows, context.vocab, stream, accepted_, context.workspace);
          break;
        case ReDrafterVerification::kParity:
          verdict = detail::redrafter_parity_verdict(beams_, node_of_beam_, target_rows,
                                                     context.vocab, stream, accepted_, scratch_);
          break;
      }
    }
    const auto kept = static_cast<std::size_t>(verdict.accepted);
    const std::size_t last_row = kept == 0 ? 0 : static_cast<std::size_t>(accepted_[kept - 1] + 1);
    const auto h = static_cast<std::size_t>(head_->config.hidden);
    std::copy_n(scores.hidden.data + last_row * h, h, context_hidden_.begin());
    return {std::span<const std::int32_t>(accepted_.data(), kept), verdict.token, draft_calls_};
  }

  void commit(const TreeBatch& /*batch*/, std::span<const std::int32_t> /*accepted*/,
              Token /*next*/) {}

 private:
  const ReDrafterHead* head_;
  ReDrafterOptions options_;
  bool has_context_ = false;  // false until the prompt's hidden state is known
  std::int64_t draft_calls_ = 0;
  std::vector<float> context_hidden_;
  DraftTree tree_;
  DraftedTree drafted_;
  ReDrafterTreeRows tree_rows_;    // the head on the exact mode's tree, its buffers reused
  ReDrafterScratch head_scratch_;  // the other modes' beam search
  ReDrafterBeams beams_;
  CompressedBeams compressed_;
  std::vector<Token> flat_;
  std::vector<std::int32_t> node_of_, node_of_beam_, accepted_;
  std::vector<float> draft_rows_, scratch_;
};

/// Generates from `prompt` with ReDrafter: a Decoder over `target` with ReDrafterStrategy(head,
/// options) (see there for the loop, the modes and the draws). Same seed and sequence, same
/// tokens. Metrics: one StepRecord per target call (the first records no tree and one token).
/// Throws specdec::Error naming the bad argument: "options" with the field, "prompt", "head"
/// (shape, or vocabulary / hidden size mismatch), "target.logits" / "target.hidden" for bad
/// provider rows.
template <HiddenStateProvider Target>
DecodeResult decode_redrafter(Target& target, const ReDrafterHead& head,
                              std::span<const Token> prompt, const ReDrafterOptions& options,
                              std::uint32_t sequence = 0) {
  Decoder<Target, ReDrafterStrategy> decoder(target, ReDrafterStrategy(head, options),
                                             options.loop());
  if (static_cast<std::int64_t>(target.hidden_size()) != head.config.hidden) {
    detail::fail("head", "hidden size {} differs from the target's hidden_size() {}",
                 head.config.hidden, target.hidden_size());
  }
  decoder.reset(prompt, sequence);
  return decoder.run();
}

}  // namespace specdec
