// SPDX-License-Identifier: MIT
// The batched warp on the CUDA backend's statistics path (temperature, greedy, top-p, top-k), run
// through the public entry point under the emulation: the CPU backend's rows bit for bit whatever
// the number of blocks sharing a row and the order they run in, warps in host or device memory
// (captured and replayed), and the traffic of a warp at the memory floor (each logit read once
// for the statistics and once for the write pass, once more for a cut, each output written
// once).
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/backend/cuda/emulation/region_buffer.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/toy/random.hpp"
#include "emulated_warp.hpp"

using namespace specdec;
namespace cuda_impl = specdec::backend::cuda_impl;
namespace emu = specdec::emulation;

namespace {

/// rows x vocab logits `stride` entries apart (the gap entries are finite too).
template <class T>
std::vector<T> warp_path_logits(std::int64_t rows, std::int64_t stride, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<T> out(static_cast<std::size_t>(rows * stride));
  for (auto& x : out) x = static_cast<T>(static_cast<float>(2.0 * rng.normal()));
  return out;
}

/// The CPU backend's warped rows (packed, vocab apart).
template <class T>
std::vector<float> cpu_warped(const std::vector<T>& logits, std::int64_t rows, std::int64_t vocab,
                              std::int64_t stride, const std::vector<Warp>& warps) {
  std::vector<float> out(static_cast<std::size_t>(rows * vocab));
  Workspace ws(workspace_size(backend::cpu, WarpBatchShape{rows, vocab}));
  warp_logits_batch(backend::cpu, MatrixView<const T>(logits.data(), rows, vocab, stride), warps,
                    MatrixView<float>(out.data(), rows, vocab), ws);
  return out;
}

/// The CUDA backend's warped rows on the emulation, through the public entry point.
template <class T>
std::vector<float> cuda_warped(const std::vector<T>& logits, std::int64_t rows, std::int64_t vocab,
                               std::int64_t stride, const std::vector<Warp>& warps) {
  emu::RegionBuffer<T> input("logits", logits);
  emu::RegionBuffer<float> output("warped", static_cast<std::size_t>(rows * vocab));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", workspace_size(backend::cuda, WarpBatchShape{rows, vocab}));
  warp_logits_batch(backend::cuda, MatrixView<const T>(input.get(), rows, vocab, stride), warps,
                    MatrixView<float>(output.get(), rows, vocab),
                    backend::DeviceWorkspace{workspace.get(), workspace.size()});
  CHECK(emu::ledger.total().unwritten_reads == 0);
  return output.values();
}

/// Rows warped on both backends, compared bit for bit (== on floats: the rows hold no NaN).
template <class T>
void check_warp_path_bits(std::int64_t rows, std::int64_t vocab, std::int64_t stride,
                          const std::vector<Warp>& warps, std::uint64_t seed) {
  const std::vector<T> logits = warp_path_logits<T>(rows, stride, seed);
  const std::vector<float> cpu = cpu_warped(logits, rows, vocab, stride, warps);
  emu::ledger.reset();
  const std::vector<float> gpu = cuda_warped(logits, rows, vocab, stride, warps);
  // The statistics path (and the nucleus launch with top-p or top-k; the write pass cuts min-p
  // alone), not the one-block-per-row kernel.
  bool cut = false;
  for (const Warp& w : warps)
    cut = cut || (!w.is_greedy() && (w.top_p < 1.0f || (w.top_k > 0 && w.top_k < vocab)));
  CHECK(emu::ledger.counts.launches == (cut ? 3u : 2u));
  std::int64_t mismatches = 0, first = -1;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    if (cpu[i] != gpu[i]) {
      ++mismatches;
      if (first < 0) first = static_cast<std::int64_t>(i);
    }
  }
  INFO("mismatches " << mismatches << ", first at " << first);
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("warp on the statistics path: the CPU backend's rows bit for bit",
          "[backend][cuda_kernel][warp_statistics]") {
  const Warp warp =
      GENERATE(Warp{.temperature = 1.0f}, Warp{.temperature = 0.7f}, Warp{.temperature = 0.0f});
  // (V, SMs, row stride, seed): one partial tile per row; one block per row (9 tiles), 3 blocks
  // of 3 tiles with rows not 16-byte aligned, one block per tile, 5 blocks of 4 tiles (the
  // emulated device's SM count sets the split).
  const auto [vocab, sm_count, stride, seed] =
      GENERATE(table<std::int64_t, int, std::int64_t, std::uint64_t>({{300, 132, 300, 1},
                                                                      {9000, 1, 9000, 2},
                                                                      {9000, 4, 9001, 3},
                                                                      {12000, 132, 12000, 4},
                                                                      {20000, 8, 20000, 5}}));
  const std::int64_t rows = 3;
  // A warp shared by every row, or one per row (a different temperature, or greedy, per row).
  const std::vector<Warp> shared{warp};
  const std::vector<Warp> per_row{warp, Warp{.temperature = 1.3f}, Warp{.temperature = 0.0f}};
  emu::runtime.sm_count = sm_count;
  emu::ledger.seed = seed;  // the order blocks run in
  INFO("T " << warp.temperature << ", V " << vocab << ", stride " << stride << ", blocks per row "
            << cuda_impl::row_split(rows, vocab, sm_count).blocks_per_row);
  check_warp_path_bits<float>(rows, vocab, stride, per_row, seed);
  check_warp_path_bits<Eigen::bfloat16>(rows, vocab, stride, shared, seed + 100);
  check_warp_path_bits<Eigen::half>(rows, vocab, stride, per_row, seed + 200);
  emu::runtime.sm_count = cuda_impl::kH100Sms;
  emu::ledger.seed = 1;
}

TEST_CASE("warp on the statistics path: a top-k of the whole row does not cut",
          "[backend][cuda_kernel][warp_statistics]") {
  const std::int64_t vocab = 2500;
  check_warp_path_bits<float>(
      2, vocab, vocab, {Warp{.temperature = 0.9f, .top_k = static_cast<std::int32_t>(vocab)}}, 7);
}

TEST_CASE("warp on the statistics path: top-k and min-p, alone or with top-p, give the CPU "
          "backend's rows bit for bit",
          "[backend][cuda_kernel][warp_statistics]") {
  // (warp, V, SMs, seed): one block per row, a few, one per tile (more blocks than lists of
  // k = 1024 fit the row's list).
  const auto [warp, vocab, sm_count, seed] =
      GENERATE(table<Warp, std::int64_t, int, std::uint64_t>({
          {Warp{.temperature = 0.8f, .top_k = 50}, 9000, 1, 21},
          {Warp{.temperature = 0.9f, .top_k = 1}, 2500, 4, 22},
          {Warp{.temperature = 1.1f, .top_k = 700, .top_p = 0.9f}, 9000, 4, 23},
          {Warp{.temperature = 0.7f, .top_k = 40, .min_p = 0.05f}, 2500, 132, 24},
          {Warp{.temperature = 1.0f, .top_k = 1024, .top_p = 0.8f, .min_p = 0.02f}, 20000, 132, 25},
          {Warp{.temperature = 1.0f, .min_p = 0.1f}, 9000, 1, 26},
          {Warp{.temperature = 1.3f, .min_p = 0.05f}, 9000, 132, 29},
          {Warp{.temperature = 0.8f, .top_p = 0.9f, .min_p = 0.05f}, 2500, 4, 27},
          // 40% of the row kept: more than a block's part of the list holds (walked)
          {Warp{.temperature = 1.0f, .min_p = 0.001f}, 20000, 8, 28},
      }));
  emu::runtime.sm_count = sm_count;
  emu::ledger.seed = seed;  // the order blocks run in
  INFO("T " << warp.temperature << ", top-k " << warp.top_k << ", V " << vocab
            << ", blocks per row " << cuda_impl::row_split(3, vocab, sm_count).blocks_per_row);
  check_warp_path_bits<float>(3, vocab, vocab, {warp, Warp{.temperature = 1.2f}, warp}, seed);
  check_warp_path_bits<Eigen::bfloat16>(2, vocab, vocab, {warp}, seed + 100);
  emu::runtime.sm_count = cuda_impl::kH100Sms;
  emu::ledger.seed = 1;
}

TEST_CASE(
    "warp with top-k on the statistics path: a row holding a NaN or +inf, or no finite "
    "entry, is written as NaN, the others are the CPU's",
    "[backend][cuda_kernel][warp_statistics]") {
  const std::int64_t rows = 4, vocab = 5000;
  std::vector<float> logits = warp_path_logits<float>(rows, vocab, 51);
  logits[1 * vocab + 4321] = std::nanf("");  // in the last block's part
  logits[2 * vocab + 17] = std::numeric_limits<float>::infinity();
  std::fill(logits.begin() + 3 * vocab, logits.end(), -std::numeric_limits<float>::infinity());
  const Warp warp{.temperature = 0.9f, .top_k = 30};
  emu::runtime.sm_count = 8;  // 3 blocks per row, each keeping a list
  REQUIRE(cuda_impl::row_split(rows, vocab, 8).blocks_per_row == 3);
  emu::ledger.reset();
  const std::vector<float> gpu = cuda_warped(logits, rows, vocab, vocab, {warp});
  emu::runtime.sm_count = cuda_impl::kH100Sms;
  const std::vector<float> first(logits.begin(), logits.begin() + vocab);
  const std::vector<float> cpu = cpu_warped(first, 1, vocab, vocab, {warp});
  CHECK(std::equal(cpu.begin(), cpu.end(), gpu.begin()));
  for (std::int64_t r = 1; r < rows; ++r) {
    INFO("row " << r);
    CHECK(std::all_of(gpu.begin() + r * vocab, gpu.begin() + (r + 1) * vocab,
                      [](float x) { return x != x; }));
  }
}

TEST_CASE(
    "warp on the statistics path: a cut that keeps a few tiles of a peaked row skips "
    "reading the others, the CPU backend's rows bit for bit",
    "[backend][cuda_kernel][warp_statistics]") {
  // An LM-like row: six entries far above a bulk of normal(0, 2), in four of its 20 tiles (0, 1,
  // 14 and the last, partial one: 3616 entries). Every cut keeps only those (top-k 4, some of
  // them), so the write pass and the nucleus's gather read those tiles alone; the statistics read
  // every one.
  const std::int64_t rows = 2, vocab = 20000;
  const auto [warp, sm_count] = GENERATE(table<Warp, int>({
      {Warp{.temperature = 0.8f, .top_p = 0.9f}, 8},
      {Warp{.temperature = 1.0f, .top_p = 0.6f}, 1},
      {Warp{.temperature = 0.9f, .top_k = 4}, 8},
      {Warp{.temperature = 1.0f, .min_p = 0.1f}, 8},
      {Warp{.temperature = 1.2f, .min_p = 0.2f}, 1},
      {Warp{.temperature = 1.0f, .top_k = 50, .top_p = 0.8f}, 8},
      {Warp{.temperature = 0.7f, .top_p = 0.95f, .min_p = 0.05f}, 8},
  }));
  std::vector<float> logits = warp_path_logits<float>(rows, vocab, 61);
  toy::ToyRandom rng(62);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (const std::int64_t id : {5, 17, 1030, 1031, 15000, 19999})
      logits[static_cast<std::size_t>(r * vocab + id)] = 20.0f + static_cast<float>(rng.normal());
  }
  emu::runtime.sm_count = sm_count;
  INFO("T " << warp.temperature << ", top-k " << warp.top_k << ", top-p " << warp.top_p
            << ", min-p " << warp.min_p << ", blocks per row "
            << cuda_impl::row_split(rows, vocab, sm_count).blocks_per_row);
  emu::RegionBuffer<float> input("logits", logits);
  emu::RegionBuffer<float> output("warped", static_cast<std::size_t>(rows * vocab));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", workspace_size(backend::cuda, WarpBatchShape{rows, vocab}));
  emu::ledger.reset();
  warp_logits_batch(backend::cuda, MatrixView<const float>(input.get(), rows, vocab),
                    std::vector<Warp>{warp}, MatrixView<float>(output.get(), rows, vocab),
                    backend::DeviceWorkspace{workspace.get(), workspace.size()});
  emu::runtime.sm_count = cuda_impl::kH100Sms;
  const double reads = emu::ledger.region("logits").reads_per_byte();
  CHECK(emu::ledger.total().unwritten_reads == 0);
  CHECK(output.values() == cpu_warped(logits, rows, vocab, vocab, {warp}));
  // The statistics, then those four tiles for the gather (top-p) and for the write pass; top-k's
  // candidates, and with top-p the gate's sample of 1024 entries.
  CHECK(reads <= 1.0 + 2 * 3616.0 / vocab + 1024.0 / vocab + 0.001);
}

TEST_CASE("warp: a batch with a top-k above kStatisticsTopK takes the one-block-per-row kernel",
          "[backend][cuda_kernel][warp_statistics]") {
  const std::int64_t rows = 2, vocab = 1500;
  static_assert(cuda_impl::kStatisticsTopK < 1400);
  const std::vector<float> logits = warp_path_logits<float>(rows, vocab, 8);
  const std::vector<Warp> warps{Warp{.temperature = 0.8f},
                                Warp{.temperature = 0.8f, .top_k = 1400, .min_p = 0.1f}};
  emu::ledger.reset();
  const std::vector<float> gpu = cuda_warped(logits, rows, vocab, vocab, warps);
  CHECK(emu::ledger.counts.launches == 1);
  CHECK(emu::ledger.counts.memsets == 0);
  // Still the warped rows (the cut kernel agrees with the CPU to float rounding).
  const std::vector<float> cpu = cpu_warped(logits, rows, vocab, vocab, warps);
  for (std::size_t i = 0; i < cpu.size(); ++i) REQUIRE(gpu[i] == Approx(cpu[i]).margin(1e-6));
}

TEST_CASE("warp: top-p takes the statistics path, the CPU's bits",
          "[backend][cuda_kernel][warp_statistics]") {
  // Short rows (one thread cuts), rows of a tile or two and rows split over blocks; a warp per
  // row with and without top-p.
  const std::int64_t vocab = GENERATE(40, 2500, 20000);
  const std::vector<Warp> warps{Warp{.temperature = 0.8f, .top_p = 0.9f},
                                Warp{.temperature = 1.1f, .top_p = 0.5f}, Warp{.temperature = 0.7f}};
  check_warp_path_bits<float>(3, vocab, vocab, warps, 9);
}

namespace {

/// The warp launcher on rows x vocab fp32 logits in named regions, as the ledger sees it: run()
/// resets the ledger first, so it holds that call's traffic afterwards.
struct WarpPathLedger : test::EmulatedWarpCall {
  WarpPathLedger(std::int64_t rows, std::int64_t vocab, std::uint64_t seed)
      : EmulatedWarpCall(warp_path_logits<float>(rows, vocab, seed), rows, vocab) {}

  void run(const std::vector<cuda_impl::DeviceWarp>& warps) {
    emu::ledger.reset();
    REQUIRE(EmulatedWarpCall::run(warps) == cudaSuccess);
  }
};

}  // namespace

TEST_CASE(
    "ledger: the warp on the statistics path reads each logit twice and writes each "
    "output once",
    "[backend][cuda_kernel][warp_statistics][ledger]") {
  emu::ledger.clear();
  const std::int64_t rows = 3, v = 12000;
  WarpPathLedger w(rows, v, 11);
  w.run({{0.8f, 0, 1.0f, 0.0f}});
  const auto row_bytes = static_cast<std::uint64_t>(rows * v * 4);
  const emu::Traffic logits = emu::ledger.region("logits").traffic;
  const emu::Traffic warped = emu::ledger.region("warped").traffic;
  const emu::Traffic workspace = emu::ledger.region("workspace").traffic;
  INFO("logits read " << logits.read << ", warped written " << warped.written
                      << ", workspace written " << workspace.written);
  CHECK(logits.read == 2 * row_bytes);  // the statistics, then the write pass
  CHECK(logits.written == 0);
  CHECK(warped.written == row_bytes);
  CHECK(warped.read == 0);
  // Workspace writes: 16 bytes per tile per row; per row its statistics (48 bytes) and its
  // counter (zeroed, counted by each block, reset).
  const cuda_impl::RowSplit split = cuda_impl::row_split(rows, v, cuda_impl::kH100Sms);
  REQUIRE(split.blocks_per_row >= 2);
  const auto tiles = static_cast<std::uint64_t>(split.tiles);
  const auto counter = 4 * static_cast<std::uint64_t>(split.blocks_per_row + 2);
  CHECK(workspace.written <=
        static_cast<std::uint64_t>(rows) * (16 * tiles + sizeof(cuda_impl::RowStats) + counter));
  CHECK(logits.sector_efficiency() >= 0.9);
  CHECK(warped.sector_efficiency() >= 0.9);
  CHECK(emu::ledger.total().unwritten_reads == 0);
  CHECK(emu::ledger.counts.launches == 2);
  CHECK(emu::ledger.counts.launches <= 3);
  CHECK(emu::ledger.counts.copies() == 0);  // one shared warp: a kernel argument
  CHECK(emu::ledger.counts.syncs == 0);
  CHECK(emu::ledger.counts.allocations == 0);
}

TEST_CASE(
    "ledger: a warp per row on the statistics path copies the warps once; a greedy row's "
    "logits are read once",
    "[backend][cuda_kernel][warp_statistics][ledger]") {
  emu::ledger.clear();
  const std::int64_t rows = 3, v = 9000;
  WarpPathLedger w(rows, v, 12);
  w.run({{0.8f, 0, 1.0f, 0.0f}, {0.0f, 0, 1.0f, 0.0f}, {1.2f, 0, 1.0f, 0.0f}});
  const auto row_bytes = static_cast<std::uint64_t>(v * 4);
  const auto n = static_cast<std::uint64_t>(rows);
  CHECK(emu::ledger.region("logits").traffic.read == (2 * n - 1) * row_bytes);
  CHECK(emu::ledger.region("warped").traffic.written == n * row_bytes);
  CHECK(emu::ledger.region("warped").traffic.sector_efficiency() >= 0.9);
  CHECK(emu::ledger.counts.copies_pageable == 1);  // the per-row warps
  CHECK(emu::ledger.counts.launches == 2);
  CHECK(emu::ledger.counts.syncs == 0);
  CHECK(emu::ledger.counts.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE("warp: a top-p cut among probabilities below 2^-30 is the CPU's",
          "[backend][cuda_kernel][warp_statistics]") {
  // Two entries hold all but about 3.4e-6 of each row, spread over the rest at about 3.8e-10
  // each (below 2^-30, whose masses are not whole units of 2^-53): with top-p just below 1 the
  // cut falls among them, their candidates overflow the list, and the search over the row counts
  // them in a second try of its first pass.
  const std::int64_t rows = 2, vocab = 9000;
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab), -21.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    logits[static_cast<std::size_t>(r * vocab + 17 * r)] = 0.0f;
    logits[static_cast<std::size_t>(r * vocab + 4000)] = 0.0f;
  }
  const std::vector<Warp> warps{Warp{.temperature = 1.0f, .top_p = 0.99999988f}};
  emu::runtime.sm_count = GENERATE(1, 132);
  const std::vector<float> gpu = cuda_warped(logits, rows, vocab, vocab, warps);
  emu::runtime.sm_count = 132;
  const std::vector<float> cpu = cpu_warped(logits, rows, vocab, vocab, warps);
  std::size_t kept = 0;
  for (const float p : cpu) kept += p > 0.0f ? 1 : 0;
  CHECK(kept > 2 * rows);                   // the cut is among the small entries
  CHECK(kept < static_cast<std::size_t>(rows * vocab));  // and cuts
  CHECK(gpu == cpu);
}

TEST_CASE(
    "warp, device-resident warps: no copy, each row the CPU backend's; a warp the "
    "statistics path does not take gives a NaN row, the others unaffected",
    "[backend][cuda_kernel][warp_statistics]") {
  const std::int64_t rows = 5, vocab = 3000;
  const std::vector<float> logits = warp_path_logits<float>(rows, vocab, 31);
  const std::vector<Warp> warps{Warp{.temperature = 0.8f}, Warp{.temperature = 1.0f, .top_p = 0.9f},
                                Warp{.temperature = 0.0f},
                                Warp{.temperature = 0.7f, .top_k = 40, .min_p = 0.05f},
                                Warp{.temperature = 1.0f, .top_k = 2000}};  // not taken
  const std::vector<float> cpu = cpu_warped(logits, rows, vocab, vocab, warps);
  emu::RegionBuffer<float> input("logits", logits);
  emu::RegionBuffer<Warp> device_warps("warps", warps);
  emu::RegionBuffer<float> output("warped", static_cast<std::size_t>(rows * vocab));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", workspace_size(backend::cuda, WarpBatchShape{rows, vocab}));
  emu::ledger.reset();
  warp_logits_batch(
      backend::cuda,
      WarpBatchArgs<float>{.logits = MatrixView<const float>(input.get(), rows, vocab),
                           .warps = on_device(device_warps.get(), device_warps.size()),
                           .warped = MatrixView<float>(output.get(), rows, vocab)},
      backend::DeviceWorkspace{workspace.get(), workspace.size()});
  CHECK(emu::ledger.counts.copies() == 0);
  CHECK(emu::ledger.counts.launches == 3);  // the cut launch, whatever the warps hold
  CHECK(emu::ledger.total().unwritten_reads == 0);
  const std::vector<float> gpu = output.values();
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t differing = 0, nan = 0;
    for (std::int64_t i = 0; i < vocab; ++i) {
      const auto at = static_cast<std::size_t>(r * vocab + i);
      differing += gpu[at] != cpu[at] ? 1 : 0;
      nan += gpu[at] != gpu[at] ? 1 : 0;
    }
    INFO("row " << r);
    if (r == 4) {
      CHECK(nan == vocab);
    } else {
      CHECK(differing == 0);
    }
  }
  // On the CPU backend warps on the device are read as host memory: the same rows as host warps.
  std::vector<float> host(static_cast<std::size_t>(rows * vocab));
  Workspace ws(workspace_size(backend::cpu, WarpBatchShape{rows, vocab}));
  warp_logits_batch(
      backend::cpu,
      WarpBatchArgs<float>{.logits = MatrixView<const float>(logits.data(), rows, vocab),
                           .warps = on_device(warps.data(), warps.size()),
                           .warped = MatrixView<float>(host.data(), rows, vocab)},
      ws);
  CHECK(host == cpu);
}

TEST_CASE("warp with warps on the device: a wrong count, or a bad shape, are named errors",
          "[backend][cuda_kernel][warp_statistics]") {
  const std::int64_t rows = 2, vocab = 100;
  std::vector<float> logits(static_cast<std::size_t>(rows * vocab), 0.0f), out(logits.size());
  const std::vector<Warp> warps(2, Warp{.temperature = 1.0f});
  emu::RegionBuffer<Warp> device_warps("warps", warps);
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", workspace_size(backend::cuda, WarpBatchShape{rows, vocab}));
  Workspace ws(workspace_size(backend::cpu, WarpBatchShape{rows, vocab}));
  const auto run = [&](std::size_t count, std::int64_t out_rows) {
    warp_logits_batch(
        backend::cuda,
        WarpBatchArgs<float>{.logits = MatrixView<const float>(logits.data(), rows, vocab),
                             .warps = on_device(device_warps.get(), count),
                             .warped = MatrixView<float>(out.data(), out_rows, vocab)},
        backend::DeviceWorkspace{workspace.get(), workspace.size()});
  };
  CHECK_THROWS_WITH(run(1, rows), Catch::StartsWith("warps:"));
  CHECK_THROWS_WITH(run(2, 1), Catch::Contains("warped"));
  CHECK_NOTHROW(run(2, rows));
}

TEST_CASE(
    "warp, device-resident warps: a captured call replayed on new logits and warps equals a "
    "fresh run",
    "[backend][cuda_kernel][warp_statistics]") {
  const std::int64_t rows = 3, vocab = 2500;
  const std::vector<float> first = warp_path_logits<float>(rows, vocab, 41),
                           second = warp_path_logits<float>(rows, vocab, 42);
  const std::vector<Warp> first_warps{Warp{.temperature = 0.8f},
                                      Warp{.temperature = 1.0f, .top_k = 30},
                                      Warp{.temperature = 0.9f, .top_p = 0.8f}};
  const std::vector<Warp> second_warps{Warp{.temperature = 0.0f},
                                       Warp{.temperature = 1.2f, .top_p = 0.7f},
                                       Warp{.temperature = 0.6f, .top_k = 100, .min_p = 0.1f}};
  emu::RegionBuffer<float> input("logits", first);
  emu::RegionBuffer<Warp> device_warps("warps", first_warps);
  emu::RegionBuffer<float> output("warped", static_cast<std::size_t>(rows * vocab));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", workspace_size(backend::cuda, WarpBatchShape{rows, vocab}));
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  warp_logits_batch(
      backend::cuda.on(stream),
      WarpBatchArgs<float>{.logits = MatrixView<const float>(input.get(), rows, vocab),
                           .warps = on_device(device_warps.get(), device_warps.size()),
                           .warped = MatrixView<float>(output.get(), rows, vocab)},
      backend::DeviceWorkspace{workspace.get(), workspace.size()});
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);
  for (const auto& [logits, warps] :
       {std::pair{&first, &first_warps}, std::pair{&second, &second_warps}}) {
    std::copy(logits->begin(), logits->end(), input.get());
    std::copy(warps->begin(), warps->end(), device_warps.get());
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    CHECK(output.values() == cpu_warped(*logits, rows, vocab, vocab, *warps));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}
