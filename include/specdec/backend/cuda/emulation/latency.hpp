// SPDX-License-Identifier: MIT
// The latency model of the host emulation: what a call would take on a named GPU, from the same
// run that fills the traffic ledger. Every emulated thread keeps a clock in cycles: a step of its
// own code (a basic block, counted where the kernels are compiled with
// -fsanitize-coverage=trace-pc: specdec::cuda_emulation_timed) costs `step`, a global load is
// issued at once and its round trip is charged at the thread's next step (where its value is first
// used), atomics and fences wait for their round trip, a shuffle or ballot lines the warp's lanes
// up on the slowest, and a __syncthreads releases the block at its slowest thread plus the
// barrier's cost. The last global atomic on an address also waits for the others there, so a
// row's last block starts its combine only when every other block has counted itself. Blocks are
// placed on the GPU's SMs in waves as they run, and a launch ends at the latest of its last block,
// its issue slots (every warp step over all SMs' schedulers) and its bytes (sectors moved over the
// GPU's bandwidth). A call is its launches and stream operations in order, each after a fixed gap.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

namespace specdec::emulation {

/// A GPU the model places blocks on.
struct Gpu {
  const char* name;
  int sms;
  double ghz;           // the SM clock under load
  double bytes_per_us;  // DRAM bandwidth
  int threads_per_sm = 2048;
  int schedulers_per_sm = 4;
};
inline constexpr Gpu kH100{.name = "H100 SXM", .sms = 132, .ghz = 1.755, .bytes_per_us = 3.35e6};
inline constexpr Gpu kH200{.name = "H200", .sms = 132, .ghz = 1.755, .bytes_per_us = 4.8e6};

/// The model's constants (cycles unless named _us). Fitted once (docs/cuda-measurements.md) to
/// what an H200 measured (docs/cuda-measurements.md); the round trips start from published
/// figures (L2 about 200 cycles, an atomic's a few hundred).
struct LatencyConstants {
  double step = 8;              // one basic block of a thread's own code
  double issue = 2;             // issue slots per warp step (the launch's issue bound)
  double load = 200;            // a global load's round trip, charged where its value is used
  double atomic = 600;          // a global atomic's round trip
  double atomic_serial = 4;     // between two atomics on one address (at its L2 slice)
  double fence = 300;           // __threadfence: the thread's writes acknowledged
  double barrier = 40;          // __syncthreads once the last thread arrives
  double shuffle = 8;           // a shuffle or ballot once the last lane arrives
  double launch_gap_us = 2.2;   // before a launch that follows another stream operation
  double memset_us = 1.5;       // a cudaMemsetAsync
  double pageable_copy_us = 6;  // a copy from pageable host memory (staged)
  double copy_us = 2.5;         // a pinned or device-side copy
};

/// One thread's clock (cycles); `pending` is when its outstanding loads return.
struct ThreadClock {
  double now = 0, pending = 0;
  std::uint64_t steps = 0;
  bool paused = false;  // inside the emulation's own bookkeeping

  /// Past a barrier at `t`: every load waited for.
  void release_at(double t) {
    now = t;
    pending = 0;
  }
};

/// One launch as modelled.
struct LaunchTime {
  unsigned int blocks = 0, threads = 0;
  double start_us = 0, us = 0;  // its start in the call, its length
  double critical_us = 0;       // the last block's end from the launch's start
  double issue_us = 0;          // every warp step over the GPU's schedulers
  double bytes_us = 0;          // its sectors over the GPU's bandwidth
  double tail_us = 0;           // one block running alone (the row's last, typically)
  double thread_alone_us = 0;   // in the slowest block, one thread working while the rest wait
  double spread = 1;            // slowest block over the median block
  /// The share of the launch that is a block or a thread alone.
  double tail_share() const { return us <= 0 ? 0 : std::max(tail_us, thread_alone_us) / us; }
};

/// One call as modelled: its launches and stream operations in order.
struct CallTime {
  std::vector<LaunchTime> launches;
  unsigned int stream_ops = 0;  // copies and memsets
  double total_us = 0;

  /// A table, one line per launch, and the total.
  std::string table() const {
    std::string out =
        "launch  blocks x threads    us  critical   issue   bytes  tail(block/thread)  spread\n";
    char line[160];
    for (std::size_t i = 0; i < launches.size(); ++i) {
      const LaunchTime& l = launches[i];
      std::snprintf(line, sizeof line,
                    "%6zu %7u x %4u %7.1f %9.1f %7.1f %7.1f %9.1f / %-7.1f %6.2f\n", i, l.blocks,
                    l.threads, l.us, l.critical_us, l.issue_us, l.bytes_us, l.tail_us,
                    l.thread_alone_us, l.spread);
      out += line;
    }
    std::snprintf(line, sizeof line, "total %.1f us (%zu launches, %u copies or memsets)\n",
                  total_us, launches.size(), stream_ops);
    return out + line;
  }
};

/// The model's state over one call: start(), the call, stop().
struct LatencyModel {
  bool on = false;
  Gpu gpu = kH100;
  LatencyConstants k;
  CallTime call;
  double stream_us = 0;  // when the stream's next operation may start

  void start(const Gpu& g, const LatencyConstants& constants = {}) {
    on = true;
    gpu = g;
    k = constants;
    call = {};
    stream_us = 0;
  }
  CallTime stop() {
    on = false;
    call.total_us = stream_us;
    return call;
  }
  double us(double cycles) const { return cycles / (gpu.ghz * 1e3); }
  double cycles(double micro) const { return micro * gpu.ghz * 1e3; }

  /// A copy or memset: its cost after the stream's last operation.
  void stream_op(double cost_us) {
    if (!on) return;
    ++call.stream_ops;
    stream_us += cost_us;
  }

  // --- one launch: blocks placed on SM slots in the order they run ---
  struct Slot {
    double free;
    bool operator>(const Slot& o) const { return free > o.free; }
  };
  std::priority_queue<Slot, std::vector<Slot>, std::greater<>> slots;
  struct BlockRun {
    double start, end, steps, alone;
  };
  std::vector<BlockRun> runs;  // the launch's blocks in the order they ran
  struct AtomicHit {
    std::size_t block;  // in runs
    double at;
  };
  std::unordered_map<std::uintptr_t, std::vector<AtomicHit>> atomics;  // per global address
  double launch_start = 0;
  std::uint64_t sectors_before = 0;
  unsigned int blocks = 0, threads = 0;

  void begin_launch(unsigned int grid_blocks, unsigned int block_threads, std::uint64_t sectors) {
    launch_start =
        cycles(stream_us + (call.launches.empty() && call.stream_ops == 0 ? 0.0 : k.launch_gap_us));
    slots = {};
    const unsigned int per_sm =
        std::max(1u, static_cast<unsigned int>(gpu.threads_per_sm) / block_threads);
    for (unsigned int s = 0; s < per_sm * static_cast<unsigned int>(gpu.sms); ++s)
      slots.push({launch_start});
    atomics.clear();
    runs.clear();
    sectors_before = sectors;
    blocks = grid_blocks;
    threads = block_threads;
  }
  /// The start of the next block to run.
  double block_start() {
    const double s = slots.top().free;
    slots.pop();
    return s;
  }
  void end_block(double start, double end, double steps, double alone) {
    slots.push({end});
    runs.push_back({start, end, steps, alone});
  }
  /// The last atomic on an address saw every other: its block goes on only after the latest of
  /// them (the count that elects a row's last block). Earlier ones wait for nothing, since the
  /// order the emulation ran the blocks in is not the GPU's.
  void wait_for_counts() {
    std::vector<double> delay(runs.size(), 0.0);
    for (const auto& [address, hits] : atomics) {
      const AtomicHit& last = hits.back();
      double others = -1;
      for (const AtomicHit& h : hits)
        if (h.block != last.block) others = std::max(others, h.at);
      if (others >= 0)
        delay[last.block] = std::max(delay[last.block], others + k.atomic_serial - last.at);
    }
    for (std::size_t b = 0; b < runs.size(); ++b) runs[b].end += delay[b];
  }
  void end_launch(std::uint64_t sectors) {
    wait_for_counts();
    double last_end = launch_start, second_end = launch_start, last_start = launch_start;
    double warp_steps = 0, slowest_block = 0, slowest_alone = 0;
    std::vector<double> sorted;
    for (const BlockRun& r : runs) {
      warp_steps += r.steps / 32.0;
      sorted.push_back(r.end - r.start);
      if (r.end - r.start > slowest_block) {
        slowest_block = r.end - r.start;
        slowest_alone = r.alone;
      }
      if (r.end >= last_end) {
        second_end = last_end;
        last_end = r.end;
        last_start = r.start;
      } else {
        second_end = std::max(second_end, r.end);
      }
    }
    LaunchTime l;
    l.blocks = blocks;
    l.threads = threads;
    l.start_us = us(launch_start);
    l.critical_us = us(last_end - launch_start);
    l.issue_us = us(warp_steps * k.issue / (gpu.sms * gpu.schedulers_per_sm));
    l.bytes_us = static_cast<double>(sectors - sectors_before) * 32.0 / gpu.bytes_per_us;
    l.us = std::max({l.critical_us, l.issue_us, l.bytes_us});
    l.tail_us = blocks > 1 ? us(last_end - std::max(second_end, last_start)) : 0.0;
    l.thread_alone_us = us(slowest_alone);
    if (!sorted.empty()) {
      const auto mid = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
      std::nth_element(sorted.begin(), mid, sorted.end());
      l.spread = *mid > 0 ? *std::max_element(sorted.begin(), sorted.end()) / *mid : 1.0;
    }
    call.launches.push_back(l);
    stream_us = l.start_us + l.us;
  }
};
inline LatencyModel latency;

// --- a thread's steps (called with the running fiber's clock) ---

inline void clock_step(ThreadClock& c) {
  if (c.paused) return;
  c.now = std::max(c.now, c.pending) + latency.k.step;
  ++c.steps;
}
inline void clock_load(ThreadClock& c) { c.pending = std::max(c.pending, c.now + latency.k.load); }
/// A global atomic: its old value back a round trip later and used at once (the last one on its
/// address also waits for the others: LatencyModel::wait_for_counts).
inline void clock_global_atomic(ThreadClock& c, const void* address) {
  latency.atomics[reinterpret_cast<std::uintptr_t>(address)].push_back(
      {latency.runs.size(), c.now});
  c.now += latency.k.atomic;
}
inline void clock_fence(ThreadClock& c) {
  c.now = std::max(c.now, c.pending) + latency.k.fence;
  c.pending = 0;
}

}  // namespace specdec::emulation
