// SPDX-License-Identifier: MIT
// ReDrafter end to end: a target that returns hidden states, the recurrent draft head, dynamic
// tree attention over its beams, and four verification modes (exact, greedy, typical, parity).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
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
#include "specdec/draft/redrafter.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec {

/// How a ReDrafter step is drafted and verified.
enum class RedrafterVerification {
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

inline std::string_view redrafter_verification_name(RedrafterVerification v) {
  switch (v) {
    case RedrafterVerification::kExact:
      return "exact";
    case RedrafterVerification::kGreedy:
      return "greedy";
    case RedrafterVerification::kTypical:
      return "typical";
    case RedrafterVerification::kParity:
      return "parity";
  }
  return "unknown";
}

/// Parses "exact", "greedy", "typical" or "parity"; throws specdec::Error("verification").
inline RedrafterVerification parse_redrafter_verification(std::string_view name) {
  for (auto v : {RedrafterVerification::kExact, RedrafterVerification::kGreedy,
                 RedrafterVerification::kTypical, RedrafterVerification::kParity}) {
    if (redrafter_verification_name(v) == name) return v;
  }
  detail::fail("verification", "'{}' is not one of exact, greedy, typical, parity", name);
}

/// Options of decode_redrafter.
struct RedrafterOptions {
  RedrafterVerification verification = RedrafterVerification::kExact;
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
      case RedrafterVerification::kExact:
      case RedrafterVerification::kGreedy:
      case RedrafterVerification::kTypical:
      case RedrafterVerification::kParity:
        break;
      default:
        detail::fail("verification", "{} is not a RedrafterVerification",
                     static_cast<int>(verification));
    }
    warp.validate(vocab);
    if (width < 1) detail::fail("width", "{} must be >= 1", width);
    if (depth < 1) detail::fail("depth", "{} must be >= 1", depth);
    if (static_cast<std::int64_t>(width) * depth > (std::int64_t{1} << 20)) {
      detail::fail("width", "{} beams of depth {} exceed 2^20 tree nodes", width, depth);
    }
    check_typical_parameters(typical.epsilon, typical.delta);
    if (max_new_tokens < 0) detail::fail("max_new_tokens", "{} must be >= 0", max_new_tokens);
    if (end_token != kNoToken) detail::check_token("end_token", end_token, vocab);
  }
};

namespace detail {

/// exp of a head log-probability row, exactly 0 for the head's stand-in for log 0.
inline void head_probabilities(std::span<const float> log_probs, float* out) {
  for (std::size_t x = 0; x < log_probs.size(); ++x) {
    out[x] = log_probs[x] < -80.0f ? 0.0f : std::exp(log_probs[x]);
  }
}

/// The reference's sampling rule on deterministic beams (see RedrafterVerification::kParity).
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
      if (!(s.uniform(static_cast<std::uint32_t>(n)) * draft < target)) break;
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

/// Generates from `prompt` with ReDrafter: the target `target` (a HiddenStateProvider whose
/// hidden_size() equals head.config.hidden and whose vocabulary equals head.config.vocab) and the
/// draft head `head`.
///
/// The loop follows the reference. The first target call scores the prompt and gives the first
/// token (sampled from the warped target row; its argmax for kGreedy) and the hidden state h of
/// the prompt's last token. Every later step starts at the last committed token (the reference's
/// init token) with the hidden state h of the token before it, drafts with the head, scores the
/// whole tree in one target call (`evaluate_with_hidden`), verifies, commits the kept path and
/// the next token, and takes the next h from the row of the last kept node (the root when none
/// was kept).
/// - kExact: redrafter_stochastic_beam_search (width W, depth L) draws the tree; verify_tree with
///   the Recursive rule verifies it against the warped target rows. Lossless.
/// - kGreedy / kTypical / kParity: redrafter_beam_search (W beams of L draft tokens); the beams
///   are deduplicated by compress_beams / compressed_to_draft_tree, so the target scores every
///   distinct prefix once. kGreedy and kTypical walk that tree with verify_tree and the Greedy /
///   Typical rule; kParity applies the reference's per-beam rule.
/// Randomness (SequenceState streams of `seed` and `sequence`): the first token is draw 0 of the
/// sample stream; drafting (kExact) uses the draft stream as draft_rsd_s documents; verification
/// uses the verify stream (verify_tree's draws, or redrafter_parity_verdict's for kParity).
/// Same seed and sequence, same tokens.
/// Metrics: one StepRecord per target call (the first call records no tree and one token); draft
/// calls count head evaluations (one per tree level).
/// Throws specdec::Error naming the bad argument: "options.<field>", "prompt", "head" (shape or
/// vocabulary / hidden size mismatch), "target logits" / "target hidden" for bad provider rows.
template <HiddenStateProvider Target>
DecodeResult decode_redrafter(Target& target, const ReDrafterHead& head,
                              std::span<const Token> prompt, const RedrafterOptions& options,
                              std::uint32_t sequence = 0) {
  const auto start_time = std::chrono::steady_clock::now();
  const std::int64_t vocab = target.vocab_size();
  try {
    options.validate(vocab);
  } catch (const Error& e) {
    detail::fail("options", "{}", e.what());
  }
  head.validate();
  if (head.config.vocab != vocab) {
    detail::fail("head", "vocabulary size {} differs from the target's {}", head.config.vocab,
                 vocab);
  }
  const std::int64_t hidden_size = target.hidden_size();
  if (hidden_size != head.config.hidden) {
    detail::fail("head", "hidden size {} differs from the target's hidden_size() {}",
                 head.config.hidden, hidden_size);
  }
  SequenceState state(prompt, vocab, options.seed, sequence);
  target.reset(prompt);

  DecodeResult result;
  result.metrics.sequences = 1;
  const auto v = static_cast<std::size_t>(vocab);
  const auto h = static_cast<std::size_t>(hidden_size);
  const bool greedy = options.verification == RedrafterVerification::kGreedy;
  Workspace ws;
  TreeBatch batch;
  DraftTree tree;
  DraftedTree drafted;
  ReDrafterBeams beams;
  CompressedBeams compressed;
  std::vector<Token> flat;
  std::vector<std::int32_t> node_of, node_of_beam,
      accepted(static_cast<std::size_t>(options.depth));
  std::vector<float> logits, hidden, target_rows, draft_rows, scratch;
  std::vector<float> context_hidden(h);
  std::vector<Token> step_tokens;

  // Scores `batch`, checks the answer and warps every row into target_rows.
  const auto score = [&]() {
    const auto rows = static_cast<std::size_t>(batch.rows());
    logits.resize(rows * v);
    hidden.resize(rows * h);
    target_rows.resize(rows * v);
    MatrixView<float> lv(logits.data(), static_cast<std::int64_t>(rows), vocab);
    MatrixView<float> hv(hidden.data(), static_cast<std::int64_t>(rows), hidden_size);
    target.evaluate_with_hidden(batch, lv, hv);
    check_provider_output("target logits", lv, batch.rows(), vocab);
    check_hidden_output("target hidden", hv, batch.rows(), hidden_size);
    for (std::size_t r = 0; r < rows; ++r) {
      warp_logits<float>(options.warp, std::span<const float>(logits.data() + r * v, v),
                         std::span<float>(target_rows.data() + r * v, v), ws);
    }
  };
  // Appends the step's tokens (kept path then `next`) up to the limits; true when finished.
  const auto emit = [&](std::int32_t kept, Token next) {
    step_tokens.clear();
    for (std::int32_t k = 0; k < kept; ++k) {
      step_tokens.push_back(
          batch.tokens[static_cast<std::size_t>(accepted[static_cast<std::size_t>(k)])]);
    }
    step_tokens.push_back(next);
    std::int64_t emitted = 0;
    bool done = false;
    for (const Token t : step_tokens) {
      if (static_cast<std::int32_t>(result.tokens.size()) >= options.max_new_tokens) {
        done = true;
        break;
      }
      result.tokens.push_back(t);
      ++emitted;
      if (t == options.end_token) {
        done = true;
        break;
      }
    }
    if (static_cast<std::int32_t>(result.tokens.size()) >= options.max_new_tokens) done = true;
    return std::pair<std::int64_t, bool>(emitted, done);
  };

  bool done = options.max_new_tokens == 0;
  // The first call: the prompt alone, giving the first token and the context hidden state.
  if (!done) {
    tree.clear();
    batch.assign(tree, state.length());
    score();
    const Token first =
        greedy ? static_cast<Token>(detail::row_argmax(target_rows.data(), vocab))
               : detail::sample_row(target_rows.data(), vocab, state.sample_stream().uniform(0));
    std::copy_n(hidden.begin(), h, context_hidden.begin());
    const auto [emitted, finished] = emit(0, first);
    result.metrics.record_step({0, 0, 0, emitted, 0});
    done = finished;
    if (!done) {
      target.commit(batch, {}, first);
      state.append(first);
    }
  }
  while (!done) {
    const Token root = state.tokens.back();
    std::int64_t draft_calls = 0;
    if (options.verification == RedrafterVerification::kExact) {
      redrafter_stochastic_beam_search(head, context_hidden, root, options.width, options.depth,
                                       state.draft_stream(), drafted, ws);
      tree = drafted.tree;
      draft_calls = drafted.row_count() > 0 ? tree.max_depth() : 0;
    } else {
      redrafter_beam_search(head, context_hidden, root, options.width, options.depth + 1, beams);
      flat.clear();
      for (std::int32_t w = 0; w < options.width; ++w) {
        for (std::int32_t k = 1; k <= options.depth; ++k) flat.push_back(beams.token(w, k));
      }
      compress_beams(flat, options.width, vocab, compressed);
      node_of.resize(static_cast<std::size_t>(compressed.size()));
      compressed_to_draft_tree(compressed, tree, node_of);
      node_of_beam.resize(flat.size());
      for (std::size_t x = 0; x < flat.size(); ++x) {
        node_of_beam[x] = node_of[static_cast<std::size_t>(compressed.unpacker[x])];
      }
      draft_calls = options.depth;
    }
    batch.assign(tree, state.length());
    score();
    const auto rows = static_cast<std::size_t>(batch.rows());
    TreeVerdict verdict;
    switch (options.verification) {
      case RedrafterVerification::kExact: {
        draft_rows.resize(rows * v);
        for (std::size_t r = 0; r < rows; ++r) {
          const auto node = static_cast<std::int32_t>(r) - 1;
          if (drafted.has_row(node)) {
            const auto row = drafted.row(node);
            std::copy(row.begin(), row.end(),
                      draft_rows.begin() + static_cast<std::ptrdiff_t>(r * v));
          } else {  // a leaf: never read by the walk
            std::copy_n(target_rows.begin() + static_cast<std::ptrdiff_t>(r * v), v,
                        draft_rows.begin() + static_cast<std::ptrdiff_t>(r * v));
          }
        }
        verdict = verify_tree<float>(Recursive{}, tree.tokens, tree.parents, target_rows,
                                     draft_rows, vocab, state.verify_stream(), accepted, ws);
        break;
      }
      case RedrafterVerification::kGreedy:
        verdict = verify_tree<float>(Greedy{}, tree.tokens, tree.parents, target_rows, target_rows,
                                     vocab, state.verify_stream(), accepted, ws);
        break;
      case RedrafterVerification::kTypical:
        verdict = verify_tree<float>(options.typical, tree.tokens, tree.parents, target_rows,
                                     target_rows, vocab, state.verify_stream(), accepted, ws);
        break;
      case RedrafterVerification::kParity:
        verdict = detail::redrafter_parity_verdict(beams, node_of_beam, target_rows, vocab,
                                                   state.verify_stream(), accepted, scratch);
        break;
    }
    const std::int32_t kept = verdict.accepted;
    const auto [emitted, finished] = emit(kept, verdict.token);
    result.metrics.record_step({tree.size(), tree.max_depth(), kept, emitted, draft_calls});
    done = finished;
    if (done) break;
    const std::size_t last_row =
        kept == 0 ? 0 : static_cast<std::size_t>(accepted[static_cast<std::size_t>(kept - 1)] + 1);
    std::copy_n(hidden.begin() + static_cast<std::ptrdiff_t>(last_row * h), h,
                context_hidden.begin());
    target.commit(batch,
                  std::span<const std::int32_t>(accepted.data(), static_cast<std::size_t>(kept)),
                  verdict.token);
    state.append(step_tokens);
  }
  result.metrics.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  return result;
}

}  // namespace specdec
