// SPDX-License-Identifier: MIT
// ReDrafter's dynamic tree attention (seed 001 Listing 1): prefix matching of W equal-length beams,
// the compressed token list with its tree, mask and positions, and the unpacker back to beams.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_mask.hpp"
#include "specdec/tree/tree_rows.hpp"

namespace specdec {

namespace detail {

/// Validates W beams given as one row-major array and returns their common length L.
/// Complexity: O(W x L).
inline std::int32_t check_beams(std::span<const Token> beams, std::int32_t width,
                                std::int64_t vocab) {
  if (width <= 0) fail("width", "{} must be > 0 (at least one beam)", width);
  if (vocab <= 0) fail("vocab", "{} must be > 0", vocab);
  if (beams.empty()) fail("beams", "is empty (beams need at least one token)");
  if (beams.size() % static_cast<std::size_t>(width) != 0) {
    fail("beams", "{} tokens do not split into {} beams of equal length", beams.size(), width);
  }
  const auto length = beams.size() / static_cast<std::size_t>(width);
  if (beams.size() > static_cast<std::size_t>(INT32_MAX)) {
    fail("beams", "{} tokens is too many (at most {})", beams.size(), INT32_MAX);
  }
  for (std::size_t x = 0; x < beams.size(); ++x) {
    if (beams[x] < 0 || beams[x] >= vocab) {
      fail(fmt::format("beams[{}][{}]", x / length, x % length),
           "token {} is outside the vocabulary [0, {})", beams[x], vocab);
    }
  }
  return static_cast<std::int32_t>(length);
}

/// Mixes a 64-bit key into a table index (the splitmix64 finalizer: every input bit moves the low
/// bits, so keys that differ in a single token spread over the table).
inline std::uint64_t mix_key(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// beam_prefix_match's output in O(W x L) expected time on the host: position by position, an
/// open-addressing table maps (the beam's match at k - 1, its token at k) to the first beam
/// holding it, which is the smallest since beams are visited in order. The table is per-thread
/// scratch that keeps its capacity, so repeated calls do not allocate.
inline void hashed_prefix_match(const Token* beams, std::int32_t width, std::int32_t length,
                                std::int32_t* out) {
  constexpr std::uint64_t kEmpty = ~std::uint64_t{0};  // keys are below 2^63
  std::size_t capacity = 16;  // a power of two at least twice the beams: probes stay short
  while (capacity < 2 * static_cast<std::size_t>(width)) capacity *= 2;
  const std::size_t mask = capacity - 1;
  thread_local std::vector<std::uint64_t> keys;
  thread_local std::vector<std::int32_t> first;
  if (keys.size() < capacity) {
    keys.resize(capacity);
    first.resize(capacity);
  }
  const auto l = static_cast<std::size_t>(length);
  for (std::size_t k = 0; k < l; ++k) {
    std::fill(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(capacity), kEmpty);
    for (std::size_t i = 0; i < static_cast<std::size_t>(width); ++i) {
      const std::int32_t previous = k > 0 ? out[i * l + k - 1] : -1;
      const auto key = (static_cast<std::uint64_t>(previous + 1) << 32) |
                       static_cast<std::uint32_t>(beams[i * l + k]);
      std::size_t slot = mix_key(key) & mask;
      while (keys[slot] != kEmpty && keys[slot] != key) slot = (slot + 1) & mask;
      if (keys[slot] == kEmpty) {
        keys[slot] = key;
        first[slot] = static_cast<std::int32_t>(i);
      }
      out[i * l + k] = first[slot];
    }
  }
}

/// Flattens beams given one vector per beam into a row-major array (`flat` is resized), for tests
/// and setup code. Throws when there are no beams or the beams differ in length.
inline void flatten_beams(std::span<const std::vector<Token>> beams, std::vector<Token>& flat) {
  if (beams.empty()) fail("beams", "no beams (width 0)");
  flat.clear();
  for (std::size_t j = 0; j < beams.size(); ++j) {
    if (beams[j].size() != beams[0].size()) {
      detail::fail(fmt::format("beams[{}]", j),
                   "has {} tokens but beams[0] has {} (beams must have equal length)",
                   beams[j].size(), beams[0].size());
    }
    flat.insert(flat.end(), beams[j].begin(), beams[j].end());
  }
}

}  // namespace detail

/// ReDrafter's prefix match (seed 001 Listing 1) of `width` beams stored row-major in `beams`
/// (W x L): `out[i * L + k]` = the smallest beam index sharing beam i's first k + 1 tokens. Tokens
/// must lie in [0, vocab). `out` holds W * L entries.
/// Complexity: O(W x L) expected (one hash table lookup per token), however the beams share
/// prefixes.
inline void prefix_match(std::span<const Token> beams, std::int32_t width, std::int64_t vocab,
                         std::span<std::int32_t> out) {
  const auto length = detail::check_beams(beams, width, vocab);
  detail::check_buffer("out", out, beams.size());
  detail::hashed_prefix_match(beams.data(), width, length, out.data());
}

/// The beams with shared prefixes stored once (seed 001's dynamic tree attention). Compressed
/// nodes are in (beam, position) row-major order: beam j contributes position k when it is the
/// smallest beam holding its first k + 1 tokens. Vectors keep their capacity between calls.
struct CompressedBeams {
  std::int32_t width = 0;                  ///< W, the number of beams
  std::int32_t length = 0;                 ///< L, tokens per beam
  std::vector<std::int32_t> prefix_match;  ///< W * L, as prefix_match() returns it
  std::vector<Token> tokens;               ///< n compressed tokens
  std::vector<std::int32_t> source;        ///< n flat beam indices j * L + k (ReDrafter's
                                           ///< packed_token_indices)
  std::vector<std::int32_t> offsets;   ///< n position offsets k (the depth in the beam, 0-based)
  std::vector<std::int32_t> parents;   ///< n compressed ids of the parent, -1 at k = 0
  std::vector<std::int32_t> unpacker;  ///< W * L: the compressed id holding beams[j][k]

  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
};

namespace detail {

/// Checks that a CompressedBeams is consistent (as compress_beams leaves it): n entries in every
/// per-node vector, W * L in unpacker, parents earlier and one position shallower, unpacker ids
/// in range.
/// Complexity: O(n + W x L).
inline void check_compressed(const CompressedBeams& beams) {
  if (beams.width < 0) fail("beams.width", "{} must be >= 0", beams.width);
  if (beams.length < 0) fail("beams.length", "{} must be >= 0", beams.length);
  const auto n = beams.tokens.size();
  detail::check_size("beams.source", beams.source.size(), n);
  detail::check_size("beams.offsets", beams.offsets.size(), n);
  detail::check_size("beams.parents", beams.parents.size(), n);
  detail::check_size(
      "beams.unpacker", beams.unpacker.size(),
      static_cast<std::size_t>(beams.width) * static_cast<std::size_t>(beams.length));
  for (std::size_t r = 0; r < n; ++r) {
    const auto parent = beams.parents[r];
    const auto offset = beams.offsets[r];
    if (offset < 0 || offset >= beams.length) {
      fail(fmt::format("beams.offsets[{}]", r), "{} is outside [0, {})", offset, beams.length);
    }
    check_parent(ArgName("beams.parents", r), parent, static_cast<std::int64_t>(r));
    const auto expected = parent < 0 ? 0 : beams.offsets[static_cast<std::size_t>(parent)] + 1;
    if (offset != expected) {
      fail(fmt::format("beams.offsets[{}]", r), "{} should be {} (parent's offset + 1)", offset,
           expected);
    }
  }
  for (std::size_t x = 0; x < beams.unpacker.size(); ++x) {
    if (beams.unpacker[x] < 0 || static_cast<std::size_t>(beams.unpacker[x]) >= n) {
      fail(fmt::format("beams.unpacker[{}]", x), "{} is not a compressed node (there are {})",
           beams.unpacker[x], n);
    }
  }
}

}  // namespace detail

/// Compresses `width` row-major beams (tokens in [0, vocab)) into `out`. Afterwards
/// `out.tokens[out.unpacker[j * L + k]] == beams[j * L + k]` for every j, k, and
/// `out.parents[r] < r`.
/// Complexity: O(W x L) expected: one prefix match, then one pass over the tokens.
inline void compress_beams(std::span<const Token> beams, std::int32_t width, std::int64_t vocab,
                           CompressedBeams& out) {
  const auto length = detail::check_beams(beams, width, vocab);
  const auto total = beams.size();
  out.width = width;
  out.length = length;
  out.prefix_match.resize(total);
  out.unpacker.resize(total);
  out.tokens.clear();
  out.source.clear();
  out.offsets.clear();
  out.parents.clear();
  detail::hashed_prefix_match(beams.data(), width, length, out.prefix_match.data());
  for (std::int32_t j = 0; j < width; ++j) {
    for (std::int32_t k = 0; k < length; ++k) {
      const auto flat = static_cast<std::size_t>(j * length + k);
      const auto owner = out.prefix_match[flat];
      if (owner == j) {
        out.unpacker[flat] = out.size();
        out.tokens.push_back(beams[flat]);
        out.source.push_back(static_cast<std::int32_t>(flat));
        out.offsets.push_back(k);
        out.parents.push_back(k == 0 ? -1 : out.unpacker[flat - 1]);
      } else {
        out.unpacker[flat] = out.unpacker[static_cast<std::size_t>(owner * length + k)];
      }
    }
  }
}

/// A batch of compressed beams in the layouts of ReDrafter's reference code and TensorRT-LLM.
/// Vectors keep their capacity between calls.
struct PackedBeamBatch {
  std::int32_t batch = 0;                   ///< B
  std::int32_t width = 0;                   ///< W
  std::int32_t length = 0;                  ///< L
  std::int32_t max_selected = 0;            ///< the longest compressed row
  std::vector<std::int32_t> total_lengths;  ///< B compressed lengths
  std::vector<Token> flat_tokens;  ///< the rows' compressed tokens back to back (TensorRT-LLM)
  std::vector<std::int32_t> flat_indices;  ///< their flat beam indices j * L + k
  /// B x max_selected, as the reference pads them: entry (b, m) is flat entry
  /// min(start_b + m, total - 1), start_b = the sum of the earlier rows' lengths. A pad entry
  /// (m >= total_lengths[b]) therefore repeats the next row's first entries; nothing unpacks to it.
  std::vector<Token> packed_tokens;
  std::vector<std::int32_t> packed_token_indices;  ///< B x max_selected, padded the same way
  std::vector<std::int32_t> position_offsets;      ///< B x max_selected: packed_token_indices % L
  std::vector<std::int32_t> unpacker;  ///< B x W x L, per row as CompressedBeams::unpacker
};

/// Compresses B batch rows of W beams of L tokens (`beams` holds B * W * L tokens, row-major
/// [B, W, L]) into `out`; `scratch` is reused for each row.
/// Complexity: O(B x W x L) expected.
inline void pack_beam_batch(std::span<const Token> beams, std::int32_t batch, std::int32_t width,
                            std::int64_t vocab, PackedBeamBatch& out, CompressedBeams& scratch) {
  if (batch <= 0) detail::fail("batch", "{} must be > 0", batch);
  if (width <= 0) detail::fail("width", "{} must be > 0 (at least one beam)", width);
  const auto per_row = beams.size() / static_cast<std::size_t>(batch);
  if (beams.empty() || beams.size() % static_cast<std::size_t>(batch) != 0 ||
      per_row % static_cast<std::size_t>(width) != 0) {
    detail::fail("beams", "{} tokens do not split into {} rows of {} beams of equal length",
                 beams.size(), batch, width);
  }
  out.batch = batch;
  out.width = width;
  out.length = static_cast<std::int32_t>(per_row / static_cast<std::size_t>(width));
  out.total_lengths.clear();
  out.flat_tokens.clear();
  out.flat_indices.clear();
  out.unpacker.clear();
  out.max_selected = 0;
  for (std::int32_t b = 0; b < batch; ++b) {
    try {
      compress_beams(beams.subspan(static_cast<std::size_t>(b) * per_row, per_row), width, vocab,
                     scratch);
    } catch (const Error& e) {
      detail::rethrow_for_sequence(e, b);
    }
    out.total_lengths.push_back(scratch.size());
    out.max_selected = scratch.size() > out.max_selected ? scratch.size() : out.max_selected;
    out.flat_tokens.insert(out.flat_tokens.end(), scratch.tokens.begin(), scratch.tokens.end());
    out.flat_indices.insert(out.flat_indices.end(), scratch.source.begin(), scratch.source.end());
    out.unpacker.insert(out.unpacker.end(), scratch.unpacker.begin(), scratch.unpacker.end());
  }
  const auto padded = static_cast<std::size_t>(batch) * static_cast<std::size_t>(out.max_selected);
  out.packed_tokens.resize(padded);
  out.packed_token_indices.resize(padded);
  out.position_offsets.resize(padded);
  const auto total = out.flat_tokens.size();
  std::size_t start = 0;
  for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
    for (std::size_t m = 0; m < static_cast<std::size_t>(out.max_selected); ++m) {
      const auto from = start + m < total ? start + m : total - 1;
      const auto at = b * static_cast<std::size_t>(out.max_selected) + m;
      out.packed_tokens[at] = out.flat_tokens[from];
      out.packed_token_indices[at] = out.flat_indices[from];
      out.position_offsets[at] = out.flat_indices[from] % out.length;
    }
    start += static_cast<std::size_t>(out.total_lengths[b]);
  }
}

/// Dense mask of the compressed nodes: `out[r * n + c]` = 1 when compressed node c is r or an
/// ancestor of r (so the row of beam j's node at k covers exactly beams[j][0..k]). The committed
/// context is visible to every row and not part of the matrix. `out` holds n * n bytes.
/// Complexity: O(n^2).
inline void compressed_dense_mask(const CompressedBeams& beams, std::span<std::uint8_t> out) {
  detail::check_compressed(beams);
  const auto n = static_cast<std::size_t>(beams.size());
  detail::check_buffer("out", out, detail::checked_mul<std::size_t>("beams", n, n));
  detail::mask_rows_from_parents(beams.parents, beams.size(), beams.size(), out.data());
}

/// Packed form of compressed_dense_mask: n rows of packed_mask_words(n) words, column c is bit
/// c % 32 of word c / 32 (least significant bit first).
/// Complexity: O(n x ceil(n / 32)).
inline void compressed_packed_mask(const CompressedBeams& beams, std::span<std::uint32_t> out) {
  detail::check_compressed(beams);
  const auto n = beams.size();
  const auto words = packed_mask_words(n);
  detail::check_buffer("out", out, static_cast<std::size_t>(n) * static_cast<std::size_t>(words));
  detail::mask_rows_from_parents(beams.parents, n, words, out.data());
}

/// Position ids of the compressed nodes: `out[r] = context_length + offsets[r]`, where
/// `context_length` counts the tokens already in the cache. The beams' first tokens (in ReDrafter
/// the shared init token, which has not been evaluated yet) sit at position context_length; in
/// DraftTree terms a beam token at offset k has depth k + 1. `out` holds n entries.
/// Complexity: O(n).
inline void compressed_positions(const CompressedBeams& beams, std::int32_t context_length,
                                 std::span<std::int32_t> out) {
  detail::check_compressed(beams);
  if (context_length < 0 ||
      static_cast<std::int64_t>(context_length) + beams.length - 1 > INT32_MAX) {
    detail::fail("context_length", "{} must be >= 0 and leave room for {} positions",
                 context_length, beams.length);
  }
  detail::check_buffer("out", out, beams.offsets.size());
  for (std::size_t r = 0; r < out.size(); ++r) out[r] = context_length + beams.offsets[r];
}

/// Maps per-compressed-node values back to the beams: `out[j * L + k] = packed[unpacker[j * L +
/// k]]` (ReDrafter's unpack of logits, hidden states or KV rows, one element per node here).
/// Complexity: O(W x L).
template <class T>
void unpack_beams(const CompressedBeams& beams, std::span<const T> packed, std::span<T> out) {
  detail::check_compressed(beams);
  detail::check_buffer("packed", packed, static_cast<std::size_t>(beams.size()));
  detail::check_buffer("out", out, beams.unpacker.size());
  for (std::size_t x = 0; x < out.size(); ++x) {
    out[x] = packed[static_cast<std::size_t>(beams.unpacker[x])];
  }
}

/// The compressed beams as a DraftTree (level order, so nodes are renumbered; siblings keep beam
/// order). `node_of[r]` receives the tree node of compressed node r. Beam position k becomes depth
/// k + 1, so tree_positions(tree, C) equals compressed_positions(beams, C): the tree's root is the
/// last token already in the cache (position C - 1). `node_of` holds n entries. O(n): the nodes
/// are bucketed by offset (a stable counting sort in per-thread scratch that keeps its capacity,
/// so repeated calls do not allocate).
inline void compressed_to_draft_tree(const CompressedBeams& beams, DraftTree& tree,
                                     std::span<std::int32_t> node_of) {
  detail::check_compressed(beams);
  const auto n = static_cast<std::size_t>(beams.size());
  detail::check_buffer("node_of", node_of, n);
  tree.clear();
  tree.reserve(n);
  thread_local std::vector<std::int32_t> level_end, order;
  // Offsets are below n (a node's offset is its parent's + 1), so min(L, n) levels: never sized
  // by L alone, which need not match any node.
  const auto levels = std::min(static_cast<std::size_t>(beams.length), n);
  level_end.assign(levels + 1, 0);
  for (const auto k : beams.offsets) ++level_end[static_cast<std::size_t>(k) + 1];
  for (std::size_t k = 1; k < level_end.size(); ++k) level_end[k] += level_end[k - 1];
  order.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    order[static_cast<std::size_t>(level_end[static_cast<std::size_t>(beams.offsets[r])]++)] =
        static_cast<std::int32_t>(r);
  }
  for (const auto id : order) {
    const auto r = static_cast<std::size_t>(id);
    const auto parent = beams.parents[r];
    node_of[r] =
        tree.add(beams.tokens[r], parent < 0 ? -1 : node_of[static_cast<std::size_t>(parent)]);
  }
}

}  // namespace specdec
