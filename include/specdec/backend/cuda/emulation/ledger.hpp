// SPDX-License-Identifier: MIT
// The traffic ledger of the host emulation: what a GPU would pay for a call. Global<T>
// (backend/cuda/detail/global.cuh) reports every load and store here; the emulated runtime
// (runtime.hpp) its launches, copies, allocations and synchronisations.
//
// Per named region of device memory: bytes read and written, bytes read that no store or copy
// ever wrote (what compute-sanitizer's initcheck reports), and the 32-byte sectors each warp-wide
// access touches (the k-th access of every lane of a warp is one warp access; requested bytes over
// 32 x sectors is the coalescing efficiency).
#pragma once

#include <algorithm>
#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "specdec/backend/cuda/emulation/latency.hpp"

namespace specdec::emulation {

struct Traffic {
  std::uint64_t read = 0;             // bytes loaded
  std::uint64_t written = 0;          // bytes stored
  std::uint64_t unwritten_reads = 0;  // bytes loaded that were never written
  std::uint64_t requested = 0;        // distinct bytes of each warp access (for the efficiency)
  std::uint64_t sectors = 0;          // 32-byte sectors over all warp accesses

  /// Requested bytes over the bytes of the sectors moved: 1 when every warp access is coalesced.
  double sector_efficiency() const {
    return sectors == 0 ? 1.0 : static_cast<double>(requested) / (32.0 * sectors);
  }
  void add(const Traffic& t) {
    for (auto field : {&Traffic::read, &Traffic::written, &Traffic::unwritten_reads,
                       &Traffic::requested, &Traffic::sectors})
      this->*field += t.*field;
  }
};

/// A named range of emulated device memory and its shadow of written bytes.
struct Region {
  std::string name;
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
  std::vector<std::uint8_t> shadow;  // 1 where a store or copy wrote the byte
  Traffic traffic;

  /// Passes over the region: bytes read per byte of the region.
  double reads_per_byte() const {
    return bytes == 0 ? 0.0 : static_cast<double>(traffic.read) / static_cast<double>(bytes);
  }
  double writes_per_byte() const {
    return bytes == 0 ? 0.0 : static_cast<double>(traffic.written) / static_cast<double>(bytes);
  }
};

/// Host-side events of the emulated runtime.
struct RuntimeCounts {
  std::uint64_t launches = 0;
  std::uint64_t captured_launches = 0;
  std::uint64_t copies_pageable = 0;  // host-to-device from pageable memory (staged, synchronous)
  std::uint64_t copies_pinned = 0;    // host-to-device from pinned memory
  std::uint64_t copies_other = 0;     // device-to-host, device-to-device
  std::uint64_t memsets = 0;
  std::uint64_t allocations = 0;
  std::uint64_t syncs = 0;
  std::uint64_t bounds_mismatches = 0;  // launches whose block size is not the declared one

  std::uint64_t copies() const { return copies_pageable + copies_pinned + copies_other; }
};

class Ledger {
 public:
  /// Registers [pointer, pointer + bytes) as `name`; `initialised` marks every byte written.
  void add(std::string name, const void* pointer, std::size_t bytes, bool initialised) {
    auto r = std::make_unique<Region>();
    r->name = std::move(name);
    r->begin = reinterpret_cast<std::uintptr_t>(pointer);
    r->bytes = bytes;
    r->shadow.assign(bytes, initialised ? 1 : 0);
    const auto at = std::lower_bound(regions_.begin(), regions_.end(), r->begin,
                                     [](const auto& a, std::uintptr_t b) { return a->begin < b; });
    regions_.insert(at, std::move(r));
  }
  void remove(const void* pointer) {
    const auto p = reinterpret_cast<std::uintptr_t>(pointer);
    std::erase_if(regions_, [p](const auto& r) { return r->begin == p; });
  }
  /// Forgets every region and count.
  void clear() {
    regions_.clear();
    reset();
  }
  /// Zeroes the counts and traffic; regions and their written bytes stay.
  void reset() {
    counts = {};
    unregistered = {};
    for (auto& r : regions_) r->traffic = {};
  }

  const Region& region(const std::string& name) const {
    for (const auto& r : regions_) {
      if (r->name == name) return *r;
    }
    throw std::out_of_range("no emulated region named " + name);
  }
  /// Traffic summed over every region.
  Traffic total() const {
    Traffic t = unregistered;
    for (const auto& r : regions_) t.add(r->traffic);
    return t;
  }

  /// Index of the region holding `address`, or -1.
  int find(std::uintptr_t address) const {
    const auto at = std::upper_bound(regions_.begin(), regions_.end(), address,
                                     [](std::uintptr_t a, const auto& r) { return a < r->begin; });
    if (at == regions_.begin()) return -1;
    const auto& r = *(at - 1);
    return address < r->begin + r->bytes ? static_cast<int>(at - 1 - regions_.begin()) : -1;
  }
  Region& at(int index) { return *regions_[static_cast<std::size_t>(index)]; }
  std::size_t size() const { return regions_.size(); }

  /// Marks [pointer, pointer + bytes) written where it lies in a region (copies and memsets).
  void mark_written(const void* pointer, std::size_t bytes) {
    const auto p = reinterpret_cast<std::uintptr_t>(pointer);
    for (std::size_t i = 0; i < bytes;) {
      const int r = find(p + i);
      if (r < 0) {
        ++i;
        continue;
      }
      Region& reg = at(r);
      const std::size_t from = p + i - reg.begin;
      const std::size_t n = std::min(bytes - i, reg.bytes - from);
      std::fill_n(reg.shadow.begin() + static_cast<std::ptrdiff_t>(from), n, std::uint8_t{1});
      i += n;
    }
  }

  RuntimeCounts counts;
  Traffic unregistered;    // accesses outside every region
  std::uint64_t seed = 1;  // of the block order

 private:
  std::vector<std::unique_ptr<Region>> regions_;
};

inline Ledger ledger;

/// One warp access's touch of one sector: the lane's access (sync epoch, ordinal in it), the
/// region, the sector.
struct SectorHit {
  std::uint64_t ordinal;
  std::int32_t region;
  std::uint64_t sector;
  auto operator<=>(const SectorHit& o) const = default;  // by ordinal, region, sector
};

/// One lane's access: its ordinal, region, address and size (lanes of a warp reading the same
/// bytes in one access request them once, as a broadcast).
struct Access {
  std::uint64_t ordinal;
  std::int32_t region;
  std::uintptr_t address;
  std::size_t bytes;
  bool operator<(const Access& o) const {
    return std::tie(ordinal, address, bytes) < std::tie(o.ordinal, o.address, o.bytes);
  }
  bool operator==(const Access& o) const = default;
};

/// What one emulated CUDA thread recorded; merged into the ledger when its block ends.
struct ThreadTrace {
  std::vector<Traffic> traffic;  // per region index
  Traffic unregistered;
  std::vector<SectorHit> hits;
  std::vector<Access> accesses;
  // The lanes of a warp pass the same barriers and shuffles, and walk a region in the same
  // order: counting loads and stores per region from the last barrier keeps a divergent branch
  // from shifting the pairing of later accesses.
  std::uint64_t epoch = 0;
  std::vector<std::uint32_t> loads, stores;  // per region index + 1
  ThreadClock clock;                         // the latency model's (latency.hpp)
  void sync() {
    ++epoch;
    std::fill(loads.begin(), loads.end(), 0u);
    std::fill(stores.begin(), stores.end(), 0u);
  }
};
inline thread_local ThreadTrace* trace = nullptr;

/// The ledger's record of one access by thread `t`.
inline void record_access(ThreadTrace* t, const void* address, std::size_t bytes, bool store,
                          bool dense) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  const int r = ledger.find(a);
  std::vector<std::uint32_t>& counts = store ? t->stores : t->loads;
  if (counts.size() <= static_cast<std::size_t>(r + 1)) counts.resize(ledger.size() + 1, 0u);
  const std::uint64_t ordinal =
      (t->epoch << 32) | (store ? 1ull << 31 : 0ull) | counts[static_cast<std::size_t>(r + 1)]++;
  Traffic& traffic = r < 0 ? t->unregistered : t->traffic[static_cast<std::size_t>(r)];
  (store ? traffic.written : traffic.read) += bytes;
  t->accesses.push_back({ordinal, r, a, bytes});
  for (std::uint64_t s = a >> 5; s <= (a + bytes - 1) >> 5; ++s) t->hits.push_back({ordinal, r, s});
  if (r < 0) return;
  Region& reg = ledger.at(r);
  const std::size_t from = a - reg.begin;
  const std::size_t n = std::min(bytes, reg.bytes - from);
  for (std::size_t i = 0; i < n; ++i) {
    std::atomic_ref<std::uint8_t> shadow(reg.shadow[from + i]);
    if (store) {
      // A type with padding bytes is never known written: its copies carry unwritten bytes.
      if (dense) shadow.store(1, std::memory_order_relaxed);
    } else if (shadow.load(std::memory_order_relaxed) == 0) {
      ++traffic.unwritten_reads;
    }
  }
}
inline void record(const void* address, std::size_t bytes, bool store, bool dense) {
  ThreadTrace* t = trace;
  if (t == nullptr) return;  // host code, outside a kernel
  // The bookkeeping below is not the kernel's work: its steps are not counted.
  const bool was_paused = std::exchange(t->clock.paused, true);
  if (!store && latency.on) clock_load(t->clock);
  record_access(t, address, bytes, store, dense);
  t->clock.paused = was_paused;
}

inline void record_load(const void* address, std::size_t bytes, bool dense) {
  record(address, bytes, false, dense);
}
inline void record_store(const void* address, std::size_t bytes, bool dense) {
  record(address, bytes, true, dense);
}

/// Adds a finished block's traces to the ledger: traffic per region, and the distinct sectors of
/// each warp access (the lanes of warp w are threads 32 w .. 32 w + 31).
inline void merge_block(std::vector<ThreadTrace>& threads) {
  std::vector<SectorHit> warp_hits;
  std::vector<Access> warp_accesses;
  for (std::size_t first = 0; first < threads.size(); first += 32) {
    warp_hits.clear();
    warp_accesses.clear();
    const std::size_t end = std::min(threads.size(), first + 32);
    for (std::size_t t = first; t < end; ++t) {
      ThreadTrace& th = threads[t];
      for (std::size_t r = 0; r < th.traffic.size(); ++r)
        ledger.at(static_cast<int>(r)).traffic.add(th.traffic[r]);
      ledger.unregistered.add(th.unregistered);
      warp_hits.insert(warp_hits.end(), th.hits.begin(), th.hits.end());
      warp_accesses.insert(warp_accesses.end(), th.accesses.begin(), th.accesses.end());
      th.hits = {};
      th.accesses = {};
    }
    std::sort(warp_accesses.begin(), warp_accesses.end());
    warp_accesses.erase(std::unique(warp_accesses.begin(), warp_accesses.end()),
                        warp_accesses.end());
    for (const Access& a : warp_accesses) {
      (a.region < 0 ? ledger.unregistered : ledger.at(a.region).traffic).requested += a.bytes;
    }
    std::sort(warp_hits.begin(), warp_hits.end());
    warp_hits.erase(std::unique(warp_hits.begin(), warp_hits.end()), warp_hits.end());
    for (const SectorHit& h : warp_hits) {
      (h.region < 0 ? ledger.unregistered : ledger.at(h.region).traffic).sectors += 1;
    }
  }
}

}  // namespace specdec::emulation
