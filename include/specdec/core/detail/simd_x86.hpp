// SPDX-License-Identifier: MIT
// The x86 intrinsics of the row code, and nothing else: compactions (keep the entries inside a
// range, in order) by AVX2 permutes, since a compiler does not vectorise a loop whose store
// position depends on the data; selections of the few entries above a gate by AVX2 or AVX-512
// compares. Off x86 (or under nvcc) this header defines only use_x86_avx2.
// IWYU pragma: private
#pragma once

#include <cstdint>

#if defined(__GNUC__) && !defined(__CUDACC__) && defined(__x86_64__)
#include <immintrin.h>
#define SPECDEC_X86_COMPACT 1
#endif

namespace specdec::detail {

/// Whether the x86 AVX2 paths run: always when the build targets AVX2, otherwise when the CPU has
/// it (as the row-loop clones pick), never with SPECDEC_NO_CPU_CLONES or off x86.
inline bool use_x86_avx2() {
#if defined(SPECDEC_X86_COMPACT) && defined(__AVX2__)
  return true;
#elif defined(SPECDEC_X86_COMPACT) && !defined(SPECDEC_NO_CPU_CLONES)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

#ifdef SPECDEC_X86_COMPACT
/// For each 8-bit keep mask, the lanes kept, packed to the front.
struct CompactTable {
  alignas(32) std::int32_t lanes[256][8];
};
constexpr CompactTable make_compact_table() {
  CompactTable t{};
  for (int mask = 0; mask < 256; ++mask) {
    int k = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if ((mask >> lane) & 1) t.lanes[mask][k++] = lane;
    }
  }
  return t;
}
inline constexpr CompactTable kCompactTable = make_compact_table();

/// The compaction of core/compaction.hpp over the whole groups of 8 of the first n entries: the
/// entries of `values` inside [lo, hi] with their ids (their positions when kPositions), in order.
/// Returns their count; *done = the entries read (n rounded down to 8), the caller takes the rest.
/// Each store writes 8 lanes: up to 7 entries past the count may be written.
template <bool kPositions>
[[gnu::target("avx2,popcnt")]] inline std::int64_t compact_between_avx2(
    const float* values, const std::int32_t* ids, std::int64_t n, float lo, float hi,
    std::int32_t* out_ids, float* out_values, std::int64_t* done) {
  const __m256 low = _mm256_set1_ps(lo), high = _mm256_set1_ps(hi);
  const __m256i lane_offsets = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  std::int64_t m = 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(values + i);
    const int mask = _mm256_movemask_ps(
        _mm256_and_ps(_mm256_cmp_ps(v, low, _CMP_GE_OQ), _mm256_cmp_ps(v, high, _CMP_LE_OQ)));
    const __m256i id = kPositions
                           ? _mm256_add_epi32(lane_offsets, _mm256_set1_epi32(static_cast<int>(i)))
                           : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids + i));
    const __m256i lanes =
        _mm256_load_si256(reinterpret_cast<const __m256i*>(kCompactTable.lanes[mask]));
    _mm256_storeu_ps(out_values + m, _mm256_permutevar8x32_ps(v, lanes));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_ids + m),
                        _mm256_permutevar8x32_epi32(id, lanes));
    m += __builtin_popcount(static_cast<unsigned>(mask));
  }
  *done = i;
  return m;
}

/// Appends first + base + the set bits of `word` to ids[m...], ascending; returns the new count.
/// Four bits are taken without a branch (ids[m .. m + 3] may be written), the rest one by one.
[[gnu::always_inline]] inline std::int64_t append_set_bits(std::uint64_t word, std::int64_t base,
                                                           std::int32_t first, std::int32_t* ids,
                                                           std::int64_t m) {
  for (int k = 0; k < 4; ++k) {
    ids[m] = first + static_cast<std::int32_t>(base + __builtin_ctzll(word | (1ull << 63)));
    m += word != 0 ? 1 : 0;
    word &= word - 1;
  }
  while (word != 0) {  // more than four in 64: rare
    ids[m++] = first + static_cast<std::int32_t>(base + __builtin_ctzll(word));
    word &= word - 1;
  }
  return m;
}

/// The positions of values[from, n) at least `lo`, one at a time (the tail of the vector loops).
[[gnu::always_inline]] inline std::int64_t append_at_least(const float* values, std::int64_t from,
                                                           std::int64_t n, float lo,
                                                           std::int32_t first, std::int32_t* ids,
                                                           std::int64_t m) {
  for (std::int64_t i = from; i < n; ++i) {
    ids[m] = first + static_cast<std::int32_t>(i);
    m += values[i] >= lo ? 1 : 0;
  }
  return m;
}

/// The positions of the entries of `values` at least `lo`, ascending, when few are (a few in a
/// hundred): a 64-bit mask per 64 entries, whose set bits are taken four at a time without a
/// branch (a compaction of every 8 entries, or a branch on each, costs more when most are empty
/// and the data is random). Returns their count; ids[count .. count + 3] may be written.
[[gnu::target("avx2,popcnt")]] inline std::int64_t select_at_least_avx2(const float* values,
                                                                        std::int64_t n, float lo,
                                                                        std::int32_t* ids,
                                                                        std::int32_t first = 0) {
  const __m256 low = _mm256_set1_ps(lo);
  std::int64_t m = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    std::uint64_t word = 0;
    for (int k = 0; k < 8; ++k) {
      const __m256 v = _mm256_loadu_ps(values + i + 8 * k);
      word |= static_cast<std::uint64_t>(
                  static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(v, low, _CMP_GE_OQ))))
              << (8 * k);
    }
    m = append_set_bits(word, i, first, ids, m);
  }
  return append_at_least(values, i, n, lo, first, ids, m);
}

/// select_at_least_avx2 with AVX-512's compares into mask registers: four compares and no
/// movemask per 64 entries.
[[gnu::target("avx512f,popcnt")]] inline std::int64_t select_at_least_avx512(
    const float* values, std::int64_t n, float lo, std::int32_t* ids, std::int32_t first = 0) {
  const __m512 low = _mm512_set1_ps(lo);
  std::int64_t m = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    std::uint64_t word = 0;
    for (int k = 0; k < 4; ++k) {
      const __m512 v = _mm512_loadu_ps(values + i + 16 * k);
      word |= static_cast<std::uint64_t>(_mm512_cmp_ps_mask(v, low, _CMP_GE_OQ)) << (16 * k);
    }
    m = append_set_bits(word, i, first, ids, m);
  }
  return append_at_least(values, i, n, lo, first, ids, m);
}
#endif

}  // namespace specdec::detail
