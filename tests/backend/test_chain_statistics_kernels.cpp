// SPDX-License-Identifier: MIT
// The chain step from logits on the CUDA backend's statistics path (temperature, greedy, top-p,
// top-k with any top-p and min-p), run whole through its launcher under the emulation: the CPU's
// tokens bit for bit in every slot of a ragged batch, whatever the number of blocks sharing a row
// and the order they run in, and the traffic of section 3 of the design (each logit read once,
// once more for a cut, the draws' rows once more).
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cuda/detail/chain_logits_kernels.cuh"
#include "specdec/backend/cuda/detail/nucleus_kernels.cuh"
#include "specdec/backend/cuda/emulation/region_buffer.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain_logits.hpp"

using namespace specdec;
namespace cuda_impl = specdec::backend::cuda_impl;
namespace emu = specdec::emulation;

namespace {

/// A ragged batch: draft logits, target logits near them (so some drafts are rejected), tokens
/// drawn near the draft's top.
struct StatsBatch {
  std::vector<std::int32_t> offsets;
  std::vector<float> target, draft;
  std::vector<std::int32_t> tokens;
  std::vector<RandomStream> streams;
  std::int64_t vocab;

  /// argmax_only: every token is its draft row's argmax (what a greedy draft draws). Logits are
  /// normal with standard deviation `spread` (an LLM's rows are peaked: larger spreads).
  StatsBatch(const std::vector<std::int32_t>& gammas, std::int64_t v, std::uint64_t seed,
             bool argmax_only = false, double spread = 2.0)
      : vocab(v) {
    toy::ToyRandom rng(seed);
    offsets.push_back(0);
    for (const std::int32_t g : gammas) offsets.push_back(offsets.back() + g);
    const std::int64_t drafts = offsets.back(), batch = static_cast<std::int64_t>(gammas.size());
    for (std::int64_t r = 0; r < drafts * v; ++r) draft.push_back(static_cast<float>(spread * rng.normal()));
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int32_t i = 0; i <= gammas[static_cast<std::size_t>(b)]; ++i) {
        const std::int64_t d = offsets[static_cast<std::size_t>(b)] +
                               std::min(i, std::max(gammas[static_cast<std::size_t>(b)] - 1, 0));
        for (std::int64_t j = 0; j < v; ++j) {
          // A sequence without drafts at the end has no draft row to follow.
          const float base = d < drafts ? draft[static_cast<std::size_t>(d * v + j)] : 0.0f;
          target.push_back(base + static_cast<float>(0.7 * rng.normal()));
        }
      }
      RandomStream s;
      s.seed = seed;
      s.sequence = static_cast<std::uint32_t>(b);
      s.position = 5;
      streams.push_back(s);
    }
    for (std::int64_t r = 0; r < drafts; ++r) {
      // One of the row's largest entries: drawable under any warp (greedy drafts its argmax).
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < v; ++j) {
        if (draft[static_cast<std::size_t>(r * v + j)] > draft[static_cast<std::size_t>(r * v + best)])
          best = j;
      }
      const auto other = static_cast<std::int64_t>(rng.uniform() * static_cast<double>(v));
      tokens.push_back(static_cast<std::int32_t>(argmax_only || rng.uniform() < 0.6 ? best : other));
    }
  }
  std::int64_t batch() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t drafts() const { return offsets.back(); }
  std::int64_t max_gamma() const {
    std::int64_t m = 0;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b) m = std::max<std::int64_t>(m, offsets[b + 1] - offsets[b]);
    return m;
  }
};

/// The CPU's tokens and counts: verify_chain_logits sequence by sequence (-1 padded).
void cpu_chain(const StatsBatch& c, const Warp& w, std::vector<std::int32_t>& emitted,
               std::vector<std::int32_t>& accepted) {
  const std::int64_t v = c.vocab;
  Workspace ws(verify_chain_logits_workspace_size(v));
  emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), -1);
  accepted.assign(static_cast<std::size_t>(c.batch()), -1);
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int64_t first = c.offsets[static_cast<std::size_t>(b)];
    const std::int64_t g = c.offsets[static_cast<std::size_t>(b) + 1] - first;
    const std::span<const float> target(c.target.data() + (first + b) * v,
                                        static_cast<std::size_t>((g + 1) * v));
    const std::span<const float> draft(c.draft.data() + first * v, static_cast<std::size_t>(g * v));
    const std::span<const Token> tokens(c.tokens.data() + first, static_cast<std::size_t>(g));
    const std::span<Token> out(emitted.data() + first + b, static_cast<std::size_t>(g + 1));
    const ChainVerdict verdict =
        verify_chain_logits<float>(w, target, draft, tokens, v, c.streams[static_cast<std::size_t>(b)], out, ws);
    accepted[static_cast<std::size_t>(b)] = verdict.accepted;
    for (std::int64_t j = verdict.accepted + 1; j <= g; ++j) out[static_cast<std::size_t>(j)] = -1;
  }
}

/// The CUDA launcher's tokens and counts on the emulation.
struct CudaChainRun {
  std::vector<std::int32_t> emitted, accepted;
  double target_reads, draft_reads;  // bytes read per byte of the rows
};
CudaChainRun cuda_chain(const StatsBatch& c, const Warp& w) {
  emu::RegionBuffer<float> target("target", c.target), draft("draft", c.draft);
  emu::RegionBuffer<std::int32_t> tokens("tokens", c.tokens);
  emu::RegionBuffer<std::int32_t> emitted("emitted", static_cast<std::size_t>(c.drafts() + c.batch()));
  emu::RegionBuffer<std::int32_t> accepted("accepted", static_cast<std::size_t>(c.batch()));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", cuda_impl::chain_logits_workspace_size(c.batch(), c.max_gamma(), c.vocab));
  const cuda_impl::DeviceWarp dw{w.temperature, w.top_k, w.top_p, w.min_p};
  const cuda_impl::ChainVerifyParams p{.target = target.get(),
                                       .target_stride = c.vocab,
                                       .draft = draft.get(),
                                       .draft_stride = c.vocab,
                                       .dtype = cuda_impl::DType::kF32,
                                       .batch = c.batch(),
                                       .vocab = c.vocab,
                                       .drafts = c.drafts(),
                                       .draft_offsets = c.offsets,
                                       .draft_tokens = tokens.get(),
                                       .streams = c.streams,
                                       .emitted = emitted.get(),
                                       .accepted = accepted.get(),
                                       .warps = std::span<const cuda_impl::DeviceWarp>(&dw, 1)};
  emu::ledger.reset();
  REQUIRE(cuda_impl::verify_chain_batch_logits(p, workspace.get(), nullptr) == cudaSuccess);
  return {emitted.values(), accepted.values(), emu::ledger.region("target").reads_per_byte(),
          c.drafts() > 0 ? emu::ledger.region("draft").reads_per_byte() : 0.0};
}

/// The CUDA launcher on `sm_count` emulated SMs checked against the CPU's tokens and counts.
CudaChainRun expect_cpu_tokens(const StatsBatch& c, const Warp& w, int sm_count) {
  std::vector<std::int32_t> emitted, accepted;
  cpu_chain(c, w, emitted, accepted);
  emu::runtime.sm_count = sm_count;
  const CudaChainRun run = cuda_chain(c, w);
  emu::runtime.sm_count = 132;
  CHECK(run.accepted == accepted);
  CHECK(run.emitted == emitted);
  return run;
}

}  // namespace

namespace {

/// A case of the bit-for-bit test: the warp, V, the emulated SM count (1, a few or every tile a
/// block of its own) and the seed.
struct StatsCase {
  Warp warp;
  std::int64_t vocab;
  int sm_count;
  std::uint64_t seed;
};

}  // namespace

TEST_CASE("chain from logits on the statistics path: the CPU's tokens bit for bit",
          "[backend][cuda_kernel][chain_statistics]") {
  const Warp t1{.temperature = 1.0f}, t07{.temperature = 0.7f}, greedy{.temperature = 0.0f};
  const Warp p09{.temperature = 0.8f, .top_p = 0.9f}, p05{.temperature = 1.2f, .top_p = 0.5f};
  const StatsCase k = GENERATE_COPY(values<StatsCase>({{t1, 300, 132, 1},
                                                       {t1, 20000, 8, 2},
                                                       {t07, 9000, 1, 3},
                                                       {t07, 20000, 132, 4},
                                                       {greedy, 9000, 4, 5},
                                                       {greedy, 50, 132, 6},
                                                       {p09, 50, 132, 7},
                                                       {p09, 9000, 4, 8},
                                                       {p09, 20000, 132, 9},
                                                       {p05, 300, 132, 10},
                                                       {p05, 9000, 1, 11}}));
  // Tokens a cutting or greedy draft can have drawn: its rows' argmax. Peaked rows for top-p (a
  // nucleus of a few hundred entries, as an LLM's).
  const bool top_p = k.warp.top_p < 1.0f;
  const StatsBatch c({2, 0, 4}, k.vocab, 10 * k.seed + static_cast<std::uint64_t>(k.vocab),
                     k.warp.is_greedy() || top_p, top_p ? 4.0 : 2.0);
  emu::runtime.sm_count = k.sm_count;
  emu::ledger.seed = k.seed;  // the order blocks run in
  std::vector<std::int32_t> emitted, accepted;
  cpu_chain(c, k.warp, emitted, accepted);
  const CudaChainRun run = cuda_chain(c, k.warp);
  emu::runtime.sm_count = 132;
  INFO("T " << k.warp.temperature << ", top-p " << k.warp.top_p << ", V " << k.vocab
            << ", blocks per row "
            << cuda_impl::statistics_row_split(2 * c.drafts() + c.batch(), k.vocab, k.sm_count)
                   .blocks_per_row);
  CHECK(run.accepted == accepted);
  CHECK(run.emitted == emitted);
  // The statistics, the nucleus (top-p), the draws; a row whose nucleus candidates overflow
  // their list adds the radix search's six passes (rows of a tile or more: a short row's drafted
  // entries and draws weigh more).
  if (k.vocab >= 1024) {
    CHECK(run.target_reads <= (top_p ? 10.0 : 2.2));
    CHECK(run.draft_reads <= (top_p ? 10.0 : 2.2));
  }
}

TEST_CASE(
    "chain from logits with top-k on the statistics path: the CPU's tokens bit for bit, "
    "each logit read once and the candidates again",
    "[backend][cuda_kernel][chain_statistics]") {
  const Warp k50{.temperature = 0.8f, .top_k = 50};
  const Warp k50_p09{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f};
  const Warp k5_min{.temperature = 0.7f, .top_k = 5, .min_p = 0.1f};
  const Warp k900_all{.temperature = 1.3f, .top_k = 900, .top_p = 0.8f, .min_p = 0.01f};
  const Warp k1024{.temperature = 1.0f, .top_k = 1024};
  const Warp k1{.temperature = 0.9f, .top_k = 1};
  // 1 block per row, a few, and every tile a block of its own (more blocks than lists of k = 1024
  // fit a row's list: some blocks keep none); a row of one partial tile.
  const StatsCase k = GENERATE_COPY(values<StatsCase>({{k50, 9000, 1, 31},
                                                       {k50, 12000, 132, 32},
                                                       {k50_p09, 9000, 4, 33},
                                                       {k5_min, 300, 132, 34},
                                                       {k900_all, 9000, 132, 35},
                                                       {k1024, 20000, 132, 36},
                                                       {k1, 9000, 8, 37}}));
  // The drafts are their rows' argmax (in any top-k); spread 3: some drafts rejected.
  const StatsBatch c({2, 0, 4}, k.vocab, 10 * k.seed + static_cast<std::uint64_t>(k.vocab),
                     /*argmax_only=*/true, 3.0);
  emu::ledger.seed = k.seed;  // the order blocks run in
  INFO("top-k "
       << k.warp.top_k << ", top-p " << k.warp.top_p << ", min-p " << k.warp.min_p << ", V "
       << k.vocab << ", blocks per row "
       << cuda_impl::statistics_row_split(2 * c.drafts() + c.batch(), k.vocab, k.sm_count)
              .blocks_per_row);
  const CudaChainRun run = expect_cpu_tokens(c, k.warp, k.sm_count);
  CHECK(emu::ledger.counts.launches == 3);
  // The statistics launch reads each logit once, keeping its blocks' top-k; then the k
  // candidates once, the drafted entries, and on a rejection the draft row at the target's kept
  // ids.
  if (k.vocab >= 1024) {
    CHECK(run.target_reads <= 1.001 + 1.2 * static_cast<double>(k.warp.top_k) / k.vocab);
    CHECK(run.draft_reads <= 1.001 + 2.2 * static_cast<double>(k.warp.top_k) / k.vocab);
  }
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE(
    "chain from logits with min-p, alone or after top-p, on the statistics path: the CPU's "
    "tokens bit for bit",
    "[backend][cuda_kernel][chain_statistics]") {
  const Warp min{.temperature = 1.0f, .min_p = 0.1f};
  const Warp p_min{.temperature = 0.8f, .top_p = 0.9f, .min_p = 0.05f};
  // (warp, V, SMs, seed, spread): peaked rows keep tens of entries, listed; flat rows (spread
  // 0.3) keep more than the list holds, and a row of 50 takes the short nucleus: their kept mass
  // is walked over the row.
  const auto [warp, vocab, sm_count, seed, spread] = GENERATE_COPY(
      table<Warp, std::int64_t, int, std::uint64_t, double>({{min, 9000, 1, 41, 3.0},
                                                             {min, 20000, 132, 42, 3.0},
                                                             {p_min, 9000, 4, 43, 3.0},
                                                             {p_min, 20000, 132, 44, 3.0},
                                                             {min, 20000, 8, 45, 0.3},
                                                             {p_min, 50, 132, 46, 3.0}}));
  const StatsBatch c({2, 0, 4}, vocab, 10 * seed + static_cast<std::uint64_t>(vocab),
                     /*argmax_only=*/true, spread);
  emu::ledger.seed = seed;  // the order blocks run in
  INFO(
      "top-p " << warp.top_p << ", min-p " << warp.min_p << ", V " << vocab << ", spread " << spread
               << ", blocks per row "
               << cuda_impl::statistics_row_split(2 * c.drafts() + c.batch(), vocab, sm_count)
                      .blocks_per_row);
  const CudaChainRun run = expect_cpu_tokens(c, warp, sm_count);
  CHECK(emu::ledger.counts.launches == 3);
  if (vocab >= 1024 && spread > 1.0) {
    // The statistics, the cut's gather (and the gate's sample, with top-p), the drafted entries.
    CHECK(run.target_reads <= 2.0 + 1024.0 / static_cast<double>(vocab) + 0.01);
    CHECK(run.draft_reads <= 2.0 + 1024.0 / static_cast<double>(vocab) + 0.01);
  }
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE(
    "chain from logits, cut rows of kSplitCutTiles blocks or more: the draws split over the "
    "sequence's blocks, the cut a predicate entry by entry, the CPU's tokens bit for bit",
    "[backend][cuda_kernel][chain_statistics]") {
  const Warp p09{.temperature = 0.8f, .top_p = 0.9f};
  const Warp k50_p09{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f};
  const Warp min{.temperature = 1.0f, .min_p = 0.1f};
  const Warp p_min{.temperature = 0.7f, .top_p = 0.95f, .min_p = 0.05f};
  // 30 tiles: every tile a block of its own at 132 SMs, 5 tiles a block at 8.
  const std::int64_t vocab = 30 * 1024 - 100;
  static_assert(cuda_impl::detail::kSplitCutTiles <= 30);
  const auto [warp, sm_count, seed] = GENERATE_COPY(table<Warp, int, std::uint64_t>(
      {{p09, 132, 51}, {p09, 8, 52}, {k50_p09, 132, 53}, {min, 8, 54}, {p_min, 132, 55}}));
  // Drafts at their rows' argmax (in every cut); targets near the drafts: some rejected.
  const StatsBatch c({2, 0, 3}, vocab, seed, /*argmax_only=*/true, 3.0);
  emu::ledger.seed = seed;  // the order blocks run in
  INFO("top-k " << warp.top_k << ", top-p " << warp.top_p << ", min-p " << warp.min_p << ", SMs "
                << sm_count << ", draw blocks per sequence "
                << cuda_impl::detail::draw_split(c.batch(), vocab, sm_count).blocks_per_row);
  REQUIRE(cuda_impl::detail::draw_split(c.batch(), vocab, sm_count).blocks_per_row > 1);
  const CudaChainRun run = expect_cpu_tokens(c, warp, sm_count);
  // Each sequence's drawn row is read once more, whole (not from its listed entries).
  const double target_rows = static_cast<double>(c.drafts() + c.batch());
  CHECK(run.target_reads >= 1.0 + static_cast<double>(c.batch()) / target_rows);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE(
    "chain from logits on peaked rows: the cuts' gathers read only the tiles that reach their "
    "gate, the CPU's tokens bit for bit",
    "[backend][cuda_kernel][chain_statistics]") {
  // LM-like rows: six entries far above a bulk of normal(0, 2), in four of the 20 tiles (0, 1, 14
  // and the last, partial one: 3616 entries); every draft token is its row's largest.
  const Warp warp =
      GENERATE(Warp{.temperature = 1.0f, .min_p = 0.1f}, Warp{.temperature = 0.8f, .top_p = 0.9f},
               Warp{.temperature = 0.7f, .top_p = 0.95f, .min_p = 0.05f});
  const std::int64_t vocab = 20000;
  StatsBatch c({2, 0, 3}, vocab, 71);
  toy::ToyRandom rng(72);
  const std::vector<std::int64_t> spikes{5, 17, 1030, 1031, 15000, 19999};
  for (std::vector<float>* rows : {&c.target, &c.draft}) {
    for (std::size_t r = 0; r * static_cast<std::size_t>(vocab) < rows->size(); ++r) {
      for (const std::int64_t id : spikes)
        (*rows)[r * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(id)] =
            20.0f + static_cast<float>(rng.normal());
    }
  }
  for (std::size_t i = 0; i < c.tokens.size(); ++i) {  // the draft row's largest: kept by any cut
    const float* row = c.draft.data() + i * static_cast<std::size_t>(vocab);
    c.tokens[i] = static_cast<std::int32_t>(
        *std::max_element(spikes.begin(), spikes.end(),
                          [row](std::int64_t a, std::int64_t b) { return row[a] < row[b]; }));
  }
  INFO("top-p " << warp.top_p << ", min-p " << warp.min_p);
  const CudaChainRun run = expect_cpu_tokens(c, warp, 8);
  // The statistics, then those four tiles for the gather (and the gate's sample, with top-p);
  // the draws read the listed entries.
  CHECK(run.target_reads <= 1.0 + (3616.0 + 1024.0) / vocab + 0.001);
  CHECK(run.draft_reads <= 1.0 + (3616.0 + 1024.0) / vocab + 0.001);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE(
    "chain from logits with top-p: a nucleus of many candidates and ties at its cut is the "
    "CPU's",
    "[backend][cuda_kernel][chain_statistics]") {
  // Rows of equal logits but for a few: the nucleus cut falls in a run of ties, and the entries
  // at the gate overflow the candidate list (the search over the row takes over).
  StatsBatch c({2, 1}, 9000, 111);
  for (float& x : c.target) x = x > 5.0f ? 3.0f : 0.0f;
  for (float& x : c.draft) x = x > 5.0f ? 3.0f : 0.0f;
  expect_cpu_tokens(c, Warp{.temperature = 1.0f, .top_p = 0.6f}, GENERATE(1, 132));
}

namespace {

/// Rows of V = 16384 whose nucleus candidates overflow the list (4096 keys): of the 1024 entries
/// the gate's sample reads (32 runs of 32 at a stride of V / 32), `sampled_top` are near 2 and
/// the others near 1; elsewhere 140 more near 1, 6000 spread over [-3, -0.5], the rest at -10.
/// With top-p 0.9 the cut lies in the spread entries. With sampled_top = 964 the sample sees too
/// few entries near 1 and none below, so its gate is too high; with 0 it is low enough, but the
/// candidates above it overflow the list.
void overflow_rows(std::vector<float>& rows, std::int64_t v, int sampled_top, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  const std::int64_t stride = v / 32;
  for (std::size_t r = 0; r < rows.size() / static_cast<std::size_t>(v); ++r) {
    int seen = 0, near_one = 0, spread = 0;
    for (std::int64_t j = 0; j < v; ++j) {
      const bool sampled = j % stride < 32;
      float x = -10.0f;
      if (sampled) {
        x = seen++ < sampled_top ? 2.0f : 1.0f;
      } else if (near_one < 140) {
        x = 1.0f;
        ++near_one;
      } else if (spread < 6000) {
        x = -0.5f - 2.5f * static_cast<float>(spread++) / 6000.0f;
      }
      rows[r * static_cast<std::size_t>(v) + static_cast<std::size_t>(j)] =
          x + static_cast<float>(0.01 * rng.normal());
    }
  }
}

}  // namespace

TEST_CASE("chain from logits with top-p: candidates that overflow the list are gathered again "
          "above the cut's bucket, the CPU's tokens",
          "[backend][cuda_kernel][chain_statistics]") {
  // A gate too high (the CPU's prune bound then gathers too many) or candidates too many at the
  // gate: the histogram of the candidates' masses says which bucket holds the cut, and the row
  // is gathered once more above it. The radix search over the row would read it six more times.
  const int sampled_top = GENERATE(0, 964);
  StatsBatch c({2, 1}, 16384, 113);
  overflow_rows(c.target, c.vocab, sampled_top, 5);
  overflow_rows(c.draft, c.vocab, sampled_top, 6);
  for (std::size_t i = 0; i < c.tokens.size(); ++i) c.tokens[i] = static_cast<std::int32_t>(i);
  const CudaChainRun run =
      expect_cpu_tokens(c, Warp{.temperature = 1.0f, .top_p = 0.9f}, GENERATE(1, 132));
  // The statistics, the gate's sample, the gather; then the prune bound's gather (when the gate
  // was too high) and the gather above the cut's bucket; a draft row also at the nucleus's ids
  // of a residual.
  const double sample = 1024.0 / static_cast<double>(c.vocab);
  CHECK(run.target_reads <= (sampled_top > 0 ? 4.0 : 3.0) + sample + 0.01);
  CHECK(run.draft_reads <= (sampled_top > 0 ? 4.0 : 3.0) + sample + 0.03);
}

TEST_CASE("the nucleus kernel's block sort orders candidate keys descending",
          "[backend][cuda_kernel][chain_statistics]") {
  // Counts around the powers of two the bitonic network pads to, and keys with ties in their
  // high half (equal probabilities).
  namespace kernels = specdec::backend::cuda_impl::detail;
  static kernels::NucleusShared sh;
  toy::ToyRandom rng(17);
  for (const int count : {1, 2, 3, 31, 64, 65, 255, 256, 1000, 1024, 2049, 4096}) {
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(count));
    for (auto& key : keys) {
      const auto high = static_cast<std::uint64_t>(rng.uniform() * 64.0);
      key = (high << 32) | static_cast<std::uint64_t>(rng.uniform() * 4294967295.0);
    }
    std::copy(keys.begin(), keys.end(), sh.keys);
    run_emulated_block(kernels::kStatsThreads, 0, [&] { kernels::sort_keys_descending(count, sh.keys); });
    std::sort(keys.begin(), keys.end(), std::greater<>());
    CAPTURE(count);
    CHECK(std::equal(keys.begin(), keys.end(), sh.keys));
  }
}

TEST_CASE("chain from logits on the statistics path: rejections and full acceptance both occur",
          "[backend][cuda_kernel][chain_statistics]") {
  // The cases above must exercise both draws: count them over the seeds.
  int rejected = 0, completed = 0;
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    const StatsBatch c({2, 0, 4}, 9000, 10 * seed + 9000);
    std::vector<std::int32_t> emitted, accepted;
    cpu_chain(c, Warp{.temperature = 0.7f}, emitted, accepted);
    for (std::int64_t b = 0; b < c.batch(); ++b) {
      const std::int32_t g = c.offsets[static_cast<std::size_t>(b) + 1] - c.offsets[static_cast<std::size_t>(b)];
      (accepted[static_cast<std::size_t>(b)] < g ? rejected : completed) += 1;
    }
  }
  CHECK(rejected > 0);
  CHECK(completed > 0);
}

namespace {

/// A chain batch in emulated device memory, offsets and streams included (the graph-safe form).
struct ResidentChain {
  explicit ResidentChain(const StatsBatch& c)
      : target("target", c.target),
        draft("draft", c.draft),
        tokens("tokens", c.tokens),
        offsets("offsets", c.offsets),
        streams("streams", c.streams),
        emitted("emitted", static_cast<std::size_t>(c.drafts() + c.batch())),
        accepted("accepted", static_cast<std::size_t>(c.batch())),
        workspace("workspace",
                  cuda_impl::chain_logits_workspace_size(c.batch(), c.max_gamma(), c.vocab)),
        vocab(c.vocab),
        batch(c.batch()),
        drafts(c.drafts()) {}

  void assign(const StatsBatch& c) {
    target.assign(c.target);
    draft.assign(c.draft);
    tokens.assign(c.tokens);
    offsets.assign(c.offsets);
    streams.assign(c.streams);
  }
  void run(const Warp& warp, cudaStream_t stream = nullptr) { run(&warp, nullptr, stream); }
  /// With one warp for all (`warp`) or B warps in device memory (`device_warps`).
  void run(const Warp* warp, const Warp* device_warps, cudaStream_t stream = nullptr) {
    ChainBatchLogitsArgs<float> args{
        .target_logits = {target.get(), drafts + batch, vocab},
        .draft_logits = {draft.get(), drafts, vocab},
        .warps = device_warps != nullptr
                     ? on_device(device_warps, static_cast<std::size_t>(batch))
                     : Resident<const Warp>(std::span<const Warp>(warp, 1)),
        .draft_tokens = {tokens.get(), tokens.size()},
        .emitted = {emitted.get(), emitted.size()},
        .accepted = {accepted.get(), accepted.size()}};
    args.draft_offsets = on_device(offsets.get(), offsets.size());
    args.streams = on_device(streams.get(), streams.size());
    verify_chain_batch_logits(backend::cuda.on(stream), args,
                              backend::DeviceWorkspace{workspace.get(), workspace.size()});
  }

  emu::RegionBuffer<float> target, draft;
  emu::RegionBuffer<std::int32_t> tokens, offsets;
  emu::RegionBuffer<RandomStream> streams;
  emu::RegionBuffer<std::int32_t> emitted, accepted;
  emu::RegionBuffer<unsigned char> workspace;
  std::int64_t vocab, batch, drafts;
};

}  // namespace

TEST_CASE("chain from logits, device-resident offsets and streams: no copy, the CPU's tokens",
          "[backend][cuda_kernel][chain_statistics][ledger]") {
  emu::ledger.clear();
  const Warp warp{.temperature = 0.8f};
  const StatsBatch c({3, 1}, 9000, 71);
  ResidentChain device(c);
  emu::ledger.reset();
  device.run(warp);
  const emu::RuntimeCounts counts = emu::ledger.counts;
  std::vector<std::int32_t> emitted, accepted;
  cpu_chain(c, warp, emitted, accepted);
  CHECK(device.emitted.values() == emitted);
  CHECK(device.accepted.values() == accepted);
  CHECK(counts.launches == 2);
  CHECK(counts.copies() == 0);
  CHECK(counts.syncs == 0);
  CHECK(counts.allocations == 0);
}

namespace {

/// The CPU backend's batch with a warp per sequence: `warps` as host warps, or read as host
/// memory as warps on the device.
void cpu_batch(const StatsBatch& c, const std::vector<Warp>& warps, bool as_device_warps,
               std::vector<std::int32_t>& emitted, std::vector<std::int32_t>& accepted) {
  emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), -7);
  accepted.assign(static_cast<std::size_t>(c.batch()), -7);
  Workspace ws(workspace_size(backend::cpu, ChainBatchShape{.batch = c.batch(),
                                                            .max_gamma = c.max_gamma(),
                                                            .vocab = c.vocab,
                                                            .from_logits = true}));
  ChainBatchLogitsArgs<float> args{
      .draft_offsets = c.offsets,
      .target_logits = {c.target.data(), c.drafts() + c.batch(), c.vocab},
      .draft_logits = {c.draft.data(), c.drafts(), c.vocab},
      .warps = warps,
      .draft_tokens = c.tokens,
      .streams = c.streams,
      .emitted = emitted,
      .accepted = accepted};
  if (as_device_warps) args.warps = on_device(warps.data(), warps.size());
  verify_chain_batch_logits(backend::cpu, args, ws);
}

}  // namespace

TEST_CASE("chain from logits, device-resident warps: no copy, each sequence the CPU's tokens",
          "[backend][cuda_kernel][chain_statistics][ledger]") {
  emu::ledger.clear();
  const StatsBatch c({3, 1, 2, 0}, 9000, 93, /*argmax_only=*/true);
  const std::vector<Warp> warps{Warp{.temperature = 0.8f},
                                Warp{.temperature = 1.0f, .top_p = 0.9f},
                                Warp{.temperature = 0.0f},
                                Warp{.temperature = 0.7f, .top_k = 9000, .top_p = 0.5f}};
  std::vector<std::int32_t> emitted, accepted, read_emitted, read_accepted;
  cpu_batch(c, warps, false, emitted, accepted);
  // The CPU backend reads warps on the device as host memory.
  cpu_batch(c, warps, true, read_emitted, read_accepted);
  CHECK(read_emitted == emitted);
  CHECK(read_accepted == accepted);
  ResidentChain device(c);
  emu::RegionBuffer<Warp> device_warps("device_warps", warps);
  emu::ledger.reset();
  device.run(nullptr, device_warps.get());
  const emu::RuntimeCounts counts = emu::ledger.counts;
  CHECK(device.emitted.values() == emitted);
  CHECK(device.accepted.values() == accepted);
  CHECK(counts.launches == 3);  // the nucleus launch too: the host does not see the warps
  CHECK(counts.copies() == 0);
  CHECK(counts.syncs == 0);
  CHECK(counts.allocations == 0);
}

TEST_CASE("chain from logits, device-resident warps: a warp the statistics path does not take "
          "fails its sequence alone",
          "[backend][cuda_kernel][chain_statistics]") {
  emu::ledger.clear();
  const StatsBatch c({2, 2, 1}, 5000, 95, /*argmax_only=*/true);
  const Warp unsupported = GENERATE(Warp{.temperature = 1.0f, .top_k = 2000},
                                    Warp{.temperature = -1.0f}, Warp{.top_p = 1.5f});
  const std::vector<Warp> good{Warp{.temperature = 0.9f}, Warp{.temperature = 0.9f},
                               Warp{.temperature = 1.0f, .top_p = 0.8f}};
  std::vector<std::int32_t> emitted, accepted;
  cpu_batch(c, good, false, emitted, accepted);
  std::vector<Warp> warps = good;
  warps[1] = unsupported;
  ResidentChain device(c);
  emu::RegionBuffer<Warp> device_warps("device_warps", warps);
  device.run(nullptr, device_warps.get());
  const std::vector<std::int32_t> got_emitted = device.emitted.values();
  const std::vector<std::int32_t> got_accepted = device.accepted.values();
  CHECK(got_accepted[0] == accepted[0]);
  CHECK(got_accepted[1] == -1);
  CHECK(got_accepted[2] == accepted[2]);
  for (std::int32_t j = 0; j < 3; ++j) {
    CHECK(got_emitted[static_cast<std::size_t>(j)] == emitted[static_cast<std::size_t>(j)]);
    CHECK(got_emitted[static_cast<std::size_t>(3 + j)] == -1);  // sequence 1: only -1 tokens
  }
  CHECK(got_emitted[6] == emitted[6]);
  CHECK(got_emitted[7] == emitted[7]);
}

TEST_CASE("chain from logits, device-resident: a captured call replayed on new inputs equals a "
          "fresh run",
          "[backend][cuda_kernel][chain_statistics]") {
  emu::ledger.clear();
  const Warp warp{.temperature = 1.0f};
  const StatsBatch first({2, 3}, 5000, 81), second({2, 3}, 5000, 82);
  ResidentChain device(first);
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  device.run(warp, stream);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  for (const StatsBatch* c : {&first, &second}) {
    device.assign(*c);
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    std::vector<std::int32_t> emitted, accepted;
    cpu_chain(*c, warp, emitted, accepted);
    CHECK(device.emitted.values() == emitted);
    CHECK(device.accepted.values() == accepted);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_CASE("chain from logits, device-resident: bad arguments are named; the CPU reads them as host "
          "memory",
          "[backend][cuda_kernel][chain_statistics]") {
  const StatsBatch c({2}, 300, 91);
  ResidentChain device(c);
  const Warp warp{.temperature = 1.0f};
  ChainBatchLogitsArgs<float> args{.draft_offsets = on_device(device.offsets.get(), 1),
                                   .target_logits = {device.target.get(), 3, 300},
                                   .draft_logits = {device.draft.get(), 2, 300},
                                   .warps = std::span<const Warp>(&warp, 1),
                                   .draft_tokens = {device.tokens.get(), 2},
                                   .streams = on_device(device.streams.get(), 1),
                                   .emitted = {device.emitted.get(), 3},
                                   .accepted = {device.accepted.get(), 1}};
  const backend::DeviceWorkspace ws{device.workspace.get(), device.workspace.size()};
  // A device array is sized by its caller: B + 1 offsets, B streams.
  CHECK_THROWS_WITH(verify_chain_batch_logits(backend::cuda, args, ws),
                    Catch::StartsWith("draft_offsets:"));
  args.draft_offsets = on_device(device.offsets.get(), 2);
  args.streams = on_device(device.streams.get(), 2);
  CHECK_THROWS_WITH(verify_chain_batch_logits(backend::cuda, args, ws),
                    Catch::StartsWith("streams:"));
  args.streams = on_device(device.streams.get(), 1);
  args.target_logits.rows = 2;
  CHECK_THROWS_WITH(verify_chain_batch_logits(backend::cuda, args, ws),
                    Catch::Contains("target_logits"));
  args.target_logits.rows = 3;
  // The CPU backend reads the device arrays as host memory: the same tokens.
  Workspace host(workspace_size(backend::cpu, ChainBatchShape{.batch = 1, .max_gamma = 2,
                                                             .vocab = 300, .from_logits = true}));
  verify_chain_batch_logits(backend::cpu, args, host);
  std::vector<std::int32_t> emitted, accepted;
  cpu_chain(c, warp, emitted, accepted);
  CHECK(device.emitted.values() == emitted);
  CHECK(device.accepted.values() == accepted);
}

namespace {

/// Bytes read from a region per byte of it.
double reads_per_byte(const char* name) { return emu::ledger.region(name).reads_per_byte(); }

}  // namespace

TEST_CASE("ledger: the chain step from logits on the statistics path reads each logit at most "
          "twice, once on rows the first launch decides",
          "[backend][cuda_kernel][chain_statistics][ledger]") {
  emu::ledger.clear();
  const Warp warp{.temperature = 0.8f};
  const std::int64_t v = 12000;
  const StatsBatch c({5, 3, 0, 2}, v, 101);
  std::vector<std::int32_t> emitted, accepted;
  cpu_chain(c, warp, emitted, accepted);
  ResidentChain device(c);
  emu::ledger.reset();
  device.run(warp);
  REQUIRE(device.accepted.values() == accepted);
  // Rows a draw reads again: the target and draft rows of a rejection, or the bonus row.
  double drawn_target = 0, drawn_draft = 0;
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int32_t g = c.offsets[static_cast<std::size_t>(b) + 1] - c.offsets[static_cast<std::size_t>(b)];
    drawn_target += 1;
    drawn_draft += accepted[static_cast<std::size_t>(b)] < g ? 1 : 0;
  }
  const double target_rows = static_cast<double>(c.drafts() + c.batch());
  const double drafts = static_cast<double>(c.drafts());
  INFO("target reads per byte " << reads_per_byte("target") << ", draft "
                                << reads_per_byte("draft"));
  // Once by the statistics, once more for each drawn row and its scanned blocks (the one holding
  // the draw and, past a rounding edge, the next), plus the entries at the drafted tokens.
  const double drawn = 1.0 + 2.0 * 1024.0 / static_cast<double>(v);
  CHECK(reads_per_byte("target") <= (target_rows + drawn * drawn_target) / target_rows + 0.01);
  CHECK(reads_per_byte("draft") <= (drafts + drawn * drawn_draft) / drafts + 0.01);
  CHECK(reads_per_byte("target") <= 2.0);
  CHECK(reads_per_byte("draft") <= 2.0);
  // Writes: 16 bytes per tile per row; per row its statistics (48 bytes) and its counter (zeroed,
  // counted by each block, reset); per sequence, the drawn row's block sums (4 bytes a tile)
  // and the draw's counter (counted by each block of the split draw, reset).
  const auto rows = static_cast<std::uint64_t>(2 * c.drafts() + c.batch());
  const cuda_impl::RowSplit split =
      cuda_impl::statistics_row_split(static_cast<std::int64_t>(rows), v, 132);
  const auto tiles = static_cast<std::uint64_t>(split.tiles);
  const auto counter = 4 * static_cast<std::uint64_t>(split.blocks_per_row + 2);
  const auto draw = cuda_impl::detail::draw_split(c.batch(), v, 132);
  const auto draw_counter = 4 * static_cast<std::uint64_t>(draw.blocks_per_row + 1);
  CHECK(emu::ledger.region("workspace").traffic.written <=
        rows * (16 * tiles + sizeof(cuda_impl::RowStats) + counter) +
            static_cast<std::uint64_t>(c.batch()) * (4 * tiles + draw_counter));
  CHECK(emu::ledger.region("target").traffic.written == 0);
  CHECK(emu::ledger.region("draft").traffic.written == 0);
  // The streaming pass's loads are coalesced; nothing unwritten is read.
  CHECK(emu::ledger.region("draft").traffic.sector_efficiency() >= 0.9);
  CHECK(emu::ledger.region("target").traffic.sector_efficiency() >= 0.9);
  CHECK(emu::ledger.total().unwritten_reads == 0);
  CHECK(emu::ledger.counts.launches <= 3);
}

TEST_CASE("launch configuration: a chain step at B = 1, V = 128256 puts a block on every SM of "
          "an H100",
          "[backend][cuda_kernel][chain_statistics]") {
  // gamma = 5: 6 target and 5 draft rows; each block whole tiles of 1024 entries.
  const cuda_impl::RowSplit split =
      cuda_impl::statistics_row_split(11, 128256, cuda_impl::kH100Sms);
  CHECK(split.blocks(11) >= 2 * cuda_impl::kH100Sms);  // four blocks an SM
  CHECK(split.tiles == 126);
  CHECK(split.tiles_per_block * split.blocks_per_row >= split.tiles);
  CHECK((split.blocks_per_row - 1) * split.tiles_per_block < split.tiles);  // no empty block
  // At B = 256 a block per row already fills the device twice over.
  CHECK(cuda_impl::statistics_row_split(256 * 11, 128256, cuda_impl::kH100Sms).blocks_per_row == 1);
  // A draw from a whole row: a block per 1024 entries at B = 1, a block per sequence where the
  // row is longer than the block sums shared memory holds (256 x 1024 entries).
  CHECK(cuda_impl::detail::draw_split(1, 128256, cuda_impl::kH100Sms).blocks_per_row == 126);
  CHECK(cuda_impl::detail::draw_split(256, 128256, cuda_impl::kH100Sms).blocks(256) >=
        cuda_impl::kH100Sms);
  CHECK(cuda_impl::detail::draw_split(1, 300000, cuda_impl::kH100Sms).blocks_per_row == 1);
}

TEST_CASE("ledger: the chain step from logits with top-p reads each logit at most twice",
          "[backend][cuda_kernel][chain_statistics][ledger]") {
  emu::ledger.clear();
  const Warp warp{.temperature = 0.8f, .top_p = 0.9f};
  const std::int64_t v = 12000;
  const StatsBatch c({3, 2}, v, 121, true, 4.0);
  std::vector<std::int32_t> emitted, accepted;
  cpu_chain(c, warp, emitted, accepted);
  const CudaChainRun run = cuda_chain(c, warp);
  REQUIRE(run.accepted == accepted);
  REQUIRE(run.emitted == emitted);
  double drawn_target = 0, drawn_draft = 0;
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int32_t g = c.offsets[static_cast<std::size_t>(b) + 1] - c.offsets[static_cast<std::size_t>(b)];
    drawn_target += 1;
    drawn_draft += accepted[static_cast<std::size_t>(b)] < g ? 1 : 0;
  }
  // Statistics and nucleus: twice, and the gate's sample of 1024 entries; the draws read the
  // listed nucleus, the draft row only at its ids.
  const double twice = 2.0 + 1024.0 / static_cast<double>(v);
  INFO("target reads per byte " << run.target_reads << ", draft " << run.draft_reads << " ("
                                << drawn_target << " and " << drawn_draft << " rows drawn from)");
  CHECK(run.target_reads <= twice + 0.01);
  CHECK(run.draft_reads <= twice + 0.02);  // and q at the nucleus ids of a rejection
  CHECK(drawn_draft > 0);  // a rejection's residual was drawn from the listed nucleus
}

namespace {

/// The warped rows (temperature 1) of a batch's logits, for the verifiers that take rows.
std::vector<float> softmax_rows(const std::vector<float>& logits, std::int64_t vocab) {
  std::vector<float> out(logits.size());
  Workspace ws(warp_workspace_size(vocab));
  const Warp warp{.temperature = 1.0f};
  for (std::size_t r = 0; r * static_cast<std::size_t>(vocab) < logits.size(); ++r) {
    const std::size_t at = r * static_cast<std::size_t>(vocab);
    warp_logits<float>(warp, std::span<const float>(logits.data() + at, static_cast<std::size_t>(vocab)),
                       std::span<float>(out.data() + at, static_cast<std::size_t>(vocab)), ws);
  }
  return out;
}

/// verify_chain_batch (rows) or verify_chain_batch_target_only on the CUDA backend, offsets and
/// streams on the host or on the device; the tokens and the call's host copies.
struct RowsChainRun {
  std::vector<std::int32_t> emitted, accepted;
  std::uint64_t copies;
};
RowsChainRun rows_chain(const StatsBatch& c, bool target_only, bool on_device,
                        cudaStream_t stream = nullptr) {
  emu::RegionBuffer<float> target("target", softmax_rows(c.target, c.vocab));
  emu::RegionBuffer<float> draft("draft", softmax_rows(c.draft, c.vocab));
  emu::RegionBuffer<std::int32_t> tokens("tokens", c.tokens), offsets("offsets", c.offsets);
  emu::RegionBuffer<RandomStream> streams("streams", c.streams);
  emu::RegionBuffer<std::int32_t> emitted("emitted", static_cast<std::size_t>(c.drafts() + c.batch()));
  emu::RegionBuffer<std::int32_t> accepted("accepted", static_cast<std::size_t>(c.batch()));
  emu::RegionBuffer<unsigned char> workspace("workspace", cuda_impl::chain_workspace_size(c.batch()));
  ChainBatchArgs args{.target_rows = {target.get(), c.drafts() + c.batch(), c.vocab},
                      .draft_rows = {draft.get(), c.drafts(), c.vocab},
                      .draft_tokens = {tokens.get(), tokens.size()},
                      .emitted = {emitted.get(), emitted.size()},
                      .accepted = {accepted.get(), accepted.size()}};
  if (target_only) args.draft_rows = {};
  if (on_device) {
    args.draft_offsets = specdec::on_device(offsets.get(), offsets.size());
    args.streams = specdec::on_device(streams.get(), streams.size());
  } else {
    args.draft_offsets = c.offsets;
    args.streams = c.streams;
  }
  const backend::DeviceWorkspace ws{workspace.get(), workspace.size()};
  emu::ledger.reset();
  if (target_only) {
    verify_chain_batch_target_only(backend::cuda.on(stream), args, ws);
  } else {
    verify_chain_batch(backend::cuda.on(stream), args, ws);
  }
  return {emitted.values(), accepted.values(), emu::ledger.counts.copies()};
}

}  // namespace

TEST_CASE("chain batches on rows and target-only chains take device-resident offsets and "
          "streams: no copy, the same tokens",
          "[backend][cuda_kernel][chain_statistics]") {
  const bool target_only = GENERATE(false, true);
  const StatsBatch c({3, 0, 2}, 2000, 131);
  const RowsChainRun host = rows_chain(c, target_only, false);
  const RowsChainRun device = rows_chain(c, target_only, true);
  CHECK(host.copies == 2);
  CHECK(device.copies == 0);
  CHECK(device.accepted == host.accepted);
  CHECK(device.emitted == host.emitted);
  // The CPU backend's tokens, bit for bit.
  const std::vector<float> target = softmax_rows(c.target, c.vocab);
  const std::vector<float> draft = softmax_rows(c.draft, c.vocab);
  std::vector<std::int32_t> emitted(static_cast<std::size_t>(c.drafts() + c.batch()));
  std::vector<std::int32_t> accepted(static_cast<std::size_t>(c.batch()));
  ChainBatchArgs cpu_args{.draft_offsets = c.offsets,
                          .target_rows = {target.data(), c.drafts() + c.batch(), c.vocab},
                          .draft_rows = {draft.data(), c.drafts(), c.vocab},
                          .draft_tokens = c.tokens,
                          .streams = c.streams,
                          .emitted = emitted,
                          .accepted = accepted};
  Workspace cpu_ws(workspace_size(backend::cpu, ChainBatchShape{.batch = c.batch(),
                                                               .max_gamma = c.max_gamma(),
                                                               .vocab = c.vocab}));
  if (target_only) {
    cpu_args.draft_rows = {};
    verify_chain_batch_target_only(backend::cpu, cpu_args, cpu_ws);
  } else {
    verify_chain_batch(backend::cpu, cpu_args, cpu_ws);
  }
  CHECK(device.accepted == accepted);
  // Tokens past a sequence's emitted ones are the call's padding (-1 on CUDA).
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::size_t first = static_cast<std::size_t>(c.offsets[static_cast<std::size_t>(b)] + b);
    for (std::int32_t j = 0; j <= accepted[static_cast<std::size_t>(b)]; ++j) {
      CHECK(device.emitted[first + static_cast<std::size_t>(j)] ==
            emitted[first + static_cast<std::size_t>(j)]);
    }
  }
  // Captured with host arrays, the staging copy is refused: a clear error, not a CUDA code.
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK_THROWS_WITH(rows_chain(c, target_only, false, stream),
                    Catch::Contains("draft_offsets") && Catch::Contains("on_device"));
  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamEndCapture(stream, &graph) != cudaSuccess);
}
