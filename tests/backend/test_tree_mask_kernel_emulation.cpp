// SPDX-License-Identifier: MIT
// The CUDA tree mask, position and prefix match kernels' source, run on the host through
// emulation/emulated_cuda.hpp (one std::thread per CUDA thread), against the CPU backend, and on
// corrupt device trees, which must end every walk inside the tree.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the kernel header then sees its built-ins.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/backend/cuda/detail/tree_mask_kernels.cuh"
#include "specdec/toy/random.hpp"
#include "tree_cases.hpp"

using namespace specdec;
namespace kernels = specdec::backend::cuda_impl::detail;

namespace {

constexpr unsigned int kThreads = 32;  // fewer threads than nodes: each strides over its tree

std::vector<std::uint32_t> emulated_masks(const std::vector<std::int32_t>& offsets,
                                          const std::vector<std::int32_t>& parents, int words) {
  std::vector<std::uint32_t> masks(parents.size() * static_cast<std::size_t>(words), 0xdeadbeefu);
  for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
    run_emulated_block(kThreads, static_cast<unsigned int>(b), [&] {
      kernels::packed_tree_masks_kernel(offsets.data(), parents.data(), masks.data(), words, words);
    });
  }
  return masks;
}

std::vector<std::int32_t> emulated_positions(const std::vector<std::int32_t>& offsets,
                                             const std::vector<std::int32_t>& parents,
                                             const std::vector<std::int32_t>& contexts) {
  std::vector<std::int32_t> positions(parents.size(), -1);
  const auto batch = static_cast<int>(offsets.size() - 1);
  // One thread per tree: the blocks that cover the batch (kThreads per block).
  for (unsigned int block = 0; block * kThreads < static_cast<unsigned int>(batch); ++block) {
    run_emulated_block(kThreads, block, [&] {
      kernels::tree_positions_kernel(offsets.data(), batch, parents.data(), contexts.data(),
                                     positions.data());
    });
  }
  return positions;
}

}  // namespace

TEST_CASE("the emulated tree mask kernel equals the CPU backend", "[backend][emulation]") {
  const auto f = test::random_forest(9, 4);
  const auto total = static_cast<std::int64_t>(f.parents.size());
  std::vector<std::uint32_t> want(static_cast<std::size_t>(total * 3));
  Workspace ws;
  packed_tree_masks_batch(backend::cpu, f.offsets, f.view(),
                          MatrixView<std::uint32_t>(want.data(), total, 3), ws);
  CHECK(emulated_masks(f.offsets, f.parents, 3) == want);
}

TEST_CASE("the emulated tree position kernel equals the CPU backend", "[backend][emulation]") {
  const auto f = test::random_forest(7, 8);
  std::vector<std::int32_t> contexts;
  for (std::size_t b = 0; b < f.trees.size(); ++b)
    contexts.push_back(1 + static_cast<std::int32_t>(b) * 13);
  std::vector<std::int32_t> want(f.parents.size());
  Workspace ws;
  tree_positions_batch(backend::cpu, f.offsets, f.view(), contexts, want, ws);
  CHECK(emulated_positions(f.offsets, f.parents, contexts) == want);
}

TEST_CASE("the emulated tree kernels end every walk on corrupt parents", "[backend][emulation]") {
  // Parents pointing forward, at the node itself, or below -1: what the host would reject.
  const std::vector<std::int32_t> offsets = {0, 6};
  const std::vector<std::int32_t> parents = {5, -1, 1, 3, -9, 4};
  const auto masks = emulated_masks(offsets, parents, 1);
  // Node 0's parent 5 and node 3's parent 3 end the walk: they count as roots.
  CHECK(masks ==
        std::vector<std::uint32_t>{0b000001, 0b000010, 0b000110, 0b001000, 0b010000, 0b110000});
  CHECK(emulated_positions(offsets, parents, {10}) ==
        std::vector<std::int32_t>{10, 10, 11, 10, 10, 11});
}

TEST_CASE("the emulated prefix match kernel equals the CPU backend", "[backend][emulation]") {
  const std::int64_t rows = 40, stride = 14;  // 40 rows: two blocks, the second partly idle
  const std::int32_t width = 4, length = 3;
  toy::ToyRandom rng(6);
  std::vector<Token> beams(static_cast<std::size_t>(rows * stride), 0);
  for (auto& t : beams) t = static_cast<Token>(rng.uniform() * 2.0f);
  std::vector<std::int32_t> want(beams.size(), -7), got(beams.size(), -7);
  prefix_match_batch(backend::cpu,
                     MatrixView<const Token>(beams.data(), rows, width * length, stride), width, 2,
                     MatrixView<std::int32_t>(want.data(), rows, width * length, stride));
  for (unsigned int block = 0; block < 2; ++block) {
    run_emulated_block(kThreads, block, [&] {
      kernels::prefix_match_kernel(beams.data(), stride, static_cast<int>(rows), width, length,
                                   got.data(), stride);
    });
  }
  CHECK(got == want);
}
