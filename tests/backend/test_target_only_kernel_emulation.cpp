// SPDX-License-Identifier: MIT
// The CUDA target-only verification launchers and kernels (drafts without draft rows), run whole
// through the emulated runtime against the CPU backend's verify_chain_batch_target_only and
// verify_tree_batch_target_only: equal tokens and counts, and the traffic the kernels cause.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "specdec/backend/cpu/lossy_chain_batch.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/status.hpp"
#include "specdec/backend/cuda/emulation/region_buffer.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/toy/distributions.hpp"
#include "specdec/toy/random.hpp"

using namespace specdec;
namespace cuda_impl = specdec::backend::cuda_impl;
namespace emu = specdec::emulation;

namespace {

RandomStream target_only_stream(std::uint64_t seed, std::uint32_t sequence) {
  RandomStream s;
  s.seed = seed;
  s.sequence = sequence;
  s.position = 5;
  s.domain = Domain::kVerify;
  return s;
}

/// `rows` peaked target rows of `vocab` (so drafts copied from them are often accepted).
std::vector<float> target_only_rows(std::int64_t rows, std::int64_t vocab, toy::ToyRandom& rng) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = toy::dirichlet(vocab, vocab > 100 ? 0.05 : 0.1, rng);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

/// A draft token for `row`: mostly drawn from the row itself (accepted often), else uniform.
std::int32_t target_only_token(const std::vector<float>& rows, std::int64_t row, std::int64_t vocab,
                               toy::ToyRandom& rng) {
  if (rng.uniform() < 0.25f)
    return static_cast<std::int32_t>(rng.uniform() * static_cast<float>(vocab - 1));
  const float u = rng.uniform();
  double running = 0.0;
  for (std::int64_t i = 0; i < vocab; ++i) {
    running += rows[static_cast<std::size_t>(row * vocab + i)];
    if (running > u) return static_cast<std::int32_t>(i);
  }
  return static_cast<std::int32_t>(vocab - 1);
}

/// A ragged chain batch in host memory.
struct TargetOnlyChain {
  std::int64_t vocab;
  std::vector<std::int32_t> offsets{0};
  std::vector<float> rows;
  std::vector<std::int32_t> tokens;
  std::vector<RandomStream> streams;
};

TargetOnlyChain target_only_chain(const std::vector<std::int32_t>& gammas, std::int64_t vocab,
                                  std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  TargetOnlyChain c;
  c.vocab = vocab;
  std::int64_t drafts = 0;
  for (const auto g : gammas) c.offsets.push_back(static_cast<std::int32_t>(drafts += g));
  const auto batch = static_cast<std::int64_t>(gammas.size());
  c.rows = target_only_rows(drafts + batch, vocab, rng);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int32_t i = 0; i < gammas[static_cast<std::size_t>(b)]; ++i)
      c.tokens.push_back(
          target_only_token(c.rows, c.offsets[static_cast<std::size_t>(b)] + b + i, vocab, rng));
    c.streams.push_back(target_only_stream(seed, static_cast<std::uint32_t>(b)));
  }
  return c;
}

/// The last emulated call's traffic, taken while its buffers were still registered.
struct TargetOnlyTraffic {
  std::uint64_t target_read = 0;
  std::uint64_t written = 0;          // every byte stored or copied into device memory
  std::uint64_t outputs_written = 0;  // into the outputs and the staging workspace
};
TargetOnlyTraffic last_traffic;

TargetOnlyTraffic target_only_traffic(std::initializer_list<const char*> outputs) {
  TargetOnlyTraffic t{emu::ledger.region("target").traffic.read, emu::ledger.total().written, 0};
  for (const char* name : outputs) t.outputs_written += emu::ledger.region(name).traffic.written;
  return t;
}

/// The last emulated call was one launch inside its registered buffers that read nothing
/// unwritten or unregistered and wrote none of its `inputs`.
void check_clean_launch(std::initializer_list<const char*> inputs) {
  CHECK(emu::ledger.counts.launches == 1);
  CHECK(emu::ledger.counts.bounds_mismatches == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
  CHECK(emu::ledger.unregistered.read == 0);
  for (const char* name : inputs) {
    INFO(name);
    CHECK(emu::ledger.region(name).traffic.written == 0);
  }
}

/// `v`, or one 0 when it is empty (a device buffer holds at least one element).
std::vector<std::int32_t> nonempty(const std::vector<std::int32_t>& v) {
  return v.empty() ? std::vector<std::int32_t>{0} : v;
}

struct ChainOutputs {
  std::vector<std::int32_t> emitted, accepted;
};

ChainOutputs chain_on_cpu(const TargetOnlyChain& c) {
  const auto batch = c.streams.size();
  ChainOutputs out{std::vector<std::int32_t>(c.tokens.size() + batch, 99),
                   std::vector<std::int32_t>(batch, 99)};
  Workspace ws;
  verify_chain_batch_target_only(
      backend::cpu,
      ChainBatchArgs{.draft_offsets = c.offsets,
                     .target_rows = {c.rows.data(),
                                     static_cast<std::int64_t>(c.tokens.size() + batch), c.vocab},
                     .draft_tokens = c.tokens,
                     .streams = c.streams,
                     .emitted = out.emitted,
                     .accepted = out.accepted},
      ws);
  return out;
}

/// The chain batch through the CUDA launcher, its buffers registered with the ledger (reset
/// before the call, so the ledger holds this call's traffic afterwards).
ChainOutputs chain_on_emulated_cuda(const TargetOnlyChain& c) {
  const auto batch = static_cast<std::int64_t>(c.streams.size());
  emu::RegionBuffer<float> target("target", c.rows);
  emu::RegionBuffer<std::int32_t> tokens("tokens", nonempty(c.tokens));
  emu::RegionBuffer<std::int32_t> emitted("emitted", c.tokens.size() + c.streams.size());
  emu::RegionBuffer<std::int32_t> accepted("accepted", c.streams.size());
  emu::RegionBuffer<unsigned char> workspace("workspace", cuda_impl::chain_workspace_size(batch));
  const cuda_impl::ChainVerifyParams p{.target = target.get(),
                                       .target_stride = c.vocab,
                                       .draft = nullptr,
                                       .draft_stride = 0,
                                       .dtype = cuda_impl::DType::kF32,
                                       .batch = batch,
                                       .vocab = c.vocab,
                                       .drafts = static_cast<std::int64_t>(c.tokens.size()),
                                       .draft_offsets = c.offsets,
                                       .draft_tokens = tokens.get(),
                                       .streams = c.streams,
                                       .emitted = emitted.get(),
                                       .accepted = accepted.get()};
  emu::ledger.reset();
  REQUIRE(cuda_impl::verify_chain_batch_target_only(p, workspace.get(), nullptr) == cudaSuccess);
  // Nothing but the outputs (and the staged offsets and streams) is written.
  check_clean_launch({"target", "tokens"});
  last_traffic = target_only_traffic({"emitted", "accepted", "workspace"});
  return {emitted.values(), accepted.values()};
}

/// Target-row bytes the last call read per byte of the rows the walks visit (accepted + 1 rows
/// per sequence).
double target_reads(const std::vector<std::int32_t>& accepted, std::int64_t vocab) {
  std::int64_t visited = 0;
  for (const auto a : accepted) visited += a + 1;
  return static_cast<double>(last_traffic.target_read) /
         static_cast<double>(visited * vocab * static_cast<std::int64_t>(sizeof(float)));
}

/// A batch of level-ordered candidate trees without draft rows: each node gets up to `width`
/// children, their tokens mostly drawn from its target row, some repeating an earlier sibling.
struct TargetOnlyTrees {
  std::int64_t vocab;
  std::vector<std::int32_t> offsets{0};
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<float> rows;
  std::vector<RandomStream> streams;
};

TargetOnlyTrees target_only_trees(std::int64_t batch, std::int64_t vocab, int width,
                                  std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  TargetOnlyTrees t;
  t.vocab = vocab;
  for (std::int64_t b = 0; b < batch; ++b) {
    std::vector<std::int32_t> level{-1};  // the nodes whose children come next
    std::vector<float> rows = target_only_rows(1, vocab, rng);
    std::vector<Token> tokens;
    std::vector<std::int32_t> parents;
    for (int depth = 0; depth < 3 && !level.empty(); ++depth) {
      std::vector<std::int32_t> next;
      for (const auto parent : level) {
        const int children = static_cast<int>(rng.uniform() * static_cast<float>(width + 1));
        for (int k = 0; k < children && b != 1; ++k) {  // tree 1 has no nodes
          const auto row = parent + 1;
          const bool repeat = k > 0 && rng.uniform() < 0.3f;
          tokens.push_back(repeat ? tokens.back() : target_only_token(rows, row, vocab, rng));
          parents.push_back(parent);
          next.push_back(static_cast<std::int32_t>(tokens.size()) - 1);
          const auto r = target_only_rows(1, vocab, rng);
          rows.insert(rows.end(), r.begin(), r.end());
        }
      }
      level = next;
    }
    t.tokens.insert(t.tokens.end(), tokens.begin(), tokens.end());
    t.parents.insert(t.parents.end(), parents.begin(), parents.end());
    t.rows.insert(t.rows.end(), rows.begin(), rows.end());
    t.offsets.push_back(static_cast<std::int32_t>(t.tokens.size()));
    t.streams.push_back(target_only_stream(seed + 1, static_cast<std::uint32_t>(b)));
  }
  return t;
}

struct TreeOutputs {
  std::vector<std::int32_t> accepted_nodes, accepted, final_tokens;
  std::vector<std::uint8_t> bonus;
  friend bool operator==(const TreeOutputs&, const TreeOutputs&) = default;
};

TreeOutputs trees_on_cpu(const TargetOnlyTrees& t) {
  const auto batch = t.streams.size();
  TreeOutputs out{std::vector<std::int32_t>(t.tokens.size(), -7),
                  std::vector<std::int32_t>(batch, -7), std::vector<std::int32_t>(batch, -7),
                  std::vector<std::uint8_t>(batch, 7)};
  Workspace ws;
  verify_tree_batch_target_only(
      backend::cpu,
      TreeBatchArgs{.node_offsets = t.offsets,
                    .trees = {t.tokens, t.parents},
                    .target_rows = {t.rows.data(),
                                    static_cast<std::int64_t>(t.tokens.size() + batch), t.vocab},
                    .streams = t.streams,
                    .accepted_nodes = out.accepted_nodes,
                    .accepted = out.accepted,
                    .final_tokens = out.final_tokens,
                    .bonus = out.bonus},
      ws);
  return out;
}

TreeOutputs trees_on_emulated_cuda(const TargetOnlyTrees& t) {
  const auto batch = static_cast<std::int64_t>(t.streams.size());
  const auto nodes = t.tokens.empty() ? std::size_t{1} : t.tokens.size();
  emu::RegionBuffer<float> target("target", t.rows);
  emu::RegionBuffer<std::int32_t> tokens("tokens", nonempty(t.tokens));
  emu::RegionBuffer<std::int32_t> parents("parents", nonempty(t.parents));
  // accepted_nodes holds what the CPU leaves past each walk, so the whole vectors compare.
  emu::RegionBuffer<std::int32_t> accepted_nodes("accepted_nodes",
                                                std::vector<std::int32_t>(nodes, -7));
  emu::RegionBuffer<std::int32_t> accepted("accepted", t.streams.size());
  emu::RegionBuffer<std::int32_t> final_tokens("final_tokens", t.streams.size());
  emu::RegionBuffer<std::uint8_t> bonus("bonus", t.streams.size());
  emu::RegionBuffer<unsigned char> workspace("workspace", cuda_impl::chain_workspace_size(batch));
  const cuda_impl::TreeVerifyParams p{.node_offsets = t.offsets,
                                      .batch = batch,
                                      .max_nodes = 0,
                                      .tokens = tokens.get(),
                                      .parents = parents.get(),
                                      .target = target.get(),
                                      .target_stride = t.vocab,
                                      .draft = nullptr,
                                      .draft_stride = 0,
                                      .vocab = t.vocab,
                                      .streams = t.streams,
                                      .accepted_nodes = accepted_nodes.get(),
                                      .accepted = accepted.get(),
                                      .final_tokens = final_tokens.get(),
                                      .bonus = bonus.get()};
  emu::ledger.reset();
  REQUIRE(cuda_impl::verify_tree_batch_target_only(p, workspace.get(), nullptr) == cudaSuccess);
  check_clean_launch({"target", "tokens", "parents"});
  last_traffic =
      target_only_traffic({"accepted_nodes", "accepted", "final_tokens", "bonus", "workspace"});
  auto nodes_out = accepted_nodes.values();
  nodes_out.resize(t.tokens.size());
  return {nodes_out, accepted.values(), final_tokens.values(), bonus.values()};
}

}  // namespace

TEST_CASE("the emulated CUDA target-only chain equals verify_chain_batch_target_only",
          "[backend][cuda_kernel][target_only]") {
  const std::vector<std::vector<std::int32_t>> batches = {{3}, {2, 0}, {0, 4, 1}, {1, 3, 0, 2}};
  int rejections = 0;
  int completions = 0;
  for (const std::int64_t vocab : {50, 3000}) {
    for (std::size_t k = 0; k < batches.size(); ++k) {
      const auto c =
          target_only_chain(batches[k], vocab, 40 + k + static_cast<std::uint64_t>(vocab));
      const auto want = chain_on_cpu(c);
      const auto got = chain_on_emulated_cuda(c);
      CHECK(got.accepted == want.accepted);
      CHECK(got.emitted == want.emitted);
      for (std::size_t b = 0; b < want.accepted.size(); ++b) {
        const auto gamma = batches[k][b];
        (want.accepted[b] < gamma ? rejections : completions) += 1;
      }
    }
  }
  CHECK(rejections > 2);
  CHECK(completions > 2);
}

TEST_CASE("the emulated CUDA target-only chain reads each visited target row at most twice",
          "[backend][cuda_kernel][target_only]") {
  const auto c = target_only_chain({2, 3, 0}, 3000, 77);
  const auto out = chain_on_emulated_cuda(c);
  const double reads = target_reads(out.accepted, 3000);
  INFO("target bytes read per visited row byte " << reads);
  CHECK(reads <= 2.0);
  CHECK(last_traffic.outputs_written > 0);
  CHECK(last_traffic.written == last_traffic.outputs_written);
}

TEST_CASE("the emulated CUDA target-only tree walk equals verify_tree_batch_target_only",
          "[backend][cuda_kernel][target_only]") {
  int deep = 0;
  int corrections = 0;
  for (const std::int64_t vocab : {50, 3000}) {
    for (std::uint64_t seed = 0; seed < (vocab == 50 ? 6u : 2u); ++seed) {
      const auto t = target_only_trees(4, vocab, 3, 90 + seed + static_cast<std::uint64_t>(vocab));
      const auto want = trees_on_cpu(t);
      const auto got = trees_on_emulated_cuda(t);
      CHECK(got == want);
      for (std::size_t b = 0; b < want.accepted.size(); ++b) {
        deep += want.accepted[b] >= 2 ? 1 : 0;
        corrections += want.bonus[b] == 0 ? 1 : 0;
      }
      if (vocab == 3000) {
        const double reads = target_reads(want.accepted, vocab);
        INFO("target bytes read per visited row byte " << reads);
        CHECK(reads <= 2.0);
        CHECK(last_traffic.written == last_traffic.outputs_written);
      }
    }
  }
  CHECK(deep > 0);
  CHECK(corrections > 0);
}

TEST_CASE(
    "target-only draft tokens outside the vocabulary: an Error on the CPU, never an index "
    "on CUDA",
    "[backend][cuda_kernel][target_only]") {
  for (const std::int32_t bad : {-1, 50}) {
    auto c = target_only_chain({1, 2}, 50, 5);
    c.tokens[2] = bad;
    CHECK_THROWS_WITH(chain_on_cpu(c), Catch::Contains("draft_tokens[1][1]"));
    const auto got = chain_on_emulated_cuda(c);
    CHECK(got.accepted[1] == -1);
    CHECK(std::vector<std::int32_t>(got.emitted.begin() + 2, got.emitted.end()) ==
          std::vector<std::int32_t>(3, -1));
    // The other sequence is unaffected.
    c.tokens[2] = 0;
    const auto want = chain_on_cpu(c);
    CHECK(got.accepted[0] == want.accepted[0]);
    CHECK(std::vector<std::int32_t>(got.emitted.begin(), got.emitted.begin() + 2) ==
          std::vector<std::int32_t>(want.emitted.begin(), want.emitted.begin() + 2));

    std::uint64_t seed = 3;
    auto t = target_only_trees(1, 50, 2, seed);
    while (t.tokens.empty()) t = target_only_trees(1, 50, 2, ++seed);
    t.tokens.back() = bad;
    CHECK_THROWS_WITH(trees_on_cpu(t), Catch::Contains("tokens"));
    const auto tree = trees_on_emulated_cuda(t);
    CHECK(tree.accepted[0] == -1);
    CHECK(tree.final_tokens[0] == -1);
  }
}

TEST_CASE("the emulated CUDA target-only chain equals the CPU on rows longer than one chunk",
          "[backend][cuda_kernel][target_only]") {
  // 2^18 + 1000 entries: the block sums no longer fit one pass of the block (one rejection and
  // one bonus row).
  const std::int64_t vocab = 263144;
  for (const bool reject : {false, true}) {
    auto c = target_only_chain({1, 0}, vocab, 3);
    // The least likely token of its row: rejected, so the correction walks the long residual.
    if (reject) {
      const auto row = c.rows.begin();
      c.tokens[0] = static_cast<std::int32_t>(std::min_element(row, row + vocab) - row);
    }
    const auto want = chain_on_cpu(c);
    if (reject) CHECK(want.accepted[0] == 0);
    const auto got = chain_on_emulated_cuda(c);
    CHECK(got.emitted == want.emitted);
    CHECK(got.accepted == want.accepted);
  }
}

namespace {

/// vLLM's synthetic rule over `c` with `rates` on `backend` (CPU, or the emulated CUDA backend
/// with device copies of the arrays), with a status buffer.
struct SyntheticOutputs {
  std::vector<std::int32_t> emitted, accepted, status;
};

template <class Backend>
SyntheticOutputs synthetic_on(const Backend& backend, const TargetOnlyChain& c,
                              const std::vector<float>& rates) {
  const auto batch = c.streams.size();
  const auto rows = static_cast<std::int64_t>(c.tokens.size() + batch);
  if constexpr (std::is_same_v<Backend, backend::Cpu>) {
    SyntheticOutputs out{std::vector<std::int32_t>(c.tokens.size() + batch, 99),
                         std::vector<std::int32_t>(batch, 99),
                         std::vector<std::int32_t>(batch + 1, 99)};
    Workspace ws;
    verify_chain_batch_synthetic(backend,
                                 ChainBatchArgs{.draft_offsets = c.offsets,
                                                .target_rows = {c.rows.data(), rows, c.vocab},
                                                .draft_tokens = c.tokens,
                                                .streams = c.streams,
                                                .emitted = out.emitted,
                                                .accepted = out.accepted,
                                                .status = out.status},
                                 rates, ws);
    return out;
  } else {
    emu::RegionBuffer<float> target("target", c.rows);
    emu::RegionBuffer<std::int32_t> tokens("tokens", nonempty(c.tokens));
    emu::RegionBuffer<std::int32_t> emitted("emitted", c.tokens.size() + batch);
    emu::RegionBuffer<std::int32_t> accepted("accepted", batch);
    emu::RegionBuffer<std::int32_t> status("status", batch + 1);
    emu::RegionBuffer<unsigned char> workspace(
        "workspace", cuda_impl::chain_workspace_size(static_cast<std::int64_t>(batch)));
    verify_chain_batch_synthetic(backend,
                                 ChainBatchArgs{.draft_offsets = c.offsets,
                                                .target_rows = {target.get(), rows, c.vocab},
                                                .draft_tokens = {tokens.get(), c.tokens.size()},
                                                .streams = c.streams,
                                                .emitted = {emitted.get(), emitted.size()},
                                                .accepted = {accepted.get(), accepted.size()},
                                                .status = {status.get(), status.size()}},
                                 rates,
                                 backend::DeviceWorkspace{workspace.get(), workspace.size()});
    return {emitted.values(), accepted.values(), status.values()};
  }
}

}  // namespace

TEST_CASE("the emulated CUDA synthetic chain equals verify_chain_batch_synthetic",
          "[backend][cuda_kernel][synthetic]") {
  // Rates of 1 and 0 (every draft kept, the first rejected), and a point-mass row whose forced
  // rejection draws from the row itself.
  const std::vector<float> rates{0.9f, 0.6f, 1.0f, 0.3f, 0.0f, 0.8f};
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    for (const std::int64_t vocab : {7, 300, 5000}) {
      INFO("seed " << seed << ", vocab " << vocab);
      auto c = target_only_chain({3, 0, 6, 1, 4, 2}, vocab, seed);
      std::fill(c.rows.begin(), c.rows.begin() + vocab, 0.0f);
      c.rows[static_cast<std::size_t>(c.tokens[0])] = 1.0f;  // sequence 0's first row
      const auto want = synthetic_on(backend::cpu, c, rates);
      const auto got = synthetic_on(backend::cuda, c, rates);
      CHECK(got.emitted == want.emitted);
      CHECK(got.accepted == want.accepted);
      CHECK(want.status == std::vector<std::int32_t>(c.streams.size() + 1, 0));
      CHECK(got.status == want.status);
    }
  }
}

TEST_CASE("synthetic on both backends: a chain longer than the rates fails alone (kChainTooLong)",
          "[backend][cuda_kernel][synthetic]") {
  const auto c = target_only_chain({2, 4, 1}, 50, 9);
  const std::vector<float> rates{0.5f, 0.5f, 0.5f};
  const auto cpu = synthetic_on(backend::cpu, c, rates);
  const auto cuda = synthetic_on(backend::cuda, c, rates);
  const auto too_long = static_cast<std::int32_t>(SequenceStatus::kChainTooLong);
  CHECK(cpu.status == std::vector<std::int32_t>{0, too_long, 0, 1});
  CHECK(cuda.status == cpu.status);
  CHECK(cuda.accepted == cpu.accepted);
  CHECK(cuda.emitted == cpu.emitted);
  CHECK(cuda.accepted[1] == -1);
}

TEST_CASE("synthetic rates outside [0, 1], or more than the CUDA kernel takes, are named errors",
          "[backend][cuda_kernel][synthetic]") {
  const auto c = target_only_chain({2}, 20, 4);
  CHECK_THROWS_WITH(synthetic_on(backend::cpu, c, {0.5f, 0.5f, 1.5f}),
                    Catch::StartsWith("synthetic_acceptance_rates[2]: 1.5 is outside [0, 1]"));
  CHECK_THROWS_WITH(synthetic_on(backend::cuda, c, {0.5f, -0.1f}),
                    Catch::StartsWith("synthetic_acceptance_rates[1]: "));
  CHECK_THROWS_WITH(
      synthetic_on(backend::cuda, c,
                   std::vector<float>(static_cast<std::size_t>(cuda_impl::kMaxSyntheticRates) + 1,
                                      0.5f)),
      Catch::Contains("the CUDA backend takes at most 64"));
}
