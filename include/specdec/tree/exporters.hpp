// SPDX-License-Identifier: MIT
// Exporters from a draft tree (a TreeView; a DraftTree converts to one) to the tree layouts engines consume: TensorRT-LLM (packed int32 mask
// rows, position offsets, paths), FlashInfer (bit-packed custom mask with indptr) and SGLang
// (first-child / next-sibling lists). No limit on the tree size.
#pragma once

#include <cstdint>
#include <span>

#include "specdec/core/error.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/tree_mask.hpp"
#include "specdec/tree/tree_paths.hpp"

// Engine layouts put the root (the last committed token) in slot 0 of the evaluated tokens, ahead
// of the N drafted nodes: slot t = 0 is the root and slot t = i + 1 is node i, T = N + 1 slots.

namespace specdec {

/// Slots of an engine layout: the root plus the N nodes.
inline std::int32_t engine_tree_size(TreeView tree) { return tree.size() + 1; }

/// Position ids of the T = N + 1 engine slots: the root at `context_length - 1`, node i at
/// `context_length + depth(i) - 1` (tree_positions' ids). `out` holds N + 1 entries.
/// Complexity: O(N).
inline void engine_positions(TreeView tree, std::int32_t context_length,
                             std::span<std::int32_t> out) {
  detail::check_tree(tree);
  detail::check_buffer("out", out, static_cast<std::size_t>(engine_tree_size(tree)));
  tree_positions(tree, context_length, out.subspan(1));
  out[0] = context_length - 1;
}

/// The same position ids of a DraftTree, after checking its depths too.
inline void engine_positions(const DraftTree& tree, std::int32_t context_length,
                             std::span<std::int32_t> out) {
  detail::check_tree(tree);
  engine_positions(tree.view(), context_length, out);
}

// ---------------------------------------------------------------------------------------------
// TensorRT-LLM

namespace trtllm {

/// int32 words per packed mask row of the TensorRT-LLM layout: ceil((N + 1) / 32).
inline std::int32_t mask_words(TreeView tree) { return packed_mask_words(engine_tree_size(tree)); }
/// Entries of the TensorRT-LLM packed mask: (N + 1) * trtllm::mask_words(tree).
inline std::size_t mask_size(TreeView tree) {
  return static_cast<std::size_t>(engine_tree_size(tree)) *
         static_cast<std::size_t>(trtllm::mask_words(tree));
}
/// Shortest row of the paths matrix: the root plus the deepest level, max_depth + 1. O(N): the
/// depths come from the parents.
inline std::int32_t path_width(TreeView tree) {
  detail::check_tree(tree);
  return detail::max_depth(tree) + 1;
}
/// Fewest rows of the paths matrix: one per leaf (1 for an empty tree, whose only path is the
/// root).
inline std::int32_t path_rows(TreeView tree) {
  const auto leaves = count_leaves(tree);
  return leaves > 0 ? leaves : 1;
}

/// TensorRT-LLM's tree layout (specDecodingPackedMasks, specDecodingPositionOffsets, paths) for
/// one sequence, over the T = N + 1 slots (slot 0 = the root):
/// - `packed_mask`: T rows of trtllm::mask_words(tree) int32 words; slot s is visible to row t when
///   bit (s % 32) of word s / 32 is set (least significant bit first, so bit 0 of word 0 is the
///   root, set in every row). Bits past slot T - 1 are 0.
/// - `position_offsets`: T entries, the depth (0 for the root, depth(i) for slot i + 1); the
///   engine adds its base position (the root's position, context_length - 1).
/// - `paths`: `path_rows` x `path_width` slot indices, row r the root-to-leaf path of the r-th leaf
///   (as leaves() orders them) starting with 0 (the root), padded with -1; rows past the last leaf
///   are all -1. Needs path_rows >= trtllm::path_rows(tree), path_width >=
///   trtllm::path_width(tree).
/// Complexity: O(N x ceil((N + 1) / 32) + path_rows x path_width): a mask row is its parent's row
/// plus one bit, and a leaf's depth is counted along the path written for it.
inline void export_tree(TreeView tree, std::span<std::int32_t> packed_mask,
                        std::span<std::int32_t> position_offsets, std::int32_t path_rows,
                        std::int32_t path_width, std::span<std::int32_t> paths) {
  detail::check_tree(tree);
  const auto slots = static_cast<std::size_t>(engine_tree_size(tree));
  const auto words = static_cast<std::size_t>(trtllm::mask_words(tree));
  detail::check_buffer("packed_mask", packed_mask, trtllm::mask_size(tree));
  detail::check_buffer("position_offsets", position_offsets, slots);
  // position_offsets doubles as the leaf flags of the slots before it receives the depths, so the
  // export does not allocate.
  detail::leaf_flags_row(tree.parents.data(), tree.size(), position_offsets.data() + 1);
  // The deepest node is a leaf, so the leaves' depths give the widest path.
  std::int32_t leaf_count = 0;
  std::int32_t deepest = 0;
  for (std::int32_t i = 0; i < tree.size(); ++i) {
    if (!position_offsets[static_cast<std::size_t>(i) + 1]) continue;
    ++leaf_count;
    const auto depth = detail::node_depth(tree, i);
    deepest = depth > deepest ? depth : deepest;
  }
  const std::int32_t needed_rows = leaf_count > 0 ? leaf_count : 1;
  if (path_rows < needed_rows) {
    detail::fail("path_rows", "{} is fewer than the {} root-to-leaf paths", path_rows, needed_rows);
  }
  if (path_width < deepest + 1) {
    detail::fail("path_width", "{} is shorter than the longest path ({} slots with the root)",
                 path_width, deepest + 1);
  }
  detail::check_buffer("paths", paths,
                       static_cast<std::size_t>(path_rows) * static_cast<std::size_t>(path_width));

  // Mask: the row of slot i + 1 is the row of its parent's slot plus bit i + 1 (Alg. 5 on slots);
  // int32 and uint32 words may alias, so the unsigned row function writes the int32 rows.
  auto* mask_words = reinterpret_cast<std::uint32_t*>(packed_mask.data());
  for (std::size_t t = 0; t < slots; ++t) {
    const std::uint32_t* parent_row =
        t == 0 ? nullptr : mask_words + static_cast<std::size_t>(tree.parents[t - 1] + 1) * words;
    detail::packed_mask_row_from_parent(parent_row, static_cast<std::int32_t>(t),
                                        mask_words + t * words, static_cast<std::int32_t>(words));
  }

  for (auto& x : paths) x = -1;
  std::size_t r = 0;
  for (std::int32_t i = 0; i < tree.size(); ++i) {
    if (!position_offsets[static_cast<std::size_t>(i) + 1]) continue;
    std::int32_t* out = paths.data() + r * static_cast<std::size_t>(path_width);
    const auto depth = detail::node_depth(tree, i);
    out[0] = 0;
    detail::path_to_node_row(tree.parents.data(), i, depth, out + 1);
    for (std::int32_t k = 1; k <= depth; ++k) out[k] += 1;  // node id -> slot
    ++r;
  }
  if (tree.empty()) paths[0] = 0;  // the root alone

  position_offsets[0] = 0;
  detail::tree_depths_row(tree.parents.data(), tree.size(), position_offsets.data() + 1);
}

/// The same layout of a DraftTree, after checking its depths too.
inline void export_tree(const DraftTree& tree, std::span<std::int32_t> packed_mask,
                        std::span<std::int32_t> position_offsets, std::int32_t path_rows,
                        std::int32_t path_width, std::span<std::int32_t> paths) {
  detail::check_tree(tree);
  trtllm::export_tree(tree.view(), packed_mask, position_offsets, path_rows, path_width, paths);
}

}  // namespace trtllm

// ---------------------------------------------------------------------------------------------
// FlashInfer

namespace detail {

/// Throws specdec::Error naming `name` unless `context_length` >= 1: the root is a committed
/// token, and a smaller context would make a mask size negative.
inline void check_flashinfer_context(const ArgName& name, std::int32_t context_length) {
  if (context_length < 1) {
    fail(name, "{} must be >= 1 (the root is a committed token)", context_length);
  }
}

}  // namespace detail

namespace flashinfer {

/// Bits of one sequence's FlashInfer custom mask: qo_len * kv_len with qo_len = N + include_root
/// and kv_len = context_length + N. Throws specdec::Error naming `context_length` when it is
/// below 1.
inline std::int64_t mask_bits(TreeView tree, std::int32_t context_length, bool include_root) {
  detail::check_flashinfer_context("context_length", context_length);
  // At most 2^31 x (2^32 - 2) < 2^63: the product fits.
  return static_cast<std::int64_t>(tree.size() + (include_root ? 1 : 0)) *
         (static_cast<std::int64_t>(context_length) + tree.size());
}
/// Bytes of one sequence's packed FlashInfer mask: ceil(bits / 8). Throws as
/// flashinfer::mask_bits.
inline std::size_t mask_bytes(TreeView tree, std::int32_t context_length, bool include_root) {
  return static_cast<std::size_t>((flashinfer::mask_bits(tree, context_length, include_root) + 7) /
                                  8);
}

/// FlashInfer's custom mask for one sequence, bit-packed as `segment_packbits(...,
/// bitorder="little")` produces it: the boolean matrix [qo_len, kv_len] is flattened row-major and
/// element e is bit (e % 8) of byte e / 8 (least significant bit first); rows are not byte-aligned,
/// and the unused high bits of the last byte are 0.
/// Keys (kv_len = context_length + N): the committed context in columns [0, context_length) (the
/// root, the last committed token, is column context_length - 1), then node i in column
/// context_length + i. Queries: with `include_root` (the engine evaluates the root together with
/// the tree, as SGLang does) row 0 is the root, which sees columns [0, context_length), and row
/// i + 1 is node i; without it (the root is already in the cache) row i is node i. Node i sees the
/// whole context plus itself and its ancestors. `out` holds flashinfer::mask_bytes(...) bytes.
/// O(N x (C + N) / 8): a row is its context bytes plus its parent's row copied eight bits at a
/// time (a 100k-node chain no longer walks 5 x 10^9 ancestors one bit each).
inline void export_mask(TreeView tree, std::int32_t context_length, bool include_root,
                        std::span<std::uint8_t> out) {
  detail::check_tree(tree);
  if (context_length < 1) {
    detail::fail("context_length", "{} must be >= 1 (the root is a committed token)",
                 context_length);
  }
  detail::check_buffer("out", out, flashinfer::mask_bytes(tree, context_length, include_root));
  for (auto& b : out) b = 0;
  const auto kv_len = static_cast<std::int64_t>(context_length) + tree.size();
  auto set = [&](std::int64_t row, std::int64_t col) {
    const std::int64_t e = row * kv_len + col;
    out[static_cast<std::size_t>(e / 8)] |= static_cast<std::uint8_t>(1u << (e % 8));
  };
  // Sets the bits of columns [0, context_length) of `row`: single bits up to a byte boundary, then
  // whole bytes, then single bits.
  auto set_context = [&](std::int64_t row) {
    std::int64_t e = row * kv_len;
    const std::int64_t end = e + context_length;
    for (; e < end && e % 8 != 0; ++e) {
      out[static_cast<std::size_t>(e / 8)] |= static_cast<std::uint8_t>(1u << (e % 8));
    }
    for (; e + 8 <= end; e += 8) out[static_cast<std::size_t>(e / 8)] = 0xFF;
    for (; e < end; ++e) {
      out[static_cast<std::size_t>(e / 8)] |= static_cast<std::uint8_t>(1u << (e % 8));
    }
  };
  // ORs `count` bits starting at bit `from` into the (still zero) bits starting at `to`, eight at
  // a time; the source bits lie in an earlier row.
  auto copy_bits = [&](std::int64_t from, std::int64_t to, std::int64_t count) {
    for (std::int64_t k = 0; k < count; k += 8) {
      const auto byte = static_cast<std::size_t>((from + k) / 8);
      const auto shift = static_cast<unsigned>((from + k) % 8);
      unsigned bits = out[byte] >> shift;
      if (shift != 0 && byte + 1 < out.size())
        bits |= static_cast<unsigned>(out[byte + 1]) << (8 - shift);
      const auto take = count - k < 8 ? count - k : 8;
      bits &= (1u << take) - 1u;
      const auto target = static_cast<std::size_t>((to + k) / 8);
      const auto offset = static_cast<unsigned>((to + k) % 8);
      out[target] |= static_cast<std::uint8_t>(bits << offset);
      if (offset != 0 && (bits >> (8 - offset)) != 0) {
        out[target + 1] |= static_cast<std::uint8_t>(bits >> (8 - offset));
      }
    }
  };
  const std::int64_t first_node_row = include_root ? 1 : 0;
  if (include_root) set_context(0);
  for (std::int32_t i = 0; i < tree.size(); ++i) {
    const std::int64_t row = first_node_row + i;
    set_context(row);
    // A node's tree columns are its parent's (all at or before the parent's own) plus itself.
    const auto parent = tree.parents[static_cast<std::size_t>(i)];
    if (parent >= 0) {
      copy_bits((first_node_row + parent) * kv_len + context_length, row * kv_len + context_length,
                parent + 1);
    }
    set(row, context_length + i);
  }
}

/// The same mask of a DraftTree, after checking its depths too.
inline void export_mask(const DraftTree& tree, std::int32_t context_length, bool include_root,
                        std::span<std::uint8_t> out) {
  detail::check_tree(tree);
  flashinfer::export_mask(tree.view(), context_length, include_root, out);
}

}  // namespace flashinfer

namespace detail {

/// flashinfer::batch_mask_bytes over B trees, tree b given by `tree_at(b)` (a DraftTree or a
/// TreeView): the list and the CSR forms share it.
template <class TreeAt>
std::size_t flashinfer_batch_bytes(std::size_t batch, TreeAt tree_at,
                                   std::span<const std::int32_t> context_lengths,
                                   bool include_root) {
  check_size("context_lengths", context_lengths.size(), batch);
  std::size_t total = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    check_flashinfer_context(ArgName("context_lengths", static_cast<std::int64_t>(b)),
                             context_lengths[b]);
    total = checked_add<std::size_t>(
        "trees", total, flashinfer::mask_bytes(tree_at(b), context_lengths[b], include_root));
  }
  return total;
}

/// flashinfer::export_masks over B trees given by `tree_at(b)`, each checked as the one-tree call
/// checks it (a DraftTree's depths included), its errors named by rethrow_for_sequence.
template <class TreeAt>
void export_flashinfer_batch(std::size_t batch, TreeAt tree_at,
                             std::span<const std::int32_t> context_lengths, bool include_root,
                             std::span<std::uint8_t> out, std::span<std::int32_t> mask_indptr) {
  check_size("context_lengths", context_lengths.size(), batch);
  check_buffer("mask_indptr", mask_indptr, batch + 1);
  for (std::size_t b = 0; b < batch; ++b) {
    try {
      check_tree(tree_at(b));
    } catch (const Error& e) {
      rethrow_for_sequence(e, static_cast<std::int64_t>(b));
    }
    if (context_lengths[b] < 1) {
      fail(ArgName("context_lengths", static_cast<std::int64_t>(b)), "{} must be >= 1",
           context_lengths[b]);
    }
  }
  const auto total = flashinfer_batch_bytes(batch, tree_at, context_lengths, include_root);
  check_buffer("out", out, total);
  if (total > static_cast<std::size_t>(INT32_MAX)) {
    fail("mask_indptr", "int32 offsets cannot reach the {} bytes of the masks", total);
  }
  std::size_t offset = 0;
  mask_indptr[0] = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    const auto bytes = flashinfer::mask_bytes(tree_at(b), context_lengths[b], include_root);
    flashinfer::export_mask(tree_at(b), context_lengths[b], include_root,
                            out.subspan(offset, bytes));
    offset += bytes;
    mask_indptr[b + 1] = static_cast<std::int32_t>(offset);
  }
}
}  // namespace detail

namespace flashinfer {

/// Bytes of a batch's packed masks: the sum of flashinfer::mask_bytes over the sequences. Throws
/// specdec::Error naming `context_lengths[b]` when one is below 1, or `trees` when the sum
/// overflows.
inline std::size_t batch_mask_bytes(std::span<const DraftTree> trees,
                                    std::span<const std::int32_t> context_lengths,
                                    bool include_root) {
  return detail::flashinfer_batch_bytes(
      trees.size(), [trees](std::size_t b) -> const DraftTree& { return trees[b]; },
      context_lengths, include_root);
}

/// The same bytes of B trees given as one TreeView cut by CSR `node_offsets` (B + 1 entries from
/// 0; tree b is nodes [node_offsets[b], node_offsets[b + 1]), parents local to it).
inline std::size_t batch_mask_bytes(std::span<const std::int32_t> node_offsets, TreeView trees,
                                    std::span<const std::int32_t> context_lengths,
                                    bool include_root) {
  detail::check_tree_batch(node_offsets, trees);
  return detail::flashinfer_batch_bytes(
      node_offsets.size() - 1,
      [node_offsets, trees](std::size_t b) { return detail::tree_of_batch(node_offsets, trees, b); },
      context_lengths, include_root);
}

/// A batch of FlashInfer masks: sequence b's packed mask (as flashinfer::export_mask writes it)
/// occupies bytes [mask_indptr[b], mask_indptr[b + 1]) of `out` (each segment is packed on its
/// own, like segment_packbits). `mask_indptr` holds B + 1 entries; `out` holds
/// flashinfer::batch_mask_bytes(...) bytes. An error of tree b names it first: `depths[1][4]`.
/// Complexity: O(the sum of the sequences' flashinfer::export_mask costs).
inline void export_masks(std::span<const DraftTree> trees,
                         std::span<const std::int32_t> context_lengths, bool include_root,
                         std::span<std::uint8_t> out, std::span<std::int32_t> mask_indptr) {
  detail::export_flashinfer_batch(
      trees.size(), [trees](std::size_t b) -> const DraftTree& { return trees[b]; },
      context_lengths, include_root, out, mask_indptr);
}

/// The same masks of B trees given as one TreeView cut by CSR `node_offsets` (as
/// flashinfer::batch_mask_bytes takes them).
inline void export_masks(std::span<const std::int32_t> node_offsets, TreeView trees,
                         std::span<const std::int32_t> context_lengths, bool include_root,
                         std::span<std::uint8_t> out, std::span<std::int32_t> mask_indptr) {
  detail::check_tree_batch(node_offsets, trees);
  detail::export_flashinfer_batch(
      node_offsets.size() - 1,
      [node_offsets, trees](std::size_t b) { return detail::tree_of_batch(node_offsets, trees, b); },
      context_lengths, include_root, out, mask_indptr);
}

}  // namespace flashinfer

// ---------------------------------------------------------------------------------------------
// SGLang

namespace sglang {

/// SGLang's retrieve arrays over the T = N + 1 slots (slot 0 = the root, slot i + 1 = node i), as
/// `build_tree_kernel_efficient` fills them for one sequence:
/// - `retrieve_index[t] = index_base + t` (the slot's index in the flattened batch; pass
///   index_base = b * T for row b of a batch with a common T);
/// - `retrieve_next_token[t]`: the slot of t's first child in sampling order, -1 for a leaf;
/// - `retrieve_next_sibling[t]`: the slot of t's next sibling, -1 for the last child and the root.
/// All three hold N + 1 entries; unlike SGLang's bit-packed mode there is no 32-node limit.
/// Complexity: O(N).
inline void export_tree(TreeView tree, std::int64_t index_base,
                        std::span<std::int64_t> retrieve_index,
                        std::span<std::int64_t> retrieve_next_token,
                        std::span<std::int64_t> retrieve_next_sibling) {
  detail::check_tree(tree);
  if (index_base < 0) detail::fail("index_base", "{} must be >= 0", index_base);
  const auto slots = static_cast<std::size_t>(engine_tree_size(tree));
  (void)detail::checked_add<std::int64_t>("index_base", index_base, tree.size());  // last index
  detail::check_buffer("retrieve_index", retrieve_index, slots);
  detail::check_buffer("retrieve_next_token", retrieve_next_token, slots);
  detail::check_buffer("retrieve_next_sibling", retrieve_next_sibling, slots);
  for (std::size_t t = 0; t < slots; ++t) {
    retrieve_index[t] = index_base + static_cast<std::int64_t>(t);
    retrieve_next_token[t] = -1;
    retrieve_next_sibling[t] = -1;
  }
  // Backwards with head insertion: every list comes out in increasing slot (sampling) order.
  for (std::int32_t i = tree.size() - 1; i >= 0; --i) {
    const auto slot = static_cast<std::size_t>(i) + 1;
    const auto parent_slot =
        static_cast<std::size_t>(tree.parents[static_cast<std::size_t>(i)] + 1);
    retrieve_next_sibling[slot] = retrieve_next_token[parent_slot];
    retrieve_next_token[parent_slot] = static_cast<std::int64_t>(slot);
  }
}

/// The same arrays of a DraftTree, after checking its depths too.
inline void export_tree(const DraftTree& tree, std::int64_t index_base,
                        std::span<std::int64_t> retrieve_index,
                        std::span<std::int64_t> retrieve_next_token,
                        std::span<std::int64_t> retrieve_next_sibling) {
  detail::check_tree(tree);
  sglang::export_tree(tree.view(), index_base, retrieve_index, retrieve_next_token,
                      retrieve_next_sibling);
}

}  // namespace sglang

}  // namespace specdec
