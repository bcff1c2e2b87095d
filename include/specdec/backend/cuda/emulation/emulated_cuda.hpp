// SPDX-License-Identifier: MIT
// A host emulation of the CUDA built-ins the backend's kernels use, so the kernel source itself
// runs (slowly) under g++ on machines without a GPU: every CUDA thread of one block is a fiber
// (its own stack; the block's fibers take turns on the calling thread, fiber_switch.hpp), __syncthreads is a
// barrier, __shared__ variables are statics shared by the block (blocks run one at a time, in a
// seeded random order), and warp shuffles and ballots exchange values through per-warp slots
// behind a per-warp barrier. Global memory accesses are recorded in the traffic ledger
// (ledger.hpp); the runtime API (launches, copies, capture) is in runtime.hpp. Programs reach it
// through shim/, which the specdec::cuda_emulation target puts ahead of the include path in place
// of the toolkit's cuda_runtime.h, cuda_fp16.h and cuda_bf16.h (docs/emulation.md).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/backend/cuda/emulation/fiber_switch.hpp"
#include "specdec/backend/cuda/emulation/ledger.hpp"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#define SPECDEC_CUDA_EMULATION 1
#define __device__
#define __host__
#define __forceinline__ inline
// A kernel defined in a header may be compiled into the library and into its caller's program.
#define __global__ inline
#define __launch_bounds__(threads)
#define __shared__ static

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1)
      : x(x_), y(y_), z(z_) {}
};
using uint3 = dim3;

inline thread_local dim3 threadIdx{0, 0, 0};
inline thread_local dim3 blockIdx{0, 0, 0};
inline dim3 blockDim{32, 1, 1};
inline dim3 gridDim{1, 1, 1};

namespace specdec::emulation {

/// A barrier over the fibers of a block or warp: the last to arrive lets the others through (in
/// the latency model, at the latest arrival plus `cost`).
struct FiberBarrier {
  FiberBarrier(unsigned int count, bool whole_block) : expected(count), block_wide(whole_block) {}
  void arrive_and_wait();
  unsigned int expected;
  bool block_wide;
  unsigned int arrived = 0;
  std::uint64_t generation = 0;
  double latest = 0, second = 0, release = 0;  // the arrivals' clocks, the release's
};

/// The lanes of one warp: a barrier over them and two rounds of exchange slots (a lane writes
/// round r's slot, waits, reads; round r + 2 reuses it only after every lane passed round r + 1).
struct Warp {
  explicit Warp(unsigned int lanes) : barrier(lanes, false) {}
  FiberBarrier barrier;
  std::uint64_t slots[2][32] = {};
};

/// One emulated CUDA thread: a fiber with its own stack and the built-ins it sees.
struct Fiber {
  FiberContext context;
  char* stack = nullptr;
  dim3 thread{0, 0, 0};
  ThreadTrace* trace = nullptr;
  unsigned int exchange_round = 0;
  bool done = false;
};

#if defined(__SANITIZE_ADDRESS__)
inline constexpr std::size_t kFiberStack = std::size_t{1} << 20;
#else
inline constexpr std::size_t kFiberStack = std::size_t{1} << 17;
#endif

/// Fiber stacks, kept from block to block (a grid runs many blocks of the same size).
inline char* fiber_stack(unsigned int thread) {
  static std::vector<std::unique_ptr<char[]>> stacks;
  while (stacks.size() <= thread) stacks.emplace_back(new char[kFiberStack]);
  char* stack = stacks[thread].get();
#if defined(__SANITIZE_ADDRESS__)
  __asan_unpoison_memory_region(stack, kFiberStack);  // nothing of an earlier fiber's frames
#endif
  return stack;
}

struct Block {
  explicit Block(unsigned int threads) : barrier(threads, true), fibers(threads) {
    for (unsigned int first = 0; first < threads; first += 32) {
      warps.push_back(std::make_unique<Warp>(std::min(32u, threads - first)));
    }
  }
  FiberBarrier barrier;
  std::vector<std::unique_ptr<Warp>> warps;
  std::vector<Fiber> fibers;
  Fiber* current = nullptr;
  FiberContext scheduler;
  const std::function<void()>* kernel = nullptr;
  std::uint64_t progress = 0;  // barriers passed and fibers finished
  bool bounds_reported = false;
  const void* scheduler_stack = nullptr;  // for the address sanitizer's fiber switches
  std::size_t scheduler_stack_size = 0;
  double alone = 0;  // latency model: cycles one thread worked while the others waited
};
// The threads of a block are fibers taking turns on the calling thread: a barrier costs a
// context switch per thread instead of a kernel wake-up, and kernels see no data race.
inline Block* block = nullptr;
inline thread_local unsigned int exchange_round = 0;

/// Switches from `from` to `to` (whose stack is [stack, stack + size)), telling the address
/// sanitizer about the change of stacks.
[[gnu::noinline]] inline void switch_context(FiberContext& from, const FiberContext& to,
                                             const void* stack, std::size_t size) {
#if defined(__SANITIZE_ADDRESS__)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, stack, size);
  swap_fiber_context(from, to);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  (void)stack;
  (void)size;
  swap_fiber_context(from, to);
#endif
}

/// The running fiber waits: back to the scheduler, which resumes the next one.
inline void yield() {
  switch_context(block->current->context, block->scheduler, block->scheduler_stack,
                 block->scheduler_stack_size);
}

/// Keeps the emulation's own steps (exchanges, barriers) off the running thread's clock.
struct ClockPause {
  ClockPause() : t(trace), was(t != nullptr && std::exchange(t->clock.paused, true)) {}
  ~ClockPause() {
    if (t != nullptr) t->clock.paused = was;
  }
  ThreadTrace* t;
  bool was;
};

inline void FiberBarrier::arrive_and_wait() {
  const ClockPause pause;
  ThreadClock* c = latency.on ? &block->current->trace->clock : nullptr;
  if (c != nullptr) {
    const double t = std::max(c->now, c->pending);
    second = std::max(second, std::min(t, latest));
    latest = std::max(latest, t);
  }
  if (++arrived == expected) {
    arrived = 0;
    ++generation;
    ++block->progress;
    if (c != nullptr) {
      release = latest + (block_wide ? latency.k.barrier : latency.k.shuffle);
      if (block_wide && expected > 1) block->alone += latest - second;
      latest = second = 0;
      c->release_at(release);
    }
    return;
  }
  const std::uint64_t g = generation;
  while (generation == g) yield();
  if (c != nullptr) c->release_at(release);
}

/// A fiber's life: the kernel, then back to the scheduler for good.
inline void fiber_main() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(nullptr, &block->scheduler_stack, &block->scheduler_stack_size);
#endif
  (*block->kernel)();
  block->current->done = true;
  ++block->progress;
#if defined(__SANITIZE_ADDRESS__)
  // A null save slot: this fiber's stack is done with.
  __sanitizer_start_switch_fiber(nullptr, block->scheduler_stack, block->scheduler_stack_size);
#endif
  swap_fiber_context(block->current->context, block->scheduler);  // never resumed
  std::abort();
}

/// The latency model's record of a finished block: its end (the slowest thread), its steps, the
/// cycles one thread worked alone (including after every other thread had finished).
inline void end_block_clocks(double start, const std::vector<ThreadTrace>& traces, double alone) {
  double last = start, second = start, steps = 0;
  for (const ThreadTrace& t : traces) {
    const double end = std::max(t.clock.now, t.clock.pending);
    second = std::max(second, std::min(end, last));
    last = std::max(last, end);
    steps += static_cast<double>(t.clock.steps);
  }
  latency.end_block(start, last, steps, alone + (traces.size() > 1 ? last - second : 0.0));

}

/// Runs `kernel()` as block `index` of `threads` threads, each a fiber, round robin until all
/// have finished; aborts when no thread can move (a barrier some threads never reach).
inline void run_block(unsigned int threads, dim3 index, const std::function<void()>& kernel) {
  Block b(threads);
  b.kernel = &kernel;
  block = &b;
  blockDim = {threads, 1, 1};
  blockIdx = index;
  std::vector<ThreadTrace> traces(threads);
  const double start = latency.on ? latency.block_start() : 0.0;
  for (unsigned int t = 0; t < threads; ++t) {
    Fiber& f = b.fibers[t];
    traces[t].traffic.resize(ledger.size());
    traces[t].clock.now = start;
    f.thread = {t, 0, 0};
    f.trace = &traces[t];
    f.stack = fiber_stack(t);
    make_fiber_context(f.context, f.stack, kFiberStack, fiber_main);
  }
  for (unsigned int left = threads; left > 0;) {
    const std::uint64_t before = b.progress;
    for (Fiber& f : b.fibers) {
      if (f.done) continue;
      b.current = &f;
      threadIdx = f.thread;
      trace = f.trace;
      exchange_round = f.exchange_round;
      switch_context(b.scheduler, f.context, f.stack, kFiberStack);
      f.exchange_round = exchange_round;
      if (f.done) --left;
    }
    if (left > 0 && b.progress == before) {
      std::fprintf(stderr, "emulated block deadlocked: a barrier some threads never reach\n");
      std::abort();
    }
  }
  trace = nullptr;
  block = nullptr;
  if (latency.on) end_block_clocks(start, traces, b.alone);
  merge_block(traces);
}

/// The value of lane `source` (a lane outside the warp reads its own value).
template <class T>
T exchange(T value, unsigned int source) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  const ClockPause pause;
  const unsigned int lane = threadIdx.x & 31u;
  Warp& w = *block->warps[threadIdx.x >> 5];
  const unsigned int round = exchange_round++ & 1u;
  std::memcpy(&w.slots[round][lane], &value, sizeof(T));
  w.barrier.arrive_and_wait();
  if (trace != nullptr) trace->sync();
  if (source >= 32u || (threadIdx.x & ~31u) + source >= blockDim.x) return value;
  T out;
  std::memcpy(&out, &w.slots[round][source], sizeof(T));
  return out;
}

/// Stores `value` at `address` while better(value, the value there) holds; returns the old value.
template <class T, class Better>
T store_if(T* address, T value, Better better) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (better(value, old) && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

/// The latency model's cost of an atomic at `address`: a global one's round trip after the
/// earlier ones there, a shared one's step.
inline void clock_atomic(const void* address) {
  if (!latency.on || trace == nullptr) return;
  if (ledger.find(reinterpret_cast<std::uintptr_t>(address)) >= 0) {
    clock_global_atomic(trace->clock, address);
  } else {
    clock_step(trace->clock);
  }
}

inline void expect_block_threads(unsigned int threads) {
  if (blockDim.x != threads && !block->bounds_reported) {
    block->bounds_reported = true;
    ++ledger.counts.bounds_mismatches;
  }
}

}  // namespace specdec::emulation

inline void __syncthreads() {
  specdec::emulation::block->barrier.arrive_and_wait();
  if (specdec::emulation::trace != nullptr) specdec::emulation::trace->sync();
}
inline void __syncwarp(unsigned int = 0xffffffffu) {
  specdec::emulation::block->warps[threadIdx.x >> 5]->barrier.arrive_and_wait();
  if (specdec::emulation::trace != nullptr) specdec::emulation::trace->sync();
}
inline void __threadfence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (specdec::emulation::latency.on && specdec::emulation::trace != nullptr)
    specdec::emulation::clock_fence(specdec::emulation::trace->clock);
}
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

template <class T>
T __shfl_xor_sync(unsigned int, T value, int lane_mask, int = 32) {
  return specdec::emulation::exchange(value, (threadIdx.x & 31u) ^ static_cast<unsigned>(lane_mask));
}
template <class T>
T __shfl_sync(unsigned int, T value, int source, int width = 32) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned int base = lane - lane % static_cast<unsigned>(width);
  return specdec::emulation::exchange(value, base + static_cast<unsigned>(source % width));
}
template <class T>
T __shfl_down_sync(unsigned int, T value, unsigned int delta, int = 32) {
  const unsigned int lane = threadIdx.x & 31u;
  return specdec::emulation::exchange(value, lane + delta < 32u ? lane + delta : lane);
}
template <class T>
T __shfl_up_sync(unsigned int, T value, unsigned int delta, int = 32) {
  const unsigned int lane = threadIdx.x & 31u;
  return specdec::emulation::exchange(value, lane >= delta ? lane - delta : lane);
}
inline unsigned int __ballot_sync(unsigned int, int predicate) {
  // Every lane publishes its predicate through one exchange round, then reads all of them.
  const specdec::emulation::ClockPause pause;
  auto& w = *specdec::emulation::block->warps[threadIdx.x >> 5];
  const unsigned int round = specdec::emulation::exchange_round++ & 1u;
  w.slots[round][threadIdx.x & 31u] = predicate != 0 ? 1u : 0u;
  w.barrier.arrive_and_wait();
  if (specdec::emulation::trace != nullptr) specdec::emulation::trace->sync();
  const unsigned int lanes = std::min(32u, blockDim.x - (threadIdx.x & ~31u));
  unsigned int bits = 0;
  for (unsigned int lane = 0; lane < lanes; ++lane)
    bits |= w.slots[round][lane] != 0 ? 1u << lane : 0u;
  return bits;
}
inline int __any_sync(unsigned int mask, int predicate) {
  return __ballot_sync(mask, predicate) != 0;
}
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }

template <class T>
T atomicAdd(T* address, T value) {
  specdec::emulation::clock_atomic(address);
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <class T>
T atomicExch(T* address, T value) {
  specdec::emulation::clock_atomic(address);
  return std::atomic_ref<T>(*address).exchange(value);
}
template <class T>
T atomicCAS(T* address, T expected, T desired) {
  specdec::emulation::clock_atomic(address);
  std::atomic_ref<T>(*address).compare_exchange_strong(expected, desired);
  return expected;
}
template <class T>
T atomicMax(T* address, T value) {
  specdec::emulation::clock_atomic(address);
  return specdec::emulation::store_if(address, value, [](T v, T old) { return old < v; });
}
template <class T>
T atomicMin(T* address, T value) {
  specdec::emulation::clock_atomic(address);
  return specdec::emulation::store_if(address, value, [](T v, T old) { return v < old; });
}

inline unsigned int __float_as_uint(float f) {
  unsigned int u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
// g++ contracts nothing without -ffp-contract=fast: these are the plain IEEE operations.
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }

/// Runs `kernel()` as one block of `threads` threads, block index `block` (a direct kernel call,
/// outside the emulated runtime's launch).
inline void run_emulated_block(unsigned int threads, unsigned int block,
                               const std::function<void()>& kernel) {
  gridDim = {block + 1, 1, 1};
  specdec::emulation::run_block(threads, {block, 0, 0}, kernel);
}

#include "specdec/backend/cuda/emulation/runtime.hpp"
