// SPDX-License-Identifier: MIT
// Fuzzes the tree inputs: parent arrays (mostly well-formed, sometimes raw), context lengths near
// the int32 limit, accepted paths, CSR batches and compressed beams, through every tree function.
// Bad input must end in specdec::Error; a result must be consistent with the tree.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "fuzz_input.hpp"
#include "specdec/tree/tree.hpp"

namespace {

using specdec::fuzz::Reader;

template <class F>
void expect_error_or_success(F&& f) {
  try {
    f();
  } catch (const specdec::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace specdec;
  Reader in(data, size);
  const auto mode = in.byte();
  const auto raw = (mode & 1) != 0;  // raw int32 parents instead of well-formed ones
  std::int32_t context = in.int32();
  if ((mode & 2) == 0) context = std::numeric_limits<std::int32_t>::max() - (context & 63);
  const std::int32_t n = in.byte();
  DraftTree tree;
  for (std::int32_t i = 0; i < n && !in.empty(); ++i) {
    tree.tokens.push_back(in.byte() % 8);
    tree.parents.push_back(raw ? in.int32() : static_cast<std::int32_t>(in.byte() % (i + 1)) - 1);
    tree.depths.push_back(0);
  }
  for (std::size_t i = 0; i < tree.parents.size(); ++i) {
    const auto p = tree.parents[i];
    tree.depths[i] = p >= 0 && static_cast<std::size_t>(p) < i
                         ? tree.depths[static_cast<std::size_t>(p)] + 1
                         : 1;
  }
  if (mode & 4) tree.depths.push_back(1);  // inconsistent sizes
  const auto nodes = static_cast<std::size_t>(tree.tokens.size());
  expect_error_or_success([&] { tree.validate(8); });
  expect_error_or_success([&] {
    std::vector<std::int32_t> positions(nodes), engine(nodes + 1);
    tree_positions(tree, context, positions);
    engine_positions(tree, context, engine);
    for (auto p : positions) {
      if (p < context) finding("fuzz_tree:1");
    }
  });
  expect_error_or_success([&] {
    std::vector<std::uint8_t> dense(dense_mask_size(tree));
    build_dense_mask(tree, dense);
    std::vector<std::uint32_t> packed(packed_mask_size(tree));
    build_packed_mask(tree, packed);
  });
  expect_error_or_success([&] {
    const auto paths = root_to_leaf_paths(tree);
    const auto rows = count_leaves(tree);
    const auto width = tree.max_depth();
    std::vector<std::int32_t> flat(static_cast<std::size_t>(rows) * width);
    root_to_leaf_paths(tree, rows, width, flat);
    if (static_cast<std::int32_t>(paths.size()) != rows) finding("fuzz_tree:2");
  });
  expect_error_or_success([&] {
    const bool include_root = mode & 8;
    const auto small_context = (context & 255) + 1;
    std::vector<std::uint8_t> mask(flashinfer::mask_bytes(tree, small_context, include_root));
    flashinfer::export_mask(tree, small_context, include_root, mask);
    tree.validate(8);  // the size helpers below assume a valid tree
    const auto rows = trtllm::path_rows(tree), width = trtllm::path_width(tree);
    std::vector<std::int32_t> trt_mask(trtllm::mask_size(tree)), offsets(nodes + 1),
        trt_paths(static_cast<std::size_t>(rows) * static_cast<std::size_t>(width));
    trtllm::export_tree(tree, trt_mask, offsets, rows, width, trt_paths);
  });
  expect_error_or_success([&] {
    std::vector<std::int64_t> index(nodes + 1), next(nodes + 1), sibling(nodes + 1);
    sglang::export_tree(tree, static_cast<std::int64_t>(context) << (mode >> 4), index, next,
                        sibling);
  });
  expect_error_or_success([&] {
    std::vector<std::int32_t> accepted;
    for (auto k = in.byte() % 8; k > 0; --k) accepted.push_back(in.byte() % (n + 2) - 1);
    std::vector<std::int32_t> source(accepted.size()), destination(accepted.size());
    kv_compaction(tree, context, accepted, source, destination);
    for (std::size_t t = 0; t < accepted.size(); ++t) {
      if (destination[t] > source[t]) finding("fuzz_tree:3");
    }
    const std::vector<DraftTree> trees = {tree, tree};
    const std::vector<std::int32_t> contexts = {1, context};
    const std::vector<std::span<const std::int32_t>> paths = {accepted, accepted};
    AcceptedPaths packed;
    pack_accepted_paths(trees, contexts, paths, packed);
  });
  expect_error_or_success([&] {
    const std::int32_t width = in.byte() % 8;
    std::vector<Token> beams;
    for (auto k = in.byte() % 64; k > 0; --k) beams.push_back(in.byte() % 4);
    CompressedBeams compressed;
    compress_beams(beams, width, 4, compressed);
    DraftTree from_beams;
    std::vector<std::int32_t> node_of(static_cast<std::size_t>(compressed.size()));
    compressed_to_draft_tree(compressed, from_beams, node_of);
    from_beams.validate(4);
    std::vector<std::int32_t> positions(node_of.size());
    compressed_positions(compressed, context, positions);
  });
  return 0;
}
