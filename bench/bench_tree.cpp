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

namespace {

/// Builds the mask of a bench_tree of state.range(0) nodes each iteration: size(tree) words of
/// type Word, written by build(tree, mask); `per_word` adds the ns_per_word counter.
template <class Word, class Build>
void time_mask(benchmark::State& state, std::size_t (*size)(specdec::TreeView), bool per_word,
               Build build) {
  const auto tree = bench_tree(static_cast<std::int32_t>(state.range(0)));
  std::vector<Word> mask(size(tree));
  for (auto _ : state) {
    build(tree, std::span<Word>(mask));
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, static_cast<double>(tree.size()),
                    per_word ? static_cast<double>(mask.size()) : 0.0);
}

}  // namespace

static void BM_TreeDenseMask(benchmark::State& state) {
  time_mask<std::uint8_t>(state, specdec::dense_mask_size, false, [](const DraftTree& t, auto m) {
    specdec::build_dense_mask(t, m);
  });
}
BENCHMARK(BM_TreeDenseMask)->Apply(tree_sizes);

static void BM_TreePackedMask(benchmark::State& state) {
  time_mask<std::uint32_t>(state, specdec::packed_mask_size, true, [](const DraftTree& t, auto m) {
    specdec::build_packed_mask(t, m);
  });
}
BENCHMARK(BM_TreePackedMask)->Apply(tree_sizes);

// The device-style path: every row built independently by the row function (ancestor walk).
static void BM_TreePackedMaskRowKernel(benchmark::State& state) {
  time_mask<std::uint32_t>(state, specdec::packed_mask_size, true, [](const DraftTree& t, auto m) {
    const auto words = specdec::packed_mask_words(t.size());
    for (std::int32_t i = 0; i < t.size(); ++i) {
      specdec::detail::packed_mask_row(t.parents.data(), words, i,
                                       m.data() + static_cast<std::size_t>(i) * words);
    }
  });
}
BENCHMARK(BM_TreePackedMaskRowKernel)->Apply(tree_sizes);

static void BM_TreeExportTrtllm(benchmark::State& state) {
  const auto tree = bench_tree(static_cast<std::int32_t>(state.range(0)));
  std::vector<std::int32_t> mask(specdec::trtllm::mask_size(tree));
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(tree.size() + 1));
  const auto rows = specdec::trtllm::path_rows(tree), width = specdec::trtllm::path_width(tree);
  std::vector<std::int32_t> paths(static_cast<std::size_t>(rows * width));
  for (auto _ : state) {
    specdec::trtllm::export_tree(tree, mask, offsets, rows, width, paths);
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
  std::vector<specdec::Token> tokens;
  for (std::int64_t b = 0; b < batch; ++b) {
    tokens.insert(tokens.end(), tree.tokens.begin(), tree.tokens.end());
    parents.insert(parents.end(), tree.parents.begin(), tree.parents.end());
    offsets.push_back(offsets.back() + n);
  }
  const auto words = specdec::packed_mask_words(n);
  const auto rows = static_cast<std::int64_t>(parents.size());
  std::vector<std::uint32_t> masks(static_cast<std::size_t>(rows * words));
  specdec::Workspace ws;
  for (auto _ : state) {
    specdec::packed_tree_masks_batch(
        cpu, offsets, specdec::TreeView{tokens, parents},
        specdec::MatrixView<std::uint32_t>(masks.data(), rows, words), ws);
    benchmark::DoNotOptimize(masks.data());
  }
  set_node_counters(state, static_cast<double>(rows), static_cast<double>(masks.size()));
  state.counters["threads"] = static_cast<double>(state.range(2));
}
BENCHMARK(BM_TreeMasksBatchCpu)
    ->ArgNames({"B", "n", "threads"})
    ->ArgsProduct({{16, 64}, {64, 256}, {1, 2}})
    ->UseRealTime();

// ---------------------------------------------------------------------------------------------
// Large trees: 10k and 100k nodes (a depth-8 random tree, a chain, a star), every tree function.
// Functions whose output is N x N bits or more (dense, packed, TensorRT-LLM and FlashInfer masks)
// run at 10k only: at 100k their output alone is 1.25 GB to 10 GB.

namespace {

enum class Shape { kRandom, kChain, kStar };

DraftTree large_tree(std::int32_t n, Shape shape) {
  if (shape == Shape::kRandom) return bench_tree(n);
  DraftTree tree;
  tree.reserve(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) tree.add(i % 32000, shape == Shape::kChain ? i - 1 : -1);
  return tree;
}

void large_sizes(benchmark::internal::Benchmark* b) {
  for (int shape : {0, 1, 2}) {
    for (int n : {10000, 100000}) b->Args({n, shape});
  }
  b->Unit(benchmark::kMicrosecond);
}

void large_sizes_10k(benchmark::internal::Benchmark* b) {
  for (int shape : {0, 1, 2}) b->Args({10000, shape});
  b->Unit(benchmark::kMicrosecond);
}

DraftTree state_tree(const benchmark::State& state) {
  return large_tree(static_cast<std::int32_t>(state.range(0)), static_cast<Shape>(state.range(1)));
}

}  // namespace

static void BM_LargeTreeValidate(benchmark::State& state) {
  const auto tree = state_tree(state);
  for (auto _ : state) tree.validate(32000);
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreeValidate)->Apply(large_sizes);

static void BM_LargeTreePositions(benchmark::State& state) {
  const auto tree = state_tree(state);
  std::vector<std::int32_t> positions(static_cast<std::size_t>(tree.size())),
      engine(static_cast<std::size_t>(tree.size()) + 1);
  for (auto _ : state) {
    specdec::tree_positions(tree, 100, positions);
    specdec::engine_positions(tree, 100, engine);
    benchmark::DoNotOptimize(engine.data());
  }
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreePositions)->Apply(large_sizes);

static void BM_LargeTreeLeavesAndPaths(benchmark::State& state) {
  const auto tree = state_tree(state);
  for (auto _ : state) {
    const auto paths = specdec::root_to_leaf_paths(tree);
    benchmark::DoNotOptimize(paths.data());
  }
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreeLeavesAndPaths)->Apply(large_sizes);

static void BM_LargeTreeKvCompaction(benchmark::State& state) {
  const auto tree = state_tree(state);
  const auto path = specdec::path_to_node(tree, tree.size() - 1);  // the deepest, last node
  std::vector<std::int32_t> source(path.size()), destination(path.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(specdec::kv_compaction(tree, 100, path, source, destination));
  }
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreeKvCompaction)->Apply(large_sizes);

static void BM_LargeTreeExportSglang(benchmark::State& state) {
  const auto tree = state_tree(state);
  const auto slots = static_cast<std::size_t>(tree.size()) + 1;
  std::vector<std::int64_t> index(slots), next(slots), sibling(slots);
  for (auto _ : state) {
    specdec::sglang::export_tree(tree, 0, index, next, sibling);
    benchmark::DoNotOptimize(sibling.data());
  }
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreeExportSglang)->Apply(large_sizes);

static void BM_LargeTreeFlashinferMask(benchmark::State& state) {
  const auto tree = state_tree(state);
  std::vector<std::uint8_t> mask(specdec::flashinfer::mask_bytes(tree, 100, true));
  for (auto _ : state) {
    specdec::flashinfer::export_mask(tree, 100, true, mask);
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreeFlashinferMask)->Apply(large_sizes_10k);

static void BM_LargeTreePackedMask(benchmark::State& state) {
  const auto tree = state_tree(state);
  std::vector<std::uint32_t> mask(specdec::packed_mask_size(tree));
  for (auto _ : state) {
    specdec::build_packed_mask(tree, mask);
    benchmark::DoNotOptimize(mask.data());
  }
  set_node_counters(state, tree.size());
}
BENCHMARK(BM_LargeTreePackedMask)->Apply(large_sizes_10k);

// Two beams of L tokens (10k and 100k compressed nodes at most): compression and the tree.
static void BM_LargeCompressedBeams(benchmark::State& state) {
  const auto length = static_cast<std::int32_t>(state.range(0)) / 2;
  const auto beams = bench_beams(2, length);
  specdec::CompressedBeams compressed;
  DraftTree tree;
  std::vector<std::int32_t> node_of;
  for (auto _ : state) {
    specdec::compress_beams(beams, 2, 32000, compressed);
    node_of.resize(static_cast<std::size_t>(compressed.size()));
    specdec::compressed_to_draft_tree(compressed, tree, node_of);
    benchmark::DoNotOptimize(tree.tokens.data());
  }
  set_node_counters(state, static_cast<double>(beams.size()));
}
BENCHMARK(BM_LargeCompressedBeams)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);
