// SPDX-License-Identifier: MIT
// The batched CPU entry points allocate nothing after warm-up: every heap allocation of the
// process is counted (a replacement operator new, so this file is its own test program) while
// each operation runs a few steps with a workspace of workspace_size bytes.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/toy/random.hpp"
#include "support/allocation_counter.hpp"
#include "tree_cases.hpp"

using namespace specdec;
using namespace specdec::test;

namespace {

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
                           .trees = c.view(),
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
          gumbel_top_k_batch(cpu,
                             GumbelTopKBatchArgs<float>{
                                 .kind = RowKind::kLogWeights,
                                 .rows = MatrixView<const float>(logits.data(), rows, vocab),
                                 .k = k,
                                 .streams = streams,
                                 .tokens = MatrixView<Token>(tokens.data(), rows, k),
                                 .values = MatrixView<float>(values.data(), rows, k),
                                 .counts = counts},
                             ws);
        }) == 0);
}
