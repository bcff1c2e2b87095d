// SPDX-License-Identifier: MIT
// Tree cases (random trees of depth 8): dense and packed ancestor masks, the TensorRT-LLM export,
// ReDrafter prefix match and beam compression, and the CPU backend's batched masks. These scale
// with the tree, not the vocabulary: they report ns per node (and per mask word), not a ratio to
// the memory-read reference.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/tree/tree.hpp"

namespace {

using specdec::DraftTree;

// A random level-ordered tree of n nodes and depth 8 (the depth of typical draft trees): the
// levels hold n / 8 nodes each (the first ones one more when 8 does not divide n), every node
// under a random node of the level above.
DraftTree bench_tree(std::int32_t n) {
  specdec::toy::ToyRandom rng(static_cast<std::uint64_t>(n));
  constexpr std::int32_t kDepth = 8;
  DraftTree tree;
  std::int32_t prev_begin = -1, prev_end = -1;
  for (std::int32_t level = 0; level < kDepth; ++level) {
    const std::int32_t count = n / kDepth + (level < n % kDepth ? 1 : 0);
    const std::int32_t begin = tree.size();
    for (std::int32_t c = 0; c < count; ++c) {
      const std::int32_t parent =
          prev_begin < 0 ? -1 : prev_begin + rng.below(prev_end - prev_begin);
      tree.add(rng.below(32000), parent);
    }
    prev_begin = begin;
    prev_end = tree.size();
  }
  return tree;
}

void set_node_counters(benchmark::State& state, double nodes, double words = 0.0) {
  state.counters["nodes"] = nodes;
  state.counters["ns_per_node"] = benchmark::Counter(
      nodes * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  if (words > 0.0) {
    state.counters["ns_per_word"] = benchmark::Counter(
        words * 1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  }
}

void tree_sizes(benchmark::internal::Benchmark* b) {
  for (int n : {16, 64, 256}) b->Arg(n);
}

}  // namespace

static void BM_TreeDenseMask(benchmark::State& state) {
  const auto tree = bench_tree(static_cast<std::int32_t>(state.range(0)));
  std::vector<std::uint8_t> mask(specdec::dense_mask_size(tree));
  for (auto _ : state) {
    specdec::build_dense_mask(tree, mask);
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, static_cast<double>(tree.size()));
}
BENCHMARK(BM_TreeDenseMask)->Apply(tree_sizes);

static void BM_TreePackedMask(benchmark::State& state) {
  const auto tree = bench_tree(static_cast<std::int32_t>(state.range(0)));
  std::vector<std::uint32_t> mask(specdec::packed_mask_size(tree));
  for (auto _ : state) {
    specdec::build_packed_mask(tree, mask);
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, static_cast<double>(tree.size()), static_cast<double>(mask.size()));
}
BENCHMARK(BM_TreePackedMask)->Apply(tree_sizes);

// The device-style path: every row built independently by the row function (ancestor walk).
static void BM_TreePackedMaskRowKernel(benchmark::State& state) {
  const auto tree = bench_tree(static_cast<std::int32_t>(state.range(0)));
  const auto words = specdec::packed_mask_words(tree.size());
  std::vector<std::uint32_t> mask(specdec::packed_mask_size(tree));
  for (auto _ : state) {
    for (std::int32_t i = 0; i < tree.size(); ++i) {
      specdec::detail::packed_mask_row(tree.parents.data(), words, i,
                                       mask.data() + static_cast<std::size_t>(i) * words);
    }
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, static_cast<double>(tree.size()), static_cast<double>(mask.size()));
}
BENCHMARK(BM_TreePackedMaskRowKernel)->Apply(tree_sizes);

static void BM_TreeExportTrtllm(benchmark::State& state) {
  const auto tree = bench_tree(static_cast<std::int32_t>(state.range(0)));
  std::vector<std::int32_t> mask(specdec::trtllm_mask_size(tree));
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(tree.size() + 1));
  const auto rows = specdec::trtllm_path_rows(tree), width = specdec::trtllm_path_width(tree);
  std::vector<std::int32_t> paths(static_cast<std::size_t>(rows * width));
  for (auto _ : state) {
    specdec::export_trtllm(tree, mask, offsets, rows, width, paths);
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, static_cast<double>(tree.size()), static_cast<double>(mask.size()));
}
BENCHMARK(BM_TreeExportTrtllm)->Apply(tree_sizes);

namespace {

// W beams of L tokens over a 4-token alphabet after a shared first token, so prefixes are shared.
std::vector<specdec::Token> bench_beams(std::int32_t width, std::int32_t length) {
  specdec::toy::ToyRandom rng(42);
  std::vector<specdec::Token> beams(static_cast<std::size_t>(width * length));
  for (std::int32_t j = 0; j < width; ++j) {
    for (std::int32_t k = 0; k < length; ++k) {
      beams[static_cast<std::size_t>(j * length + k)] = k == 0 ? 7 : rng.below(4);
    }
  }
  return beams;
}

}  // namespace

static void BM_TreePrefixMatch(benchmark::State& state) {
  const auto width = static_cast<std::int32_t>(state.range(0));
  const auto length = static_cast<std::int32_t>(state.range(1));
  const auto beams = bench_beams(width, length);
  std::vector<std::int32_t> match(beams.size());
  for (auto _ : state) {
    specdec::prefix_match(beams, width, 32000, match);
    benchmark::DoNotOptimize(match.data());
  }
  set_node_counters(state, static_cast<double>(beams.size()));
}
BENCHMARK(BM_TreePrefixMatch)->Args({16, 8});

static void BM_TreeCompressBeams(benchmark::State& state) {
  const auto width = static_cast<std::int32_t>(state.range(0));
  const auto length = static_cast<std::int32_t>(state.range(1));
  const auto beams = bench_beams(width, length);
  specdec::CompressedBeams packed;
  specdec::compress_beams(beams, width, 32000, packed);  // warm-up: vectors reach their size
  for (auto _ : state) {
    specdec::compress_beams(beams, width, 32000, packed);
    benchmark::DoNotOptimize(packed.tokens.data());
  }
  state.counters["compressed"] = static_cast<double>(packed.size());
  set_node_counters(state, static_cast<double>(beams.size()));
}
BENCHMARK(BM_TreeCompressBeams)->Args({16, 8});

// Packed masks of B trees of n nodes in one batched call on the CPU backend (validation of every
// parent included), 1 thread against 2.
static void BM_TreeMasksBatchCpu(benchmark::State& state) {
  const auto batch = state.range(0);
  const auto n = static_cast<std::int32_t>(state.range(1));
  const auto cpu = specdec::backend::cpu.with_threads(static_cast<int>(state.range(2)));
  const auto tree = bench_tree(n);
  std::vector<std::int32_t> offsets{0}, parents;
  for (std::int64_t b = 0; b < batch; ++b) {
    parents.insert(parents.end(), tree.parents.begin(), tree.parents.end());
    offsets.push_back(offsets.back() + n);
  }
  const auto words = specdec::packed_mask_words(n);
  const auto rows = static_cast<std::int64_t>(parents.size());
  std::vector<std::uint32_t> masks(static_cast<std::size_t>(rows * words));
  specdec::Workspace ws;
  for (auto _ : state) {
    specdec::packed_tree_masks_batch(
        cpu, offsets, parents, specdec::MatrixView<std::uint32_t>(masks.data(), rows, words), ws);
    benchmark::DoNotOptimize(masks.data());
  }
  set_node_counters(state, static_cast<double>(rows), static_cast<double>(masks.size()));
  state.counters["threads"] = static_cast<double>(state.range(2));
}
BENCHMARK(BM_TreeMasksBatchCpu)
    ->ArgNames({"B", "n", "threads"})
    ->ArgsProduct({{16, 64}, {64, 256}, {1, 2}})
    ->UseRealTime();
