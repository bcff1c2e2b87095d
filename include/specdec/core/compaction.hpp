// SPDX-License-Identifier: MIT
// Compaction: the entries of a float array inside a range [lo, hi], in order, with their ids. AVX2
// permutes where the CPU has them (core/detail/simd_x86.hpp), else a branch-free scalar loop.
#pragma once

#include <cstdint>

#include "specdec/core/detail/simd_x86.hpp"

namespace specdec::detail {

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
/// the outputs may be the inputs. (AVX-512's compress measured slower than the permute table on
/// the machine of docs/backends.md.)
template <bool kPositions>
inline std::int64_t compact_between(const float* values, const std::int32_t* ids, std::int64_t n,
                                    float lo, float hi, std::int32_t* out_ids, float* out_values) {
#ifdef SPECDEC_X86_COMPACT
  if (use_x86_avx2()) {
    std::int64_t done = 0;
    const std::int64_t m =
        compact_between_avx2<kPositions>(values, ids, n, lo, hi, out_ids, out_values, &done);
    return compact_between_scalar<kPositions>(values, ids, done, n, lo, hi,
                                              {out_ids, out_values, m});
  }
#endif
  return compact_between_scalar<kPositions>(values, ids, 0, n, lo, hi, {out_ids, out_values, 0});
}

}  // namespace specdec::detail
