// SPDX-License-Identifier: MIT
// SGLang's tree verification (sgl-kernel's tree_speculative_sampling_target_only and
// verify_tree_greedy) over its own layout: N slots per sequence, slot 0 the root, the tree as
// first-child / next-sibling links, one target row per slot. The sampled walk is the thresholded
// running-coin walk of verify/target_only_lossy.hpp; the batch over B sequences is in
// backend/sglang_tree_batch.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/tree/sibling_lists.hpp"
#include "specdec/verify/target_only_lossy.hpp"

namespace specdec {

namespace sglang {

/// One sequence's SGLang tree verification (sglang::verify_tree). The arguments keep SGLang's
/// names. N slots, slot 0 the root (the last committed token), slot s's token `candidates[s]`
/// (the root's is not read), its first child `retrive_next_token[s]` and its next sibling
/// `retrive_next_sibling[s]` (-1 for none). Exactly one of:
///   target_probs:   N x V warped rows (row s: the target after slot s): the sampled walk, with
///                   `thresholds` (1, 1: lossless), `draft_probs` (empty, or N x V rows subtracted
///                   from the row a correction or bonus is drawn from, except at full depth) and
///                   `uniform_samples` (N coins by slot, with `final_uniform`) or, empty, the
///                   draws of `stream` (the coin of the node at walk row r is draw 0 of
///                   stream.at_node(r), the final uniform draw 1 of stream.at_node(0));
///   target_predict: N tokens (the target's argmax after slot s): the greedy walk.
/// Outputs: `accepted_slots` (S - 1 entries: the walk goes at most S - 1 deep) gets the slots of
/// the accepted nodes and `emitted` (S entries) the tokens emitted after the root and after each
/// of them (the next accepted token, then the correction or bonus token); the rest is untouched.
struct TreeArgs {
  std::span<const std::int64_t> candidates{};
  std::span<const std::int64_t> retrive_next_token{};
  std::span<const std::int64_t> retrive_next_sibling{};
  MatrixView<const float> target_probs{};
  MatrixView<const float> draft_probs{};
  std::span<const std::int64_t> target_predict{};
  AcceptanceThresholds thresholds{};
  std::span<const float> uniform_samples{};
  float final_uniform = 0.5f;
  RandomStream stream{};
  std::span<std::int32_t> accepted_slots{};
  std::span<Token> emitted{};
};

}  // namespace sglang

namespace detail {

/// An argument of sequence `sequence` of a batch ("name[b]"), or of a lone sequence (-1).
inline ArgName sequence_arg(std::string_view name, std::int64_t sequence) {
  return sequence < 0 ? ArgName(name) : ArgName(name, sequence);
}

/// One sequence of an SGLang walk as raw memory: what sglang::verify_tree and the batch pass on.
/// Target row of slot s: target + s * stride (nullptr: greedy, reading predict[index[s]], or
/// predict[s] without index); draft likewise or nullptr; coins: N by slot or nullptr (stream).
struct SglangSequence {
  std::int64_t sequence = -1;
  std::size_t slots = 0;
  const std::int64_t* candidates = nullptr;
  const std::int64_t* next_token = nullptr;
  const std::int64_t* next_sibling = nullptr;
  const float* target = nullptr;
  const float* draft = nullptr;
  std::int64_t vocab = 0;
  std::int64_t stride = 0;
  const std::int64_t* predict = nullptr;
  const std::int64_t* predict_index = nullptr;
  AcceptanceThresholds thresholds{};
  const float* coins = nullptr;
  float final_uniform = 0.5f;
  RandomStream stream{};
  std::int32_t max_accepted = 0;
  std::int32_t* accepted_slots = nullptr;
  Token* emitted = nullptr;
  bool check_rows = true;  // rows and coins checked as the walk reads them
};

/// The nodes of a sequence's tree SGLang's walk can reach, in the parents layout: at most
/// `max_depth` deep and, when vocab > 0, under no candidate outside [0, vocab) (such a child and
/// its subtree are never tried, so a -1 placeholder is never an index). Node k sits at slots[k].
struct SglangNodes {
  TreeView tree;
  const std::int32_t* slots;
};

/// Scratch carved from a block of sglang_tree_scratch_bytes (a CPU batch thread's share).
struct ScratchBytes {
  std::byte* next;
  template <class T>
  std::span<T> take(std::size_t count) {
    auto* p = reinterpret_cast<T*>(next);
    next += Workspace::round_up(count * sizeof(T));
    return {p, count};
  }
};

template <class Scratch>
SglangNodes sglang_nodes(const SglangSequence& s, Scratch& ws) {
  const std::size_t n = s.slots - 1;
  auto parents = ws.template take<std::int32_t>(n);
  auto slots = ws.template take<std::int32_t>(n);
  auto seen = ws.template take<std::uint8_t>(s.slots);
  parents_from_sibling_lists({{s.next_token, s.slots}, {s.next_sibling, s.slots}}, parents, slots,
                             sequence_arg("retrive_next_token", s.sequence),
                             sequence_arg("retrive_next_sibling", s.sequence), seen);
  auto renumbered = ws.template take<std::int32_t>(n);
  auto depth = ws.template take<std::int32_t>(n);
  auto kept_parents = ws.template take<std::int32_t>(n);
  auto kept_slots = ws.template take<std::int32_t>(n);
  auto kept_tokens = ws.template take<Token>(n);
  const std::int64_t max_depth = s.max_accepted;
  std::size_t kept = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const auto parent = parents[k];
    const std::int64_t token = s.candidates[slots[k]];
    renumbered[k] = -1;
    depth[k] = parent < 0 ? 1 : depth[static_cast<std::size_t>(parent)] + 1;
    const bool parent_kept = parent < 0 || renumbered[static_cast<std::size_t>(parent)] >= 0;
    const bool usable = s.target == nullptr ? token >= std::numeric_limits<Token>::min() &&
                                                  token <= std::numeric_limits<Token>::max()
                                            : token >= 0 && token < s.vocab;
    if (!parent_kept || !usable || depth[k] > max_depth) continue;
    renumbered[k] = static_cast<std::int32_t>(kept);
    kept_parents[kept] = parent < 0 ? -1 : renumbered[static_cast<std::size_t>(parent)];
    kept_slots[kept] = slots[k];
    kept_tokens[kept] = static_cast<Token>(token);
    ++kept;
  }
  return {{kept_tokens.first(kept), kept_parents.first(kept)}, kept_slots.data()};
}

/// Coins read from a sequence's N uniforms by slot (walk row r is at slot 0 or slots[r - 1]),
/// checked as they are read when asked.
struct SglangSlotCoins {
  const SglangSequence* s;
  const std::int32_t* slots;
  float coin(std::size_t row) const {
    const auto slot = row == 0 ? 0 : slots[row - 1];
    const float c = s->coins[slot];
    if (s->check_rows && !(c >= 0.0f && c <= 1.0f)) {
      fail(sequence_arg("uniform_samples", s->sequence)[slot], "{} is outside [0, 1]", c);
    }
    return c;
  }
  float final_uniform() const { return s->final_uniform; }
};

/// Walks one sequence (thresholds, the final uniform and shapes already checked where asked) and
/// writes its accepted slots and emitted tokens. Every link is checked (a malformed tree would
/// loop); rows and coins as the walk reads them when s.check_rows.
template <class Scratch>
TreeVerdict sglang_tree_sequence(const SglangSequence& s, Scratch& ws) {
  const SglangNodes nodes = sglang_nodes(s, ws);
  const auto n = nodes.tree.tokens.size();
  auto accepted = ws.template take<std::int32_t>(n + 1);
  auto kids = ws.template take<Token>(n + 1);
  auto ids = ws.template take<std::int32_t>(n + 1);
  const auto slot_of = [&](std::size_t row) {
    return row == 0 ? std::size_t{0} : static_cast<std::size_t>(nodes.slots[row - 1]);
  };
  TreeVerdict verdict;
  if (s.target == nullptr) {
    const auto argmax_at = [&](std::size_t row) {
      const auto slot = slot_of(row);
      return s.predict[s.predict_index == nullptr ? slot : s.predict_index[slot]];
    };
    const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                            const RandomStream&) -> NodeVerdict {
      const auto best = argmax_at(row);
      for (std::int32_t k = 0; k < count; ++k) {
        if (children[k] == best) return {k, children[k]};
      }
      return {-1, static_cast<Token>(best)};
    };
    const auto bonus = [&](std::size_t row, const RandomStream&) {
      return static_cast<Token>(argmax_at(row));
    };
    verdict = walk_tree(nodes.tree, RandomStream{}, accepted.data(), kids.data(), ids.data(),
                        verify, bonus);
  } else {
    const auto v = static_cast<std::size_t>(s.vocab);
    const auto target_at = [&](std::size_t row) {
      const float* r = s.target + slot_of(row) * static_cast<std::size_t>(s.stride);
      if (s.check_rows) {
        check_probability_row<float>(
            sequence_arg("target_probs", s.sequence)[static_cast<std::int64_t>(slot_of(row))],
            std::span<const float>(r, v));
      }
      return r;
    };
    const auto draft_at = [&](std::size_t row) -> const float* {
      return s.draft == nullptr ? nullptr
                                : s.draft + slot_of(row) * static_cast<std::size_t>(s.stride);
    };
    auto scratch = ws.template take<float>(v);
    const TreeBuffers buffers{accepted.data(), kids.data(), ids.data(), scratch.data()};
    if (s.coins != nullptr) {
      verdict = verify_tree_thresholded_unchecked(nodes.tree, target_at, draft_at, s.vocab,
                                                  s.thresholds, SglangSlotCoins{&s, nodes.slots},
                                                  s.max_accepted, buffers);
    } else {
      verdict =
          verify_tree_thresholded_unchecked(nodes.tree, target_at, draft_at, s.vocab, s.thresholds,
                                            StreamCoins{s.stream}, s.max_accepted, buffers);
    }
  }
  for (std::int32_t j = 0; j < verdict.accepted; ++j) {
    const auto node = static_cast<std::size_t>(accepted[static_cast<std::size_t>(j)]);
    s.accepted_slots[j] = nodes.slots[node];
    s.emitted[j] = nodes.tree.tokens[node];
  }
  s.emitted[verdict.accepted] = verdict.token;
  return verdict;
}

/// Bytes of workspace one sequence of N slots over V tokens takes (sglang_tree_sequence).
inline std::size_t sglang_tree_scratch_bytes(std::int64_t slots, std::int64_t vocab) {
  const auto n = static_cast<std::size_t>(slots > 0 ? slots : 1);
  const auto v = static_cast<std::size_t>(vocab > 0 ? vocab : 0);
  return 10 * Workspace::round_up((n + 1) * sizeof(std::int32_t)) +
         Workspace::round_up(n * sizeof(std::uint8_t)) + Workspace::round_up(v * sizeof(float));
}

/// N rows of `target`'s columns (>= 1) and stride.
inline void check_sglang_rows(std::string_view name, const MatrixView<const float>& rows,
                              std::size_t n, const MatrixView<const float>& target) {
  if (rows.rows != static_cast<std::int64_t>(n))
    fail(name, "has {} rows; expected N = {}", rows.rows, n);
  if (rows.cols < 1) fail(name, "has {} columns (vocabulary 0)", rows.cols);
  if (rows.cols != target.cols || rows.stride != target.stride) {
    fail(name, "has {} columns and stride {}; expected target_probs' {} and {}", rows.cols,
         rows.stride, target.cols, target.stride);
  }
  if (rows.stride < rows.cols)
    fail(name, "rows overlap (stride {} < {} columns)", rows.stride, rows.cols);
}

/// A lone sequence's args as raw memory (no check).
inline SglangSequence sglang_sequence(const sglang::TreeArgs& args, bool check_rows) {
  return {.slots = args.candidates.size(),
          .candidates = args.candidates.data(),
          .next_token = args.retrive_next_token.data(),
          .next_sibling = args.retrive_next_sibling.data(),
          .target = args.target_probs.data,
          .draft = args.draft_probs.data,
          .vocab = args.target_probs.cols,
          .stride = args.target_probs.stride,
          .predict = args.target_predict.data(),
          .thresholds = args.thresholds,
          .coins = args.uniform_samples.empty() ? nullptr : args.uniform_samples.data(),
          .final_uniform = args.final_uniform,
          .stream = args.stream,
          .max_accepted = static_cast<std::int32_t>(args.accepted_slots.size()),
          .accepted_slots = args.accepted_slots.data(),
          .emitted = args.emitted.data(),
          .check_rows = check_rows};
}

/// sglang::verify_tree without validation: the links must form a tree over the N slots, every
/// row the walk reads a probability row, the coins and thresholds in [0, 1], the outputs sized.
inline TreeVerdict verify_sglang_tree_unchecked(const sglang::TreeArgs& args, Workspace& ws) {
  auto scope = ws.scope();
  return sglang_tree_sequence(sglang_sequence(args, false), ws);
}

}  // namespace detail

namespace sglang {

/// SGLang's tree verification of one sequence (layout and outputs: sglang::TreeArgs). At the
/// current node its children are tried in sibling order; the sampled walk is
/// verify_tree_target_only_thresholded's (one running coin per node, lossless at thresholds
/// (1, 1): the emitted tokens are then exactly the target's), the greedy walk accepts the child
/// equal to the target's argmax and otherwise emits that argmax. A candidate outside [0, V) is
/// never tried (nor its subtree). Returns the verdict (accepted nodes, the last emitted token).
/// Throws specdec::Error naming the bad argument: a malformed tree (links out of range, cycles,
/// unreachable slots), shapes, thresholds or coins outside [0, 1], a row the walk reads that is
/// not a probability row (rows it does not read are not checked).
inline TreeVerdict verify_tree(const sglang::TreeArgs& args, Workspace& ws) {
  const auto n = args.candidates.size();
  if (n == 0) detail::fail("candidates", "has no entries; slot 0 (the root) is required");
  detail::check_size("retrive_next_token", args.retrive_next_token.size(), n);
  detail::check_size("retrive_next_sibling", args.retrive_next_sibling.size(), n);
  detail::check_size("emitted", args.emitted.size(), args.accepted_slots.size() + 1);
  const bool greedy = args.target_probs.data == nullptr;
  if (greedy) {
    if (args.target_predict.empty())
      detail::fail("target_probs", "is required (or target_predict)");
    detail::check_size("target_predict", args.target_predict.size(), n);
  } else {
    if (!args.target_predict.empty()) {
      detail::fail("target_predict", "must be empty with target_probs (one walk)");
    }
    detail::check_sglang_rows("target_probs", args.target_probs, n, args.target_probs);
    if (args.draft_probs.data != nullptr) {
      detail::check_sglang_rows("draft_probs", args.draft_probs, n, args.target_probs);
    }
    if (!args.uniform_samples.empty()) {
      detail::check_size("uniform_samples", args.uniform_samples.size(), n);
      detail::check_in_closed("final_uniform", args.final_uniform, 0.0f, 1.0f);
    }
    detail::check_thresholds(args.thresholds);
  }
  auto scope = ws.scope();
  return detail::sglang_tree_sequence(detail::sglang_sequence(args, true), ws);
}

}  // namespace sglang

}  // namespace specdec
