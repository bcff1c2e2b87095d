// SPDX-License-Identifier: MIT
// The latency model of the emulation (emulation/latency.hpp), run on the benchmark's cases at
// B = 1, V = 128256 (latency_cases.hpp): its calibration against what an H200 measured
// (docs/cuda-measurements.md, each figure within 35%), the figures it still misses (reported, not
// failing), and the goals of the small-batch work on an H100 (hidden: `[goal]` runs them).
#include "latency_cases.hpp"
// The emulation comes first (latency_cases.hpp).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "specdec/backend/cuda/detail/global.cuh"

using namespace specdec;
namespace emu = specdec::emulation;

namespace {

constexpr std::int64_t kV = 128256;
const Warp kTopP{.temperature = 0.8f, .top_p = 0.9f};
const Warp kTopK{.temperature = 0.8f, .top_k = 50};
const Warp kMinP{.temperature = 0.8f, .min_p = 0.1f};

/// The model's figure within 35% of the measured one.
void check_near(const char* what, double model_us, double measured_us) {
  INFO(what << ": model " << model_us << " us, measured " << measured_us << " us");
  CHECK(model_us >= 0.65 * measured_us);
  CHECK(model_us <= 1.35 * measured_us);
}

void show(const std::string& name, const emu::CallTime& t) {
  std::printf("%s\n%s\n", name.c_str(), t.table().c_str());
}

}  // namespace

// The model's rules on kernels written here: this file is compiled without step counting, so
// only loads, fences, atomics and barriers cost (default constants, H100 at 1.755 GHz).
TEST_CASE("latency model: a barrier releases the block at its slowest thread", "[latency]") {
  emu::RegionBuffer<float> values("values", std::vector<float>{1, 2});
  const backend::cuda_impl::detail::Global<const float> g(values.get());
  float sum = 0;
  emu::latency.start(emu::kH100);
  REQUIRE(emu::launch(dim3{1}, 64, nullptr, [&] {
            if (threadIdx.x == 0) {
              sum += g[0];      // a round trip (200) waited for by the fence (300)
              __threadfence();  // 500
              sum += g[1];
              __threadfence();  // 1000
            }
            __syncthreads();  // 1040
          }) == cudaSuccess);
  const emu::CallTime t = emu::latency.stop();
  REQUIRE(t.launches.size() == 1);
  const double cycle_us = 1.0 / (emu::kH100.ghz * 1e3);
  CHECK(t.launches[0].us == Approx(1040 * cycle_us));
  CHECK(t.launches[0].thread_alone_us == Approx(1000 * cycle_us));
  CHECK(sum == 3);
}

TEST_CASE("latency model: a row's last block combines after the slowest block has counted",
          "[latency]") {
  emu::RegionBuffer<unsigned int> counter("counter", std::vector<unsigned int>{0});
  const backend::cuda_impl::detail::Global<unsigned int> count(counter.get());
  emu::latency.start(emu::kH100);
  REQUIRE(emu::launch(dim3{4}, 32, nullptr, [&] {
            __shared__ int last;
            // Block b works (b + 1) fences (300 each), then counts itself (an atomic: 600).
            if (threadIdx.x == 0) {
              for (unsigned int i = 0; i <= blockIdx.x; ++i) __threadfence();
              last = count.atomic_add(0, 1u) == 3u ? 1 : 0;
            }
            __syncthreads();
            if (last != 0 && threadIdx.x == 0) __threadfence();  // the combine
          }) == cudaSuccess);
  const emu::CallTime t = emu::latency.stop();
  const double cycle_us = 1.0 / (emu::kH100.ghz * 1e3);
  // Whichever block counts last starts its combine after block 3's count (1200 + 600), whatever
  // the order the blocks ran in: 1800 + 40 (barrier) + 300, plus the atomics' spacing.
  CHECK(t.launches[0].us >= 2140 * cycle_us);
  CHECK(t.launches[0].us <= 2160 * cycle_us);
  CHECK(t.launches[0].tail_us > 0);
  CHECK(counter[0] == 4u);
}

// Measured on the kernels of c470ede: the step 118-120 us, its draws 42 us, where one block per
// sequence drew a cut row (the model then: 105.3 and 41.7 us, the draws 95% a block alone). The
// draw of a cut row is now split over the sequence's blocks like an uncut row's (not yet measured):
// the model puts the draws where the temperature-only step's split draw is. The nucleus launch
// (66-82 us measured, 34.2 us in the model while each row's last block sorted its candidates)
// selects the cut from the candidates' masses without a sort.
TEST_CASE(
    "latency model: the chain step with T and top-p in fp32 at B 1 (H200 120 us before the "
    "split draw of cut rows)",
    "[latency]") {
  const emu::CallTime t = test::chain_step_time<float>(emu::kH200, 1, kV, kTopP);
  show("chain, T + top-p, fp32, B 1", t);
  REQUIRE(t.launches.size() == 3);
  const emu::LaunchTime& draws = t.launches[2];
  CHECK(draws.blocks == 126);
  CHECK(draws.us <= 15);
  CHECK(draws.spread <= 3);
  CHECK(t.launches[1].us <= 0.5 * 34.2);
  // The draws' old tail gone, the step is under 70% of the one measured.
  CHECK(t.total_us <= 0.7 * 120);
}

TEST_CASE("latency model: the chain step with T only in bf16 at B 1 (H200 37 us)", "[latency]") {
  const emu::CallTime t = test::chain_step_time<Eigen::bfloat16>(emu::kH200, 1, kV, Warp{});
  show("chain, T only, bf16, B 1", t);
  REQUIRE(t.launches.size() == 2);
  check_near("the step", t.total_us, 37);
}

// Measured (69 us; the model then 61.9 us) while thread 0 of a top-k row's last block read the
// blocks' flags one dependent load at a time and alone marked the tiles the cut keeps; both are
// now done by the whole block, and the model puts the call at 39.4 us.
TEST_CASE("latency model: the warp with T and top-k 50 in bf16 at B 1 (H200 69 us before the "
          "block-wide flags)",
          "[latency]") {
  const emu::CallTime t = test::warp_time(emu::kH200, 1, kV, kTopK);
  show("warp, T + top-k 50, bf16, B 1", t);
  CHECK(t.total_us <= 0.7 * 69);
  CHECK(t.launches[0].thread_alone_us <= 2);
}

// Measured (25 us; the model then 28.3 us) while each round's entrants and the last block's merge
// of the block lists were sorted bitonically; they are now merged as sorted lists
// (merge_sorted_lists): the model puts the call at 19.4 us, the merging block alone 4.1 us of it
// (9.7 us before).
TEST_CASE("latency model: Gumbel-top-k with k 8 in fp32 at B 1 (H200 25 us before the list merge)",
          "[latency]") {
  const emu::CallTime t = test::gumbel_time(emu::kH200, 1, kV);
  show("Gumbel-top-k, k 8, B 1", t);
  CHECK(t.total_us <= 0.8 * 25);
  CHECK(t.launches[0].tail_us <= 5);
}

// What the model does not yet reproduce: the statistics launch (22 us measured: the model counts
// no step inside libm's exponentials), the nucleus launch (66 to 82 us) and top-k's last block
// alone (58 us measured).
TEST_CASE("latency model: figures still missed (reported)", "[latency][!mayfail]") {
  const emu::CallTime chain = test::chain_step_time<float>(emu::kH200, 1, kV, kTopP);
  check_near("the statistics launch", chain.launches[0].us, 22);
  check_near("the nucleus launch", chain.launches[1].us, 66);
  const emu::CallTime warp = test::warp_time(emu::kH200, 1, kV, kTopK);
  double alone = 0;
  for (const emu::LaunchTime& l : warp.launches) alone = std::max(alone, l.tail_us);
  check_near("top-k's last block alone", alone, 58);
}

namespace {

/// Every launch of a call: the slowest block within 3x the median, no block or thread alone for
/// more than 30% of it.
void check_launch_shape(const emu::CallTime& t) {
  for (std::size_t i = 0; i < t.launches.size(); ++i) {
    const emu::LaunchTime& l = t.launches[i];
    INFO("launch " << i << ": spread " << l.spread << ", tail share " << l.tail_share());
    CHECK(l.spread <= 3.0);
    CHECK(l.tail_share() <= 0.3);
  }
}

void check_goal(const std::string& name, const emu::CallTime& t, double goal_us) {
  show(name, t);
  INFO(name << ": model " << t.total_us << " us, goal " << goal_us << " us");
  CHECK(t.total_us <= goal_us);
  check_launch_shape(t);
}

}  // namespace

// The goals met so far, asserted on every run (H100 constants, the engine's capturable form).
TEST_CASE("latency goals met: Gumbel-top-k with k 8 at B 1 within 12 us", "[latency]") {
  const emu::CallTime t = test::gumbel_time(emu::kH100, 1, kV, test::ArgsIn::kDevice);
  INFO(t.table());
  CHECK(t.total_us <= 12);
}

// The goals of the small-batch work (H100 constants). Today's kernels miss them (their tails are
// the next change), so they are hidden from the suite: `test_latency_model "[goal]"` prints them.
TEST_CASE("latency goals: chain steps at B 1 and V 128256 within 25 us", "[.goal]") {
  using test::ArgsIn, test::RowShape;
  check_goal("chain, T + top-p, fp32, B 1",
             test::chain_step_time<float>(emu::kH100, 1, kV, kTopP, RowShape::kFlat,
                                          ArgsIn::kDevice),
             25);
  check_goal("chain, T + top-p, fp32, B 1, peaked rows",
             test::chain_step_time<float>(emu::kH100, 1, kV, kTopP, RowShape::kPeaked,
                                          ArgsIn::kDevice),
             25);
  check_goal("chain, T + top-k 50, fp32, B 1",
             test::chain_step_time<float>(emu::kH100, 1, kV, kTopK, RowShape::kFlat,
                                          ArgsIn::kDevice),
             25);
  check_goal("chain, T + min-p 0.1, fp32, B 1",
             test::chain_step_time<float>(emu::kH100, 1, kV, kMinP, RowShape::kFlat,
                                          ArgsIn::kDevice),
             25);
}

TEST_CASE("latency goals: chain step at B 16 and V 32000 within 30 us", "[.goal]") {
  check_goal("chain, T + top-p, fp32, B 16, V 32000",
             test::chain_step_time<float>(emu::kH100, 16, 32000, kTopP, test::RowShape::kFlat,
                                          test::ArgsIn::kDevice),
             30);
}

TEST_CASE("latency goals: warp within 15 us and Gumbel-top-k within 12 us at B 1", "[.goal]") {
  check_goal("warp, T + top-p, B 1",
             test::warp_time(emu::kH100, 1, kV, kTopP, test::ArgsIn::kDevice), 15);
  check_goal("Gumbel-top-k, k 8, B 1",
             test::gumbel_time(emu::kH100, 1, kV, test::ArgsIn::kDevice), 12);
}

namespace {

/// The batch of the large-batch cases: SPECDEC_LATENCY_BATCH, else 256.
std::int64_t large_batch() {
  const char* value = std::getenv("SPECDEC_LATENCY_BATCH");
  return value != nullptr ? std::atoll(value) : 256;
}

}  // namespace

// The large-batch cases against what an H200 measured (docs/cuda-measurements.md), opt-in: the
// emulation takes about nine minutes on 2,816 rows of 128256 (`test_latency_model "[b256]"`;
// SPECDEC_LATENCY_BATCH=4 runs the same cases small, against the figures scaled). Reported, not
// failing: the model misses them (its issue bound counts basic blocks, not instructions).
TEST_CASE("latency model: the chain step at B 256 and V 128256 (H200)", "[.b256][!mayfail]") {
  const std::int64_t batch = large_batch();
  const double scale = static_cast<double>(batch) / 256.0;
  const struct {
    const char* name;
    double measured_us;
    std::function<emu::CallTime()> run;
  } cases[] = {
      {"chain, T only, bf16", 1025,
       [&] { return test::chain_step_time<Eigen::bfloat16>(emu::kH200, batch, kV, Warp{}); }},
      {"chain, T + min-p 0.1, bf16", 1242,
       [&] { return test::chain_step_time<Eigen::bfloat16>(emu::kH200, batch, kV, kMinP); }},
      {"chain, T + top-p 0.9, fp32", 2495,
       [&] { return test::chain_step_time<float>(emu::kH200, batch, kV, kTopP); }},
      {"chain, T + top-k 50, bf16", 3690,
       [&] { return test::chain_step_time<Eigen::bfloat16>(emu::kH200, batch, kV, kTopK); }},
  };
  for (const auto& c : cases) {
    const emu::CallTime t = c.run();
    show(std::string(c.name) + ", B " + std::to_string(batch), t);
    std::printf("measured at B 256: %.0f us (x %.3f for this batch: %.0f us)\n\n", c.measured_us,
                scale, c.measured_us * scale);
    check_near(c.name, t.total_us, c.measured_us * scale);
  }
}
