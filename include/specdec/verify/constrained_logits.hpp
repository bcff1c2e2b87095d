// SPDX-License-Identifier: MIT
// Constrained verification from logits: the target row at a position is the warp of its logits
// transformed as the request asks (penalties, then a grammar bitmask, allowed ids, min_tokens and
// banned words setting entries to -inf). Each target row is transformed when the walk first reads
// it, into one of two rows of scratch: the mask is read as V/8 bytes (one bit test per entry of
// the copy), penalties adjust their few tokens only, banned words their matching last tokens; the
// walk then runs on the transformed row exactly as on a row given transformed, so verdicts and
// tokens equal the plain from-logits entry on the transformed logits bit for bit. Rows the walk
// never reaches are neither read nor transformed: a position after a draft token its own mask
// forbids is never reached (that token's target probability is 0 and it is rejected with
// certainty), so its mask is never read.
// The public forms live in namespace specdec::constrained under the names of the plain ones
// (constrained::verify_chain_logits beside specdec::verify_chain_logits).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/tree_logits.hpp"

namespace specdec::constrained {

/// A token of a sequence that a penalty applies to: its count in the output so far (not counting
/// the draft) and whether the prompt holds it. Each token at most once per list.
struct PenalisedToken {
  Token token = 0;
  std::int32_t count = 0;
  bool in_prompt = false;
};

/// vLLM's penalties (SamplingParams): a token in the prompt, the output or the draft prefix has a
/// positive logit divided by `repetition`, a negative one multiplied by it; then
/// `frequency * count + presence * [count > 0]` is subtracted, count over output + draft prefix.
struct Penalties {
  float repetition = 1.0f;
  float frequency = 0.0f;
  float presence = 0.0f;
  std::span<const PenalisedToken> tokens{};
  bool any() const { return repetition != 1.0f || frequency != 0.0f || presence != 0.0f; }
};

/// The constraints of one sequence's target rows. `bitmask`: xgrammar's / vLLM's packed mask,
/// ceil(vocab / 32) int32 words per target row (bit j of word k set = token 32k + j allowed),
/// empty for none. `allowed`: the only tokens allowed at every row (vLLM's allowed_token_ids),
/// empty for all. `stop_tokens` are masked at a row while `output_length` plus the row's draft
/// prefix is below `min_tokens`. Banned words (vLLM's bad_words): word w is
/// bad_words[bad_word_offsets[w], bad_word_offsets[w + 1]) (W + 1 offsets from 0, empty for none);
/// its last token is masked at a row whose history (`output_tail`, then the row's draft prefix)
/// ends with its other tokens, a one-token word at every row. `output_tail`: the output's last
/// tokens, at least the longest word's length - 1 of them unless the output is shorter.
struct LogitConstraints {
  std::span<const std::int32_t> bitmask{};
  std::span<const Token> allowed{};
  Penalties penalties{};
  std::span<const Token> stop_tokens{};
  std::int64_t min_tokens = 0;
  std::int64_t output_length = 0;
  std::span<const Token> bad_words{};
  std::span<const std::int32_t> bad_word_offsets{};
  std::span<const Token> output_tail{};
};

}  // namespace specdec::constrained

namespace specdec::detail {

using constrained::LogitConstraints;
using constrained::PenalisedToken;
using constrained::Penalties;

/// Words of a packed mask row for `vocab` tokens.
SPECDEC_HOST_DEVICE std::int64_t mask_words(std::int64_t vocab) { return (vocab + 31) / 32; }

/// Whether bit `token` of a packed mask row is set.
SPECDEC_HOST_DEVICE bool mask_allows(const std::int32_t* row, std::int64_t token) {
  return ((static_cast<std::uint32_t>(row[token >> 5]) >> (token & 31)) & 1u) != 0;
}

/// `a` where `first`, else `b`, by their bits: no branch.
SPECDEC_HOST_DEVICE float select_bits(bool first, float a, float b) {
  const std::uint32_t keep = 0u - static_cast<std::uint32_t>(first);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & keep) |
                              (std::bit_cast<std::uint32_t>(b) & ~keep));
}

/// A logit after the penalties, for a token counted `count` times in output + draft prefix.
/// Both sides of each choice are computed and one kept by its bits: the signs and counts of the
/// penalised tokens are coin tosses, and a mispredicted branch waits for the next token's logit
/// (a load from the far caches) each time.
SPECDEC_HOST_DEVICE float penalised_logit(float logit, float repetition, float frequency,
                                          float presence, std::int32_t count, bool in_prompt) {
  const bool seen = count > 0;
  const float repeated = select_bits(logit > 0.0f, logit / repetition, logit * repetition);
  logit = select_bits(in_prompt || seen, repeated, logit);
  logit -= frequency * static_cast<float>(count);
  return logit - select_bits(seen, presence, 0.0f);
}

/// Occurrences of `token` among `prefix[0, length)`.
inline std::int32_t occurrences(const Token* prefix, std::int64_t length, Token token) {
  std::int32_t c = 0;
  for (std::int64_t j = 0; j < length; ++j) c += prefix[j] == token ? 1 : 0;
  return c;
}

/// The checks of a sequence's constraints for `rows` target rows of `vocab`.
inline void check_constraints(const LogitConstraints& c, std::int64_t rows, std::int64_t vocab) {
  if (!c.bitmask.empty()) {
    check_size("bitmask", c.bitmask.size(), static_cast<std::size_t>(rows * mask_words(vocab)));
  }
  for (std::size_t i = 0; i < c.allowed.size(); ++i) {
    check_token(ArgName("allowed", static_cast<std::int64_t>(i)), c.allowed[i], vocab);
  }
  for (std::size_t i = 0; i < c.stop_tokens.size(); ++i) {
    check_token(ArgName("stop_tokens", static_cast<std::int64_t>(i)), c.stop_tokens[i], vocab);
  }
  const Penalties& p = c.penalties;
  if (!(std::isfinite(p.repetition) && p.repetition > 0.0f)) {
    fail("penalties.repetition", "{} must be finite and > 0", p.repetition);
  }
  if (!std::isfinite(p.frequency)) fail("penalties.frequency", "{} must be finite", p.frequency);
  if (!std::isfinite(p.presence)) fail("penalties.presence", "{} must be finite", p.presence);
  for (std::size_t i = 0; i < p.tokens.size(); ++i) {
    const ArgName name("penalties.tokens", static_cast<std::int64_t>(i));
    check_token(name, p.tokens[i].token, vocab);
    if (p.tokens[i].count < 0) fail(name, "count {} must be >= 0", p.tokens[i].count);
  }
  if (c.min_tokens < 0) fail("min_tokens", "{} must be >= 0", c.min_tokens);
  if (c.output_length < 0) fail("output_length", "{} must be >= 0", c.output_length);
  const auto& offsets = c.bad_word_offsets;
  if (!offsets.empty() || !c.bad_words.empty()) {
    if (offsets.empty() || offsets.front() != 0 ||
        offsets.back() != static_cast<std::int64_t>(c.bad_words.size())) {
      fail("bad_word_offsets", "must run from 0 to bad_words.size() = {} ({} offsets given)",
           c.bad_words.size(), offsets.size());
    }
    for (std::size_t w = 0; w + 1 < offsets.size(); ++w) {
      if (offsets[w + 1] <= offsets[w]) {
        fail(ArgName("bad_word_offsets", static_cast<std::int64_t>(w)), "word {} is empty", w);
      }
    }
  }
  for (std::size_t i = 0; i < c.bad_words.size(); ++i) {
    check_token(ArgName("bad_words", static_cast<std::int64_t>(i)), c.bad_words[i], vocab);
  }
  for (std::size_t i = 0; i < c.output_tail.size(); ++i) {
    check_token(ArgName("output_tail", static_cast<std::int64_t>(i)), c.output_tail[i], vocab);
  }
}

/// Token k of a row's history: the output's tail, then the row's draft prefix.
inline Token history_token(const LogitConstraints& c, const Token* prefix, std::int64_t k) {
  const auto tail = static_cast<std::int64_t>(c.output_tail.size());
  return k < tail ? c.output_tail[static_cast<std::size_t>(k)] : prefix[k - tail];
}

/// Whether banned word w's last token is masked at a row whose draft prefix is
/// `prefix[0, length)`: its other tokens end the row's history (vLLM's bad_words rule).
inline bool bad_word_matches(const LogitConstraints& c, std::size_t w, const Token* prefix,
                             std::int64_t length) {
  const std::int64_t begin = c.bad_word_offsets[w];
  const std::int64_t before = c.bad_word_offsets[w + 1] - 1 - begin;
  const std::int64_t history = static_cast<std::int64_t>(c.output_tail.size()) + length;
  if (before > history) return false;
  for (std::int64_t j = 0; j < before; ++j) {
    if (history_token(c, prefix, history - before + j) !=
        c.bad_words[static_cast<std::size_t>(begin + j)]) {
      return false;
    }
  }
  return true;
}

/// Whether `token` is masked at the row after the tokens of `length` and `prefix` besides by the
/// bitmask and allowed ids: a stop token before min_tokens, or a banned word's last token.
inline bool masked_by_history(const LogitConstraints& c, const Token* prefix, std::int64_t length,
                              Token token) {
  if (c.output_length + length < c.min_tokens) {
    for (const Token t : c.stop_tokens) {
      if (t == token) return true;
    }
  }
  for (std::size_t w = 0; w + 1 < c.bad_word_offsets.size(); ++w) {
    if (c.bad_words[static_cast<std::size_t>(c.bad_word_offsets[w + 1] - 1)] == token &&
        bad_word_matches(c, w, prefix, length)) {
      return true;
    }
  }
  return false;
}

/// Calls mask(t) for each token the history masks at the row after the draft prefix
/// `prefix[0, length)`: the stop tokens before min_tokens, and each banned word's last token where
/// its other tokens end the history. Returns how many calls it made.
template <class Mask>
std::int64_t for_each_masked_by_history(const LogitConstraints& c, const Token* prefix,
                                        std::int64_t length, Mask&& mask) {
  std::int64_t masked = 0;
  if (c.output_length + length < c.min_tokens) {
    for (const Token t : c.stop_tokens) mask(t);
    masked += std::ssize(c.stop_tokens);
  }
  for (std::size_t w = 0; w + 1 < c.bad_word_offsets.size(); ++w) {
    if (!bad_word_matches(c, w, prefix, length)) continue;
    mask(c.bad_words[static_cast<std::size_t>(c.bad_word_offsets[w + 1] - 1)]);
    ++masked;
  }
  return masked;
}

/// Calls penalise(t, count, in_prompt) once for each token the penalties touch at the row after
/// the draft prefix `prefix[0, length)`: the listed tokens, their counts with the prefix's
/// occurrences added, then the prefix's tokens not listed (each at its first occurrence).
template <class Penalise>
void for_each_penalised(const Penalties& p, const Token* prefix, std::int64_t length,
                        Penalise&& penalise) {
  // A bit per prefix token (its id mod 64): most listed tokens are not in the prefix and skip
  // counting their occurrences there.
  std::uint64_t in_prefix = 0;
  for (std::int64_t j = 0; j < length; ++j) in_prefix |= std::uint64_t{1} << (prefix[j] & 63);
  for (const PenalisedToken& e : p.tokens) {
    const bool maybe = ((in_prefix >> (e.token & 63)) & 1u) != 0;
    penalise(e.token, e.count + (maybe ? occurrences(prefix, length, e.token) : 0), e.in_prompt);
  }
  for (std::int64_t j = 0; j < length; ++j) {
    const Token t = prefix[j];
    if (occurrences(prefix, j, t) > 0) continue;
    std::int32_t listed = 0;  // no early exit: the loop over the list vectorises
    for (const PenalisedToken& e : p.tokens) listed |= e.token == t ? 1 : 0;
    if (listed == 0) penalise(t, occurrences(prefix + j, length - j, t), false);
  }
}

/// Writes row `row` of raw logits `raw` transformed by `c` into `out` (vocab floats), for a
/// row whose draft prefix is `prefix[0, length)`. Throws when the row allows no token.
inline void transform_logit_row(const LogitConstraints& c, std::int64_t row, const float* raw,
                                const Token* prefix, std::int64_t length, std::int64_t vocab,
                                float* out) {
  const std::int32_t* mask =
      c.bitmask.empty() ? nullptr : c.bitmask.data() + row * mask_words(vocab);
  std::int64_t allowed = 0;
  if (!c.allowed.empty()) {
    // A sparse row: only the listed ids, where the grammar allows them.
    for (std::int64_t i = 0; i < vocab; ++i) out[i] = kNegInf;
    for (const Token t : c.allowed) {
      const bool ok = mask == nullptr || mask_allows(mask, t);
      out[t] = ok ? raw[t] : kNegInf;
      allowed += ok ? 1 : 0;
    }
  } else if (mask != nullptr) {
    const auto* words = reinterpret_cast<const std::uint32_t*>(mask);
    for (std::int64_t k = 0; k < mask_words(vocab); ++k) {
      allowed += std::popcount(words[k] & (32 * k + 32 <= vocab ? ~0u : (1u << (vocab % 32)) - 1u));
    }
    write_masked_row(raw, words, vocab, out);
  } else {
    std::copy(raw, raw + vocab, out);
    allowed = vocab;
  }
  // Masked by the history: stop tokens before min_tokens, banned words' last tokens.
  const std::int64_t masked =
      for_each_masked_by_history(c, prefix, length, [&](Token t) { out[t] = kNegInf; });
  // They may have been the only tokens allowed: count what is left (rare, a full scan).
  if (masked > 0 && allowed <= masked) {
    allowed = 0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const auto t = static_cast<Token>(i);
      bool ok = mask == nullptr || mask_allows(mask, i);
      if (!c.allowed.empty()) ok = ok && occurrences(c.allowed.data(), std::ssize(c.allowed), t) > 0;
      allowed += ok && !masked_by_history(c, prefix, length, t) ? 1 : 0;
    }
  }
  if (allowed <= 0) {
    // Named for the mask when there is one, else for the constraints as a whole.
    fail(ArgName(mask != nullptr ? "bitmask" : "constraints", row),
         "allows no token at target row {} (with allowed ids, stop tokens and banned words)", row);
  }
  // The penalties: the listed tokens with the prefix's occurrences added, then prefix tokens not
  // listed (each at its first occurrence). Masked entries stay -inf.
  const Penalties& p = c.penalties;
  if (!p.any()) return;
  for_each_penalised(p, prefix, length, [&](Token t, std::int32_t count, bool in_prompt) {
    if (out[t] == kNegInf) return;
    out[t] = penalised_logit(raw[t], p.repetition, p.frequency, p.presence, count, in_prompt);
  });
}

/// Whether `c` leaves row `row` (draft prefix `prefix[0, length)`) as it is: no allowed ids, no
/// penalty touching it, no stop token or banned word masked there, and a mask row of ones over
/// the vocabulary (V/8 bytes read). Such a row is read in place, not copied.
inline bool identity_row(const LogitConstraints& c, std::int64_t row, const Token* prefix,
                         std::int64_t length, std::int64_t vocab) {
  if (!c.allowed.empty()) return false;
  if (c.penalties.any() && (length > 0 || !c.penalties.tokens.empty())) return false;
  if (c.output_length + length < c.min_tokens && !c.stop_tokens.empty()) return false;
  for (std::size_t w = 0; w + 1 < c.bad_word_offsets.size(); ++w) {
    if (bad_word_matches(c, w, prefix, length)) return false;
  }
  if (c.bitmask.empty()) return true;
  const std::int32_t* mask = c.bitmask.data() + row * mask_words(vocab);
  // 64 words at a time, stopping at the first block with a clear bit (a grammar's mask forbids
  // tokens from its first words, so a masked row is known after the first block).
  const std::int64_t whole = vocab / 32;
  for (std::int64_t k = 0; k < whole; k += 64) {
    std::uint32_t all = ~0u;
    for (std::int64_t j = k; j < std::min(whole, k + 64); ++j) {
      all &= static_cast<std::uint32_t>(mask[j]);
    }
    if (all != ~0u) return false;
  }
  for (std::int64_t i = 32 * whole; i < vocab; ++i) {
    if (!mask_allows(mask, i)) return false;
  }
  return true;
}

/// The packed mask of row `row` after the draft prefix `prefix[0, length)` with the tokens the
/// history masks cleared (bitmask row, or all ones without one), into `words` (mask_words(vocab)).
inline void history_mask(const LogitConstraints& c, std::int64_t row, const Token* prefix,
                         std::int64_t length, std::int64_t vocab, std::uint32_t* words) {
  const std::int64_t count = mask_words(vocab);
  if (c.bitmask.empty()) {
    std::fill(words, words + count, ~0u);
  } else {
    const std::int32_t* mask = c.bitmask.data() + row * count;
    for (std::int64_t k = 0; k < count; ++k) words[k] = static_cast<std::uint32_t>(mask[k]);
  }
  for_each_masked_by_history(c, prefix, length,
                             [&](Token t) { words[t >> 5] &= ~(1u << (t & 31)); });
}

/// The transformed target rows of one sequence, made on first use (LogitRows' source): two rows
/// of scratch, the older one replaced. `prefix(r, buffer)` writes row r's draft prefix into
/// `buffer` and returns its length (the chain's first r tokens, a tree node's ancestors). A rough
/// pass (rough_row) reads the raw row through the row's mask instead of making the row.
template <class Prefix>
struct ConstrainedRows {
  const LogitConstraints* constraints;
  LogitRows<float> raw;
  std::int64_t vocab;
  Prefix prefix;
  Token* prefix_buffer;
  float* rows[2];
  std::uint32_t* words;  // mask_words(vocab): a rough pass's mask
  TileSum* tiles;        // 2 tile_count(vocab): a rough pass's tiles, then its penalised entries'
  std::int64_t held[2] = {-1, -1};
  const float* given[2] = {nullptr, nullptr};  // rows[k], or the raw row where it is unchanged
  int next = 0;
  std::int64_t sequence = -1;  // in a batch: its errors name the sequence ("bitmask[b][i]")

  static const float* fetch(void* self, std::int64_t r) {
    auto& s = *static_cast<ConstrainedRows*>(self);
    for (int k = 0; k < 2; ++k) {
      if (s.held[k] == r) return s.given[k];
    }
    const int k = s.next;
    s.next ^= 1;
    s.held[k] = -1;  // a throw leaves no stale row
    const std::int64_t length = s.prefix(r, s.prefix_buffer);
    const float* raw = s.raw.row(r);
    s.given[k] = raw;
    if (!identity_row(*s.constraints, r, s.prefix_buffer, length, s.vocab)) {
      try {
        transform_logit_row(*s.constraints, r, raw, s.prefix_buffer, length, s.vocab, s.rows[k]);
      } catch (const Error& e) {
        if (s.sequence < 0) throw;
        rethrow_for_sequence(e, s.sequence);
      }
      s.given[k] = s.rows[k];
    }
    s.held[k] = r;
    return s.given[k];
  }

  /// rough_row of transformed row r for its entry x, without making the row: the raw row read
  /// through its mask with the history's and the penalised tokens cleared, the penalised tokens'
  /// values summed as tiles of their own (a rough pass's bounds hold for any grouping of the
  /// entries into tiles). A row allowing nothing comes out invalid, and the exact path names it.
  static RoughRow rough(void* self, const Warp& w, std::int64_t r, Token x, float* logit) {
    auto& s = *static_cast<ConstrainedRows*>(self);
    const LogitConstraints& c = *s.constraints;
    const std::int64_t v = s.vocab;
    bool made = !c.allowed.empty();  // sparse rows: made, a few entries written
    for (int k = 0; k < 2; ++k) made = made || s.held[k] == r;
    const std::int64_t length = made ? 0 : s.prefix(r, s.prefix_buffer);
    if (made || identity_row(c, r, s.prefix_buffer, length, v)) {
      const float* row = made ? fetch(self, r) : s.raw.row(r);
      *logit = row[x];
      return rough_row(w, row, v, *logit, s.tiles);
    }
    const float* raw = s.raw.row(r);
    history_mask(c, r, s.prefix_buffer, length, v, s.words);
    const Penalties& p = c.penalties;
    const auto allows = [&](Token t) { return ((s.words[t >> 5] >> (t & 31)) & 1u) != 0; };
    const auto penalised = [&](Token t, std::int32_t count, bool prompt) {
      return penalised_logit(raw[t], p.repetition, p.frequency, p.presence, count, prompt);
    };
    // The penalised entries the masks allow are cleared from the mask (x's value taken on the
    // way), the row summed through it, and then their values (read once the pass has brought the
    // row into the caches) summed as tiles after the row's.
    *logit = allows(x) ? raw[x] : kNegInf;
    if (p.any()) {
      for_each_penalised(p, s.prefix_buffer, length, [&](Token t, std::int32_t count, bool prompt) {
        if (t == x && allows(t)) *logit = penalised(t, count, prompt);
        s.words[t >> 5] &= ~(1u << (t & 31));  // a bit already clear stays clear
      });
    }
    const float inv_t = 1.0f / w.temperature;
    const bool above = w.top_p < 1.0f;
    const float threshold = rough_threshold(*logit, inv_t);
    const bool valid =
        above ? masked_rough_tile_pass<true>(raw, s.words, v, inv_t, s.tiles, threshold)
              : masked_rough_tile_pass<false>(raw, s.words, v, inv_t, s.tiles);
    // The values gathered into the older row of scratch, which is then no longer held.
    float* values = s.rows[s.next];
    s.held[s.next] = -1;
    std::int64_t m = 0;
    if (p.any()) {
      const std::int32_t* mask = c.bitmask.empty() ? nullptr : c.bitmask.data() + r * mask_words(v);
      for_each_penalised(p, s.prefix_buffer, length, [&](Token t, std::int32_t count, bool prompt) {
        if ((mask == nullptr || mask_allows(mask, t)) &&
            !masked_by_history(c, s.prefix_buffer, length, t)) {
          values[m++] = penalised(t, count, prompt);
        }
      });
    }
    const std::int64_t tiles = tile_count(v);
    std::int64_t extra = 0;
    std::int32_t bad = 0;
    for (std::int64_t b = 0; b < m; b += kSumTile) {
      const std::int64_t count = std::min(m - b, kSumTile);
      s.tiles[tiles + extra++] =
          above ? tile_sum<true, true>(values + b, count, inv_t, threshold, bad)
                : tile_sum<false, true>(values + b, count, inv_t, threshold, bad);
    }
    return rough_row_of_tiles(s.tiles, tiles + extra, inv_t, valid && bad == 0);
  }

  /// `raw` with this as its source (the same name, for errors).
  LogitRows<float> rows_view() {
    LogitRows<float> v = raw;
    v.source = {
        .fetch = &ConstrainedRows::fetch, .rough = &ConstrainedRows::rough, .context = this};
    return v;
  }
};

/// Bytes of scratch the transformed rows take besides the walk's: two rows, a row's mask, twice
/// its tiles and a prefix buffer of `depth` tokens.
inline std::size_t constrained_rows_size(std::int64_t vocab, std::int64_t depth) {
  return 2 * Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float)) +
         Workspace::round_up(static_cast<std::size_t>(mask_words(vocab)) * sizeof(std::uint32_t)) +
         Workspace::round_up(static_cast<std::size_t>(2 * tile_count(vocab)) * sizeof(TileSum)) +
         Workspace::round_up(static_cast<std::size_t>(std::max<std::int64_t>(depth, 1)) *
                             sizeof(Token));
}

/// A chain's prefixes: row r's are the first r draft tokens.
struct ChainPrefix {
  const Token* tokens;
  std::int64_t operator()(std::int64_t r, Token* buffer) const {
    std::copy(tokens, tokens + r, buffer);
    return r;
  }
};

/// A tree's prefixes: row 0's is empty, row i + 1's the tokens from the root down to node i.
struct TreePrefix {
  TreeView tree;
  std::int64_t operator()(std::int64_t r, Token* buffer) const {
    std::int64_t length = 0;
    for (auto node = static_cast<std::int32_t>(r - 1); node >= 0;
         node = tree.parents[static_cast<std::size_t>(node)]) {
      buffer[length++] = tree.tokens[static_cast<std::size_t>(node)];
    }
    std::reverse(buffer, buffer + length);
    return length;
  }
};

/// The transformed rows of `bytes` (constrained_rows_size(vocab, depth)) for `prefix`.
template <class Prefix>
ConstrainedRows<Prefix> constrained_rows(const LogitConstraints& c, const LogitRows<float>& target,
                                         Prefix prefix, std::int64_t vocab, std::byte* bytes) {
  const auto row = Workspace::round_up(static_cast<std::size_t>(vocab) * sizeof(float));
  const auto words =
      Workspace::round_up(static_cast<std::size_t>(mask_words(vocab)) * sizeof(std::uint32_t));
  const auto tiles =
      Workspace::round_up(static_cast<std::size_t>(2 * tile_count(vocab)) * sizeof(TileSum));
  return {.constraints = &c,
          .raw = target,
          .vocab = vocab,
          .prefix = prefix,
          .prefix_buffer = reinterpret_cast<Token*>(bytes + 2 * row + words + tiles),
          .rows = {reinterpret_cast<float*>(bytes), reinterpret_cast<float*>(bytes + row)},
          .words = reinterpret_cast<std::uint32_t*>(bytes + 2 * row),
          .tiles = reinterpret_cast<TileSum*>(bytes + 2 * row + words)};
}

/// The checks of a chain verified from target logits alone (no draft rows): the chain's, with
/// the target's first L rows standing in for the absent draft rows.
inline void check_target_only_chain_shapes(const Warp& warp, std::span<const float> target_logits,
                                           std::span<const Token> draft_tokens, std::int64_t vocab,
                                           std::size_t out_size) {
  const auto standin = target_logits.first(std::min<std::size_t>(
      target_logits.size(),
      draft_tokens.size() * static_cast<std::size_t>(std::max<std::int64_t>(vocab, 0))));
  check_chain_logits_shapes<float>(warp, target_logits, standin, draft_tokens, vocab, out_size);
}

/// The constrained chain entries' preamble after their shape checks: the constraints checked for
/// L + 1 target rows, the walk's scratch and the transformed rows of `target_logits` (row i's
/// draft prefix: draft_tokens[0, i)) taken from `ws`; returns walk(rows, scratch), `rows` the
/// transformed target rows (the walk may take more of `ws`).
template <class Walk>
auto with_constrained_chain(const LogitConstraints& constraints,
                            std::span<const float> target_logits,
                            std::span<const Token> draft_tokens, std::int64_t vocab, Workspace& ws,
                            Walk&& walk) {
  const auto length = static_cast<std::int64_t>(draft_tokens.size());
  check_constraints(constraints, length + 1, vocab);
  auto scope = ws.scope();
  auto bytes = ws.take<std::byte>(chain_logits_scratch_size(vocab));
  auto extra = ws.take<std::byte>(constrained_rows_size(vocab, length));
  auto rows = constrained_rows(constraints,
                               LogitRows<float>{target_logits.data(), vocab, "target_logits", 0},
                               ChainPrefix{draft_tokens.data()}, vocab, extra.data());
  return walk(rows.rows_view(), chain_logits_scratch(bytes.data(), vocab));
}

}  // namespace specdec::detail

namespace specdec::constrained {

/// Bytes of Workspace verify_chain_logits takes for `length` draft tokens of `vocab`.
inline std::size_t verify_chain_logits_workspace_size(std::int64_t vocab, std::int64_t length) {
  const std::int64_t v = std::max<std::int64_t>(vocab, 1);
  return detail::chain_logits_scratch_size(v) + detail::constrained_rows_size(v, length);
}

/// verify_chain_logits with the target rows transformed by `constraints` before the warp (row i's
/// draft prefix is draft_tokens[0, i)): the same tokens, draws and verdict as transforming every
/// target row (penalties, then the masks' -inf) and calling verify_chain_logits on them. The draft
/// rows are taken as given (transformed or not: a draft token the target's row forbids is rejected
/// with certainty). Throws specdec::Error naming the bad argument: verify_chain_logits's, bitmask
/// (its size, or `bitmask[i]` for a reached row allowing no token; `constraints[i]` without a
/// mask), allowed[i], stop_tokens[i],
/// penalties.*, min_tokens, output_length, bad_words[i], bad_word_offsets (`[w]` for an empty
/// word), output_tail[i].
inline ChainVerdict verify_chain_logits(const Warp& warp, std::span<const float> target_logits,
                                        std::span<const float> draft_logits,
                                        std::span<const Token> draft_tokens, std::int64_t vocab,
                                        const LogitConstraints& constraints,
                                        const RandomStream& stream, std::span<Token> out,
                                        Workspace& ws) {
  detail::check_chain_logits_shapes<float>(warp, target_logits, draft_logits, draft_tokens, vocab,
                                           out.size());
  return detail::with_constrained_chain(
      constraints, target_logits, draft_tokens, vocab, ws,
      [&](const detail::LogitRows<float>& target, const detail::ChainLogitsScratch& scratch) {
        auto chain =
            detail::chain_logit_rows<float>(target_logits, draft_logits, draft_tokens, vocab);
        chain.target = target;
        return detail::verify_chain_logits_unchecked<float>(warp, chain, stream, out.data(),
                                                            "draft_tokens", scratch);
      });
}

/// verify_chain_target_only_logits with the target rows transformed by `constraints`, as
/// verify_chain_logits documents (no draft rows). Workspace:
/// verify_chain_logits_workspace_size(vocab, L) bytes.
inline ChainVerdict verify_chain_target_only_logits(
    const Warp& warp, std::span<const float> target_logits, std::span<const Token> draft_tokens,
    std::int64_t vocab, const LogitConstraints& constraints, const RandomStream& stream,
    std::span<Token> out, Workspace& ws) {
  detail::check_target_only_chain_shapes(warp, target_logits, draft_tokens, vocab, out.size());
  return detail::with_constrained_chain(
      constraints, target_logits, draft_tokens, vocab, ws,
      [&](const detail::LogitRows<float>& target, const detail::ChainLogitsScratch& scratch) {
        return detail::verify_chain_target_only_logits_unchecked<float>(
            warp,
            {.target = target,
             .tokens = draft_tokens.data(),
             .length = std::ssize(draft_tokens),
             .vocab = vocab},
            stream, out.data(), scratch);
      });
}

/// Bytes of Workspace verify_tree_logits takes for a tree of `nodes` nodes.
inline std::size_t verify_tree_logits_workspace_size(std::size_t nodes, std::int64_t vocab) {
  return specdec::verify_tree_logits_workspace_size(nodes, vocab) +
         detail::constrained_rows_size(std::max<std::int64_t>(vocab, 1),
                                       static_cast<std::int64_t>(nodes));
}

/// verify_tree_logits with the target rows transformed by `constraints` before the warp, per
/// node: row 0's draft prefix is empty, row i + 1's the tokens from the root down to node i (so a
/// node's penalty counts are its ancestors' tokens and its own plus the sequence's), and the
/// bitmask has N + 1 rows. The same walk, draws and tokens as transforming every target row and
/// calling verify_tree_logits; a child its parent's row forbids is rejected with certainty and
/// its row never read. Draft rows as given. Throws as verify_tree_logits and
/// verify_chain_logits (bitmask, allowed[i], stop_tokens[i], penalties.*, ...).
inline TreeVerdict verify_tree_logits(const Rule& rule, const Warp& warp, TreeView tree,
                                      const RowSpans<float>& logits, std::int64_t vocab,
                                      const LogitConstraints& constraints,
                                      const RandomStream& stream,
                                      std::span<std::int32_t> accepted_nodes, Workspace& ws) {
  auto scope = ws.scope();
  const TreeBuffers buffers =
      detail::checked_tree_logits<float>(ws, &rule, warp, tree, logits, vocab, accepted_nodes);
  const auto nodes = static_cast<std::int64_t>(tree.tokens.size());
  detail::check_constraints(constraints, nodes + 1, vocab);
  auto bytes = ws.take<std::byte>(detail::tree_logits_scratch_size(vocab));
  auto extra = ws.take<std::byte>(detail::constrained_rows_size(vocab, nodes));
  auto rows = detail::constrained_rows(
      constraints, detail::LogitRows<float>{logits.target.data(), vocab, "target_logits", 0},
      detail::TreePrefix{tree}, vocab, extra.data());
  const detail::TreeLogitRows<float> view{
      .target = rows.rows_view(),
      .draft = {logits.draft.data(), vocab, "draft_logits", 0},
      .vocab = vocab};
  return detail::verify_tree_logits_unchecked<float>(
      rule, warp, tree, view, stream, buffers, detail::tree_logits_scratch(bytes.data(), vocab));
}

/// verify_tree_target_only_logits with the target rows transformed by `constraints` per node, as
/// verify_tree_logits documents. Workspace:
/// verify_tree_logits_workspace_size(N, vocab) bytes.
inline TreeVerdict verify_tree_target_only_logits(
    const Warp& warp, TreeView tree, std::span<const float> target_logits, std::int64_t vocab,
    const LogitConstraints& constraints, const RandomStream& stream,
    std::span<std::int32_t> accepted_nodes, Workspace& ws) {
  auto scope = ws.scope();
  const TreeBuffers buffers = detail::checked_tree_logits<float>(
      ws, nullptr, warp, tree, {.target = target_logits}, vocab, accepted_nodes);
  const auto nodes = static_cast<std::int64_t>(tree.tokens.size());
  detail::check_constraints(constraints, nodes + 1, vocab);
  auto bytes = ws.take<std::byte>(detail::chain_logits_scratch_size(vocab));
  auto extra = ws.take<std::byte>(detail::constrained_rows_size(vocab, nodes));
  auto rows = detail::constrained_rows(
      constraints, detail::LogitRows<float>{target_logits.data(), vocab, "target_logits", 0},
      detail::TreePrefix{tree}, vocab, extra.data());
  return detail::verify_tree_target_only_logits_unchecked<float>(
      warp, tree, rows.rows_view(), vocab, stream, buffers,
      detail::chain_logits_scratch(bytes.data(), vocab));
}

}  // namespace specdec::constrained
