// SPDX-License-Identifier: MIT
// Compaction: the entries of a float array inside a range [lo, hi], in order, with their ids, and
// the selection of the few at least a gate. AVX2 permutes and AVX2 or AVX-512 compares where the
// CPU has them (core/detail/simd_x86.hpp), chosen at run time as Philox's lanes are (so a build
// for the baseline x86-64 reaches them, and SPECDEC_LANES narrows them), else branch-free scalar
// loops. Every target gives the same entries in the same order.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <utility>

#include "specdec/core/detail/simd_x86.hpp"
#include "specdec/core/philox_lanes.hpp"

namespace specdec::detail {

/// The instructions a compaction runs on.
enum class CompactTarget { kScalar, kAvx2, kAvx512 };

/// The compaction target of a lane target (core/philox_lanes.hpp): scalar below AVX2.
constexpr CompactTarget compact_target_of(LaneTarget target) {
  switch (target) {
    case LaneTarget::kAvx2: return CompactTarget::kAvx2;
    case LaneTarget::kAvx512: return CompactTarget::kAvx512;
    default: return CompactTarget::kScalar;
  }
}

/// The compaction targets this CPU runs, narrowest first: scalar, then AVX2 and AVX-512 where the
/// x86 paths are on (use_x86_avx2) and the CPU has them, whatever compiler built the code.
inline std::span<const CompactTarget> available_compact_targets() {
  static const auto targets = [] {
    std::array<CompactTarget, 3> list{CompactTarget::kScalar};
    std::size_t n = 1;
#if defined(SPECDEC_X86_COMPACT)
    if (use_x86_avx2()) {
      list[n++] = CompactTarget::kAvx2;
      if (__builtin_cpu_supports("avx512f")) list[n++] = CompactTarget::kAvx512;
    }
#endif
    return std::pair{list, n};
  }();
  return std::span<const CompactTarget>(targets.first.data(), targets.second);
}

/// The target the row code's compactions run on: the widest available, narrowed to
/// host_lane_target()'s when SPECDEC_LANES names one (scalar for scalar or sse2). Asked once.
inline CompactTarget host_compact_target() {
  static const CompactTarget target = [] {
    const CompactTarget widest = available_compact_targets().back();
    const char* chosen = std::getenv("SPECDEC_LANES");
    if (chosen == nullptr || *chosen == '\0') return widest;
    return std::min(widest, compact_target_of(host_lane_target()));
  }();
  return target;
}

/// Where compacted entries go: ids and values, `count` of them written so far.
struct Compacted {
  std::int32_t* ids;
  float* values;
  std::int64_t count;
};

/// The entries of values[begin, n) inside [lo, hi] with their ids (their positions when
/// kPositions), in order, appended at out.ids[out.count] / out.values[out.count]; returns the new
/// count. The outputs may be the inputs (the write position never passes the read position).
/// Writes stay within the first n entries.
template <bool kPositions>
std::int64_t compact_between_scalar(const float* values, const std::int32_t* ids,
                                    std::int64_t begin, std::int64_t n, float lo, float hi,
                                    Compacted out) {
  std::int32_t* out_ids = out.ids;
  float* out_values = out.values;
  std::int64_t m = out.count;
  const float* v = values + begin;
  const std::int32_t* id = kPositions ? nullptr : ids + begin;
  for (std::int64_t k = 0; k < n - begin; ++k) {
    out_ids[m] = kPositions ? static_cast<std::int32_t>(begin + k) : id[k];
    out_values[m] = v[k];
    m += v[k] >= lo && v[k] <= hi ? 1 : 0;
  }
  return m;
}

/// The entries of values[0, n) inside [lo, hi] with their ids (positions when kPositions), in
/// order, into out_ids / out_values; returns their count. Up to 7 entries past it may be written;
/// the outputs may be the inputs. AVX-512 targets run the AVX2 permutes (AVX-512's compress
/// measured slower than the permute table on the machine of docs/backends.md).
template <bool kPositions>
inline std::int64_t compact_between(const float* values, const std::int32_t* ids, std::int64_t n,
                                    float lo, float hi, std::int32_t* out_ids, float* out_values,
                                    CompactTarget target = host_compact_target()) {
#ifdef SPECDEC_X86_COMPACT
  if (target != CompactTarget::kScalar) {
    std::int64_t done = 0;
    const std::int64_t m =
        compact_between_avx2<kPositions>(values, ids, n, lo, hi, out_ids, out_values, &done);
    return compact_between_scalar<kPositions>(values, ids, done, n, lo, hi,
                                              {out_ids, out_values, m});
  }
#else
  (void)target;  // one target without x86 lanes
#endif
  return compact_between_scalar<kPositions>(values, ids, 0, n, lo, hi, {out_ids, out_values, 0});
}

/// first + the positions of the entries of values[0, n) at least `lo`, ascending, into ids;
/// returns their count. For a gate that keeps few entries (a few in a hundred); up to 4 entries
/// past the count may be written.
inline std::int64_t select_at_least(const float* values, std::int64_t n, float lo,
                                    std::int32_t* ids, std::int32_t first,
                                    CompactTarget target = host_compact_target()) {
#ifdef SPECDEC_X86_COMPACT
  if (target == CompactTarget::kAvx512) return select_at_least_avx512(values, n, lo, ids, first);
  if (target == CompactTarget::kAvx2) return select_at_least_avx2(values, n, lo, ids, first);
#else
  (void)target;  // one target without x86 lanes
#endif
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    ids[m] = first + static_cast<std::int32_t>(i);
    m += values[i] >= lo ? 1 : 0;
  }
  return m;
}

}  // namespace specdec::detail
