// SPDX-License-Identifier: MIT
// The batched CPU entry points allocate nothing after warm-up: every heap allocation of the
// process is counted (a replacement operator new, so this file is its own test program) while
// each operation runs a few steps with a workspace of workspace_size bytes.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/toy/random.hpp"
#include "tree_cases.hpp"

namespace {
std::atomic<long> heap_allocations{0};
}  // namespace

// GCC cannot see that this operator new gets its memory from malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// The whole family is replaced, so that no allocation reaches a sanitizer's own operator new and
// comes back through this file's delete (ASan reports that pairing as a mismatch).
namespace {
void* counted_malloc(std::size_t bytes, std::size_t alignment) noexcept {
  heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0) bytes = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(bytes);
  return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
}
void* counted_new(std::size_t bytes, std::size_t alignment = alignof(std::max_align_t)) {
  if (void* p = counted_malloc(bytes, alignment)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t bytes) { return counted_new(bytes); }
void* operator new[](std::size_t bytes) { return counted_new(bytes); }
void* operator new(std::size_t bytes, std::align_val_t a) {
  return counted_new(bytes, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t bytes, std::align_val_t a) {
  return counted_new(bytes, static_cast<std::size_t>(a));
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, alignof(std::max_align_t));
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, alignof(std::max_align_t));
}
void* operator new(std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

using namespace specdec;
using namespace specdec::test;

namespace {

/// Heap allocations made by `steps` calls of `step` after one warm-up call.
template <class F>
long allocations_after_warm_up(F&& step, int steps = 3) {
  step();
  const long before = heap_allocations.load();
  for (int i = 0; i < steps; ++i) step();
  return heap_allocations.load() - before;
}

std::vector<float> random_logits(std::int64_t rows, std::int64_t vocab, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<float> out(static_cast<std::size_t>(rows * vocab));
  for (auto& x : out) x = static_cast<float>(2.0 * rng.normal());
  return out;
}

}  // namespace

TEST_CASE("the allocation counter sees an allocation", "[backend][allocation]") {
  static std::vector<std::string> kept;  // escapes, so the allocations cannot be elided
  kept.reserve(8);
  CHECK(allocations_after_warm_up([&] { kept.emplace_back(40, 'x'); }) == 3);
}

TEST_CASE("warp_logits_batch allocates nothing after warm-up", "[backend][allocation]") {
  const std::int64_t rows = 24, vocab = 700;  // more rows than the 15-character names hold
  const auto logits = random_logits(rows, vocab, 1);
  std::vector<float> warped(logits.size());
  const auto cpu = backend::cpu.with_threads(2);
  Workspace ws(workspace_size(cpu, WarpBatchShape{rows, vocab}));
  const std::vector<Warp> warps = {{.temperature = 0.8f, .top_k = 40, .top_p = 0.9f}};
  CHECK(allocations_after_warm_up([&] {
          warp_logits_batch(cpu, MatrixView<const float>(logits.data(), rows, vocab), warps,
                            MatrixView<float>(warped.data(), rows, vocab), ws);
        }) == 0);
}

TEST_CASE("verify_chain_batch_logits allocates nothing after warm-up", "[backend][allocation]") {
  const std::int64_t batch = 12, gamma = 4, vocab = 500;
  const auto target = random_logits(batch * (gamma + 1), vocab, 2);
  const auto draft = random_logits(batch * gamma, vocab, 3);
  std::vector<Token> tokens(static_cast<std::size_t>(batch * gamma));
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<Token>(i % 7);
  std::vector<RandomStream> streams(static_cast<std::size_t>(batch));
  std::vector<Token> emitted(static_cast<std::size_t>(batch * (gamma + 1)));
  std::vector<std::int32_t> accepted(static_cast<std::size_t>(batch));
  const auto cpu = backend::cpu.with_threads(2);
  Workspace ws(workspace_size(
      cpu,
      ChainBatchShape{.batch = batch, .max_gamma = gamma, .vocab = vocab, .from_logits = true}));
  const std::vector<Warp> warps = {{.temperature = 0.9f}};
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1));
  const ChainBatchLogitsArgs<float> args{
      .draft_offsets = uniform_draft_offsets(gamma, offsets),
      .target_logits = MatrixView<const float>(target.data(), batch * (gamma + 1), vocab),
      .draft_logits = MatrixView<const float>(draft.data(), batch * gamma, vocab),
      .warps = warps,
      .draft_tokens = tokens,
      .streams = streams,
      .emitted = emitted,
      .accepted = accepted};
  CHECK(allocations_after_warm_up([&] { verify_chain_batch_logits(cpu, args, ws); }) == 0);
}

TEST_CASE("verify_tree_batch allocates nothing after warm-up", "[backend][allocation]") {
  const auto c = make_trees(16, 60, 4);
  const auto batch = static_cast<std::int64_t>(c.offsets.size() - 1);
  const auto rows = static_cast<std::int64_t>(c.tokens.size()) + batch;
  std::int64_t largest = 0;
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b)
    largest = std::max<std::int64_t>(largest, c.offsets[b + 1] - c.offsets[b]);
  std::vector<std::int32_t> nodes(c.tokens.size()), accepted(static_cast<std::size_t>(batch));
  std::vector<Token> final_tokens(static_cast<std::size_t>(batch));
  const auto cpu = backend::cpu.with_threads(2);
  Workspace ws(workspace_size(cpu, TreeBatchShape{batch, largest, c.vocab}));
  const TreeBatchArgs args{.node_offsets = c.offsets,
                           .tokens = c.tokens,
                           .parents = c.parents,
                           .target_rows = MatrixView<const float>(c.target.data(), rows, c.vocab),
                           .draft_rows = MatrixView<const float>(c.draft.data(), rows, c.vocab),
                           .streams = c.streams,
                           .accepted_nodes = nodes,
                           .accepted = accepted,
                           .final_tokens = final_tokens};
  CHECK(allocations_after_warm_up([&] { verify_tree_batch(cpu, Recursive{}, args, ws); }) == 0);
}

TEST_CASE("gumbel_top_k_batch allocates nothing after warm-up", "[backend][allocation]") {
  const std::int64_t rows = 20, vocab = 400, k = 5;
  const auto logits = random_logits(rows, vocab, 5);
  std::vector<RandomStream> streams(static_cast<std::size_t>(rows));
  std::vector<Token> tokens(static_cast<std::size_t>(rows * k));
  std::vector<float> values(tokens.size());
  std::vector<std::int32_t> counts(static_cast<std::size_t>(rows));
  const auto cpu = backend::cpu.with_threads(2);
  Workspace ws(workspace_size(cpu, GumbelTopKBatchShape{rows, vocab, k}));
  CHECK(allocations_after_warm_up([&] {
          gumbel_top_k_batch(cpu, RowKind::kLogWeights,
                             MatrixView<const float>(logits.data(), rows, vocab), k, streams,
                             MatrixView<Token>(tokens.data(), rows, k),
                             MatrixView<float>(values.data(), rows, k), counts, ws);
        }) == 0);
}
