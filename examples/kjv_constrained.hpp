// SPDX-License-Identifier: MIT
// Structured output on the trained pair: a grammar of verse references ("John 3:16 text\n", a
// character-level automaton over bytes), the per-node masks it gives a draft tree in xgrammar's
// packed layout, a draft provider that applies them (or not) to the draft's rows, and a
// DraftStrategy that drafts a chain (SD) or a top-k tree (Sequoia, EAGLE-2) and verifies it with
// the constrained verifiers of specdec/verify/constrained_logits.hpp. What an engine with a
// grammar engine (xgrammar, Outlines) writes around its model.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/decode/draft_calls.hpp"
#include "specdec/decode/strategy.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/verify/constrained_logits.hpp"

namespace kjv {

/// Lines of the form `Book chapter:verse text\n`: Book one of kBooks, chapter and verse 1-3
/// digits without a leading zero, text 1 to kMaxText printable ASCII bytes, then a newline and
/// the next line. Output parses when the automaton never leaves the language's prefixes.
class VerseGrammar {
 public:
  static constexpr std::array<std::string_view, 17> kBooks = {
      "Genesis", "Exodus", "Leviticus", "Numbers",  "Deuteronomy", "Joshua",
      "Judges",  "Ruth",   "Psalms",    "Proverbs", "Isaiah",      "Matthew",
      "Mark",    "Luke",   "John",      "Acts",     "Romans"};
  static constexpr std::int32_t kMaxText = 60;

  enum class Phase : std::int8_t { kBook, kChapter, kVerse, kText, kDead };

  /// In kBook, `count` bytes of book `book` matched (any book with that prefix); in kChapter and
  /// kVerse the digits read; in kText the bytes read.
  struct State {
    Phase phase = Phase::kBook;
    std::int16_t count = 0;
    std::int16_t book = 0;
    bool dead() const { return phase == Phase::kDead; }
  };

  static State start() { return {}; }

  static State next(State s, specdec::Token byte) {
    const auto digit = [&](bool zero) { return byte >= (zero ? '0' : '1') && byte <= '9'; };
    switch (s.phase) {
      case Phase::kBook: {
        const auto prefix = kBooks[static_cast<std::size_t>(s.book)].substr(0, s.count);
        for (std::size_t b = 0; b < kBooks.size(); ++b) {
          const auto name = kBooks[b];
          if (!name.starts_with(prefix)) continue;
          if (name.size() == prefix.size() && byte == ' ') return {Phase::kChapter, 0, 0};
          if (name.size() > prefix.size() && name[prefix.size()] == byte) {
            return {Phase::kBook, static_cast<std::int16_t>(s.count + 1),
                    static_cast<std::int16_t>(b)};
          }
        }
        return {Phase::kDead};
      }
      case Phase::kChapter:
      case Phase::kVerse: {
        if (digit(s.count > 0) && s.count < 3) {
          return {s.phase, static_cast<std::int16_t>(s.count + 1), 0};
        }
        const char end = s.phase == Phase::kChapter ? ':' : ' ';
        if (s.count > 0 && byte == end) {
          return {s.phase == Phase::kChapter ? Phase::kVerse : Phase::kText, 0, 0};
        }
        return {Phase::kDead};
      }
      case Phase::kText:
        if (s.count > 0 && byte == '\n') return start();
        if (s.count < kMaxText && byte >= 0x20 && byte < 0x7f) {
          return {Phase::kText, static_cast<std::int16_t>(s.count + 1), 0};
        }
        return {Phase::kDead};
      case Phase::kDead:
        break;
    }
    return {Phase::kDead};
  }

  /// The state after `tokens` from `s`.
  static State run(State s, std::span<const specdec::Token> tokens) {
    for (const auto t : tokens) s = next(s, t);
    return s;
  }

  /// Whether `tokens` is a prefix of the language (the whole text, prompt included).
  static bool parses(std::span<const specdec::Token> tokens) {
    return !run(start(), tokens).dead();
  }

  /// Writes the packed mask of `s` (ceil(vocab / 32) words, bit set = the byte may follow): no
  /// bit for the dead state, whose rows the verifiers never read.
  static void mask(State s, std::int64_t vocab, std::int32_t* words) {
    const auto count = specdec::detail::mask_words(vocab);
    std::fill(words, words + count, 0);
    if (s.dead()) return;
    for (std::int64_t t = 0; t < vocab; ++t) {
      if (!next(s, static_cast<specdec::Token>(t)).dead()) {
        words[t >> 5] =
            static_cast<std::int32_t>(static_cast<std::uint32_t>(words[t >> 5]) | (1u << (t & 31)));
      }
    }
  }

  /// The states of a tree's nodes (level order, a parent before its children) after `root`.
  static void tree_states(State root, specdec::TreeView tree, std::vector<State>& out) {
    out.resize(tree.tokens.size());
    for (std::size_t i = 0; i < tree.tokens.size(); ++i) {
      const auto parent = tree.parents[i];
      out[i] = next(parent < 0 ? root : out[static_cast<std::size_t>(parent)], tree.tokens[i]);
    }
  }
};

/// A draft's logit for a byte the grammar forbids: finite, so the tree selectors rank such nodes
/// last instead of reading -inf, and so far below any logit that softmax leaves it no weight to
/// speak of (SD verifies against the rows as drafted, so the law is exact either way).
inline constexpr float kForbiddenLogit = -1.0e4f;

/// A draft LogitsProvider with its rows masked by the grammar after each node's prefix (when
/// `masked`), else passed through: the draft proposes only what the grammar allows, or anything.
/// Counts its forward calls (draft calls per step).
template <specdec::LogitsProvider Inner>
class GrammarDraft {
 public:
  /// `nodes`: the most nodes a draft call scores (states kept without allocating per step).
  GrammarDraft(Inner& inner, bool masked, std::size_t nodes = 1024)
      : inner_(&inner), masked_(masked) {
    states_.reserve(nodes);
  }

  std::int64_t vocab_size() const { return inner_->vocab_size(); }
  std::span<const specdec::Token> context() const { return inner_->context(); }
  std::int64_t committed_length() const { return inner_->committed_length(); }
  void reset(std::span<const specdec::Token> prompt) { inner_->reset(prompt); }
  void commit(const specdec::TreeBatch& batch, std::span<const std::int32_t> kept,
              specdec::Token next) {
    inner_->commit(batch, kept, next);
  }
  std::int64_t calls() const { return calls_; }
  void clear_calls() { calls_ = 0; }
  bool masked() const { return masked_; }

  void evaluate(const specdec::TreeBatch& batch, specdec::MatrixView<float> logits) {
    inner_->evaluate(batch, logits);
    ++calls_;
    if (!masked_) return;
    const auto root = VerseGrammar::run(VerseGrammar::start(), context());
    VerseGrammar::tree_states(root, batch.view(), states_);
    for (std::int64_t r = 0; r < batch.rows(); ++r) {
      const auto s = r == 0 ? root : states_[static_cast<std::size_t>(r - 1)];
      if (s.dead()) continue;  // a node after a forbidden byte: never verified past
      float* row = logits.row_data(r);
      for (std::int64_t t = 0; t < logits.cols; ++t) {
        if (VerseGrammar::next(s, static_cast<specdec::Token>(t)).dead()) row[t] = kForbiddenLogit;
      }
    }
  }

 private:
  Inner* inner_;
  bool masked_;
  std::int64_t calls_ = 0;
  std::vector<VerseGrammar::State> states_;
};

/// How ConstrainedStrategy drafts.
enum class Drafting {
  kPlain,  // no draft: one token per target call, sampled from the constrained target row
  kChain,  // SD: `length` tokens sampled from the draft's (masked or raw) rows
  kTree,   // TopKTreeStrategy's tree (Sequoia, EAGLE-2, ...), verified against the target alone
};

struct ConstrainedOptions {
  Drafting drafting = Drafting::kChain;
  specdec::Warp warp{};  // the draft's rows are warped with the loop's warp
  std::int32_t length = 4;
  specdec::TopKTreeOptions tree{};
};

/// A DraftStrategy whose verification applies the grammar's mask to every target row: row 0's
/// mask is the state after the committed context, node i's the state after its path (xgrammar's
/// layout, one row per node). The output's law is constrained sampling from the target (its
/// softmax with forbidden bytes removed, renormalised) whether the draft is masked or not.
/// Randomness: chain token d is drawn with uniform 0 of the draft stream's node d (as
/// draft_iid_chains with k = 1); verification uses the verify stream (the plain method too).
template <specdec::LogitsProvider Draft>
class ConstrainedStrategy {
 public:
  ConstrainedStrategy(GrammarDraft<Draft>& draft, ConstrainedOptions options)
      : draft_(&draft), calls_(draft), options_(options), tree_(draft, options.tree) {}

  /// Verification reads the logits; the Decoder warps nothing.
  bool needs_target_rows() const { return false; }

  /// Target rows verified so far whose mask was the dead state's (after a forbidden draft byte):
  /// rows the verifiers must not read, since that mask allows nothing.
  std::int64_t dead_rows() const { return dead_rows_; }

  void prepare(std::int64_t vocab, specdec::Workspace& workspace) {
    specdec::provider::check_same_vocabulary(draft_->vocab_size(), vocab);
    options_.warp.validate(vocab);
    if (options_.length < 1 || options_.length > 64) {
      specdec::detail::fail("length", "{} is outside [1, 64]", options_.length);
    }
    if (options_.drafting == Drafting::kTree) tree_.prepare(vocab, workspace);
    const auto nodes = static_cast<std::size_t>(
        std::max<std::int64_t>(options_.length, options_.tree.max_tree_size()));
    workspace.reserve(
        specdec::constrained::verify_tree_logits_workspace_size(nodes, vocab) +
        specdec::constrained::verify_chain_logits_workspace_size(vocab, options_.length) +
        (1 << 12));
    masks_.reserve((nodes + 1) * static_cast<std::size_t>(specdec::detail::mask_words(vocab)));
    states_.reserve(nodes);
    chain_.reserve(static_cast<std::size_t>(options_.length));
    draft_logits_.reserve(static_cast<std::size_t>(options_.length) *
                          static_cast<std::size_t>(vocab));
    probs_.resize(static_cast<std::size_t>(vocab));
    out_.resize(static_cast<std::size_t>(options_.length) + 1);
    accepted_.resize(nodes + 1);
  }

  /// Throws specdec::Error("prompt") unless the prompt is a prefix of the grammar's language.
  void reset(std::span<const specdec::Token> prompt) {
    if (!VerseGrammar::parses(prompt)) {
      specdec::detail::fail("prompt", "is not a prefix of the verse-reference grammar");
    }
    if (options_.drafting == Drafting::kTree) {
      tree_.reset(prompt);
    } else {
      draft_->reset(prompt);
    }
  }

  const specdec::DraftTree& draft(const specdec::StepContext& context) {
    draft_->clear_calls();
    if (options_.drafting == Drafting::kTree) return tree_.draft(context);
    chain_.clear();
    if (options_.drafting == Drafting::kPlain) return chain_;
    calls_.check_committed(context.sequence.length());
    const auto v = static_cast<std::size_t>(context.vocab);
    draft_logits_.resize(static_cast<std::size_t>(options_.length) * v);
    const auto stream = context.sequence.draft_stream();
    for (std::int32_t d = 0; d < options_.length; ++d) {
      // Row d of a call over the first d tokens follows them (the provider feeds only the new one).
      const auto rows = calls_.evaluate(chain_, context.sequence.length(), context.vocab);
      const auto row = rows.row(d);
      std::copy(row.begin(), row.end(), draft_logits_.begin() + static_cast<std::ptrdiff_t>(d * v));
      specdec::detail::warp_row(options_.warp, row, probs_, nullptr, context.workspace);
      const auto token = specdec::detail::sample_weights(
          probs_.data(), context.vocab, specdec::detail::row_total(probs_),
          stream.at_node(static_cast<std::uint32_t>(d)).uniform(0));
      chain_.add(static_cast<specdec::Token>(token), d - 1);
    }
    return chain_;
  }

  specdec::StepVerdict verify(const specdec::StepContext& context,
                              const specdec::TargetScores& scores) {
    const auto& warp = scores.warp;
    if (warp.temperature != options_.warp.temperature || warp.top_k != options_.warp.top_k ||
        warp.top_p != options_.warp.top_p || warp.min_p != options_.warp.min_p) {
      specdec::detail::fail("warp", "the loop's warp differs from the strategy's");
    }
    const specdec::DraftTree& tree =
        options_.drafting == Drafting::kTree ? tree_.drafted() : chain_;
    const auto n = static_cast<std::size_t>(tree.size());
    const auto v = static_cast<std::size_t>(context.vocab);
    const auto words = static_cast<std::size_t>(specdec::detail::mask_words(context.vocab));
    // One mask row per target row: the root's state, then each node's.
    const auto root = VerseGrammar::run(VerseGrammar::start(), context.sequence.tokens);
    VerseGrammar::tree_states(root, tree.view(), states_);
    masks_.resize((n + 1) * words);
    VerseGrammar::mask(root, context.vocab, masks_.data());
    for (std::size_t i = 0; i < n; ++i) {
      VerseGrammar::mask(states_[i], context.vocab, masks_.data() + (i + 1) * words);
      dead_rows_ += states_[i].dead() ? 1 : 0;
    }
    const specdec::constrained::LogitConstraints constraints{.bitmask = masks_};
    const std::span<const float> target(scores.logits.data, (n + 1) * v);
    if (options_.drafting == Drafting::kTree) {
      const auto verdict = specdec::constrained::verify_tree_target_only_logits(
          warp, tree.view(), target, context.vocab, constraints, context.sequence.verify_stream(),
          std::span<std::int32_t>(
              accepted_.data(),
              std::max<std::size_t>(static_cast<std::size_t>(tree.max_depth()), 1)),
          context.workspace);
      return {std::span<const std::int32_t>(accepted_.data(),
                                            static_cast<std::size_t>(verdict.accepted)),
              verdict.token, draft_->calls()};
    }
    const std::span<specdec::Token> out(out_.data(), n + 1);
    const auto verdict =
        options_.drafting == Drafting::kPlain
            ? specdec::constrained::verify_chain_target_only_logits(
                  warp, target, {}, context.vocab, constraints, context.sequence.verify_stream(),
                  out, context.workspace)
            : specdec::constrained::verify_chain_logits(
                  warp, target, std::span<const float>(draft_logits_.data(), n * v), tree.tokens,
                  context.vocab, constraints, context.sequence.verify_stream(), out,
                  context.workspace);
    for (std::int32_t i = 0; i < verdict.accepted; ++i) accepted_[static_cast<std::size_t>(i)] = i;
    return {
        std::span<const std::int32_t>(accepted_.data(), static_cast<std::size_t>(verdict.accepted)),
        out_[static_cast<std::size_t>(verdict.accepted)], draft_->calls()};
  }

  void commit(const specdec::TreeBatch& batch, std::span<const std::int32_t> accepted,
              specdec::Token next) {
    if (options_.drafting == Drafting::kTree) {
      tree_.commit(batch, accepted, next);
    } else if (options_.drafting == Drafting::kChain) {
      draft_->commit(batch, accepted, next);
    }
  }

 private:
  GrammarDraft<Draft>* draft_;
  specdec::detail::DraftModelCalls<GrammarDraft<Draft>> calls_;
  ConstrainedOptions options_;
  specdec::TopKTreeStrategy<GrammarDraft<Draft>> tree_;
  specdec::DraftTree chain_;
  std::vector<VerseGrammar::State> states_;
  std::vector<std::int32_t> masks_, accepted_;
  std::vector<float> draft_logits_, probs_;
  std::vector<specdec::Token> out_;
  std::int64_t dead_rows_ = 0;
};

}  // namespace kjv
