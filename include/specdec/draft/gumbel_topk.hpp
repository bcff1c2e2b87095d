// SPDX-License-Identifier: MIT
// Gumbel-top-k: k samples without replacement from one row, in sampling order, in O(V).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <type_traits>

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/noise.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/row_gather.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/drafting_rows.hpp"

namespace specdec {

namespace detail {

/// Strict "ranks before" on token ids by perturbed value: larger first, ties to the lower id.
struct RanksBefore {
  const float* perturbed;
  bool operator()(std::int32_t a, std::int32_t b) const {
    return ranks_before(perturbed[a], a, perturbed[b], b);
  }
};

/// Host function: moves the `k` largest perturbed values among `index[0..m)` to the front of
/// `index`, sorted decreasing (ties to the lower token id). Partial selection then a sort of k
/// entries: O(m + k log k). Returns min(k, m).
inline std::int64_t select_top_k(const float* perturbed, std::int32_t* index, std::int64_t m,
                                 std::int64_t k) {
  const auto kk = std::min(k, m);
  if (kk <= 0) return 0;
  const RanksBefore before{perturbed};
  if (kk < m) std::nth_element(index, index + (kk - 1), index + m, before);
  std::sort(index, index + kk, before);
  return kk;
}

/// Largest k up to which top-k selection scans with a bounded heap instead of nth_element.
inline constexpr std::int64_t kHeapSelectMax = 256;

/// The k best ids seen so far, by perturbed value (ties to the lower id), offered in increasing
/// id order: a heap whose top is the worst kept, one comparison for an entry that does not enter.
struct TopKHeap {
  const float* perturbed;
  std::int32_t* index;  // k entries
  std::int64_t k;
  std::int64_t size = 0;
  float threshold = kNegInf;  // the worst kept value once k are kept

  void offer(std::int32_t i) {
    const RanksBefore before{perturbed};
    if (!(perturbed[i] > threshold)) return;
    if (size < k) {
      index[size++] = i;
      std::push_heap(index, index + size, before);
      if (size == k) threshold = perturbed[index[0]];
    } else {
      std::pop_heap(index, index + size, before);
      index[size - 1] = i;
      std::push_heap(index, index + size, before);
      threshold = perturbed[index[0]];
    }
  }
  /// Sorts the kept ids decreasing and returns how many.
  std::int64_t finish() {
    std::sort_heap(index, index + size, RanksBefore{perturbed});
    return size;
  }
};

/// Host function: the ids of the `k` largest values of `perturbed[0..n)` that are > -inf, written
/// to index[0..) sorted decreasing (ties to the lower id); returns how many (<= k). Small k: one
/// scan with a bounded heap (one comparison per entry); large k: compaction then nth_element.
/// `index` holds n entries of scratch.
inline std::int64_t select_top_k_of_row(const float* perturbed, std::int64_t n, std::int64_t k,
                                        std::int32_t* index) {
  if (k <= kHeapSelectMax) {
    TopKHeap heap{perturbed, index, k};
    for (std::int64_t i = 0; i < n; ++i) heap.offer(static_cast<std::int32_t>(i));
    return heap.finish();
  }
  std::int64_t m = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (perturbed[i] > kNegInf) index[m++] = static_cast<std::int32_t>(i);
  }
  return select_top_k(perturbed, index, m, k);
}

/// perturbed[i] = gumbel_perturbed<kind>(row[i], uniforms[i]) for uniforms already in `perturbed`
/// (a row loop: packet_log is branch-free, so it vectorises).
template <RowKind kind, class T>
SPECDEC_ROW_LOOP void perturb_uniforms(const T* row, std::int64_t n, float* perturbed) {
  for (std::int64_t i = 0; i < n; ++i) perturbed[i] = gumbel_perturbed<kind>(to_float(row[i]), perturbed[i]);
}

/// perturbed[i] = the log-weight of row[i] + Gumbel(draw first_draw + i), -inf for banned entries:
/// gumbel_perturbed<kind>(row[i], uniform(first_draw + i)), vectorised.
template <RowKind kind, class T, class Source>
void perturb_row_host(const T* row, std::int64_t n, const Source& source, std::uint32_t first_draw,
                      float* perturbed) {
  if constexpr (std::is_same_v<Source, RandomStream>) {
    fill_uniforms(source, first_draw, std::span<float>(perturbed, static_cast<std::size_t>(n)));
  } else {
    for (std::int64_t i = 0; i < n; ++i) {
      perturbed[i] = static_cast<float>(source.uniform(first_draw + static_cast<std::uint32_t>(i)));
    }
  }
  perturb_uniforms<kind>(row, n, perturbed);
}

/// An upper bound of gumbel_perturbed<kind>(x, u) without a logarithm: -log(-log u) <= -log(1 - u)
/// <= -e ln 2 for 1 - u = m 2^e, m in [1, 2) (1 - u is exact: u is a multiple of 2^-24); a
/// probability's log is below (e + 1) ln 2 likewise. The caller leaves room for the rounding of
/// the exact value. The integer multiples of ln 2 are exact products (ln 2 rounded to 14 bits, up
/// for a positive multiple, down for a negative one): a fused multiply-add gives the same bits.
template <RowKind kind>
SPECDEC_ENTRY_INLINE float gumbel_bound(float x, float u) {
  constexpr float kLn2Up = 11357.0f / 16384.0f, kLn2Down = 11356.0f / 16384.0f;
  const auto gap_exponent = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(1.0f - u) >> 23);
  if constexpr (kind == RowKind::kProbabilities) {
    // (A zero gets the bound of the smallest exponent: its exact value, -inf, never enters.)
    const auto exponent = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(x) >> 23);
    const std::int32_t multiple = (exponent - 126) + (127 - gap_exponent);
    return static_cast<float>(multiple) * (multiple < 0 ? kLn2Down : kLn2Up);
  } else {
    return x + static_cast<float>(127 - gap_exponent) * kLn2Up;
  }
}

/// bounds[i] = gumbel_bound<kind>(row[i], uniforms[i]): a row loop in the copy compiled for the
/// lanes the CPU runs (run_on_lanes); every target gives the same bits.
template <RowKind kind, class T>
struct GumbelBounds {
  static void loop(const T* row, const float* uniforms, std::int64_t n, float* bounds) {
    for (std::int64_t i = 0; i < n; ++i)
      bounds[i] = gumbel_bound<kind>(to_float(row[i]), uniforms[i]);
  }
  static void run_scalar(const T* row, const float* uniforms, std::int64_t n, float* bounds) {
    loop(row, uniforms, n, bounds);
  }
  template <class Lanes>
  static void run(const T* row, const float* uniforms, std::int64_t n, float* bounds) {
    loop(row, uniforms, n, bounds);
  }
};

/// select_top_k_of_row(perturb_row_host(row)) for k <= kHeapSelectMax and draws from a stream,
/// without most logarithms: the row is taken a chunk at a time, and once k entries are kept an
/// entry's perturbed value (its two or three logarithms) is computed only when its bound
/// (gumbel_bound, with room for rounding) reaches the k-th value so far. The same tokens, and the
/// perturbed values of the kept entries bit for bit; perturbed[i] is written for those only.
template <RowKind kind, class T>
std::int64_t gumbel_top_k_bounded(const T* row, std::int64_t n, std::int64_t k,
                                  const RandomStream& source, std::uint32_t first_draw,
                                  float* perturbed, std::int32_t* index) {
  constexpr std::int64_t kChunk = 1024;
  float uniforms[kChunk], bounds[kChunk + kScratchSlack], unused[kChunk + kScratchSlack];
  std::int32_t survivors[kChunk + kScratchSlack];
  TopKHeap heap{perturbed, index, k};
  const LaneTarget target = host_lane_target();
  for (std::int64_t b = 0; b < n; b += kChunk) {
    const std::int64_t count = std::min(kChunk, n - b);
    const auto first = first_draw + static_cast<std::uint32_t>(b);
    if (heap.size < k) {
      // Fewer than k kept: every entry of the chunk is a candidate.
      perturb_row_host<kind>(row + b, count, source, first, perturbed + b);
      for (std::int64_t i = b; i < b + count; ++i) heap.offer(static_cast<std::int32_t>(i));
      continue;
    }
    fill_uniforms(source, first, std::span<float>(uniforms, static_cast<std::size_t>(count)));
    run_on_lanes<GumbelBounds<kind, T>>(target, row + b, static_cast<const float*>(uniforms), count,
                                        static_cast<float*>(bounds));
    // The exact value is within 1e-5 of the real one (logarithms and a float sum).
    const float gate = heap.threshold - (1e-3f + 1e-5f * std::abs(heap.threshold));
    const std::int64_t m = gather_at_least<true>(bounds, count, gate, survivors, unused);
    for (std::int64_t j = 0; j < m; ++j) {
      const std::int64_t i = b + survivors[j];
      perturbed[i] = gumbel_perturbed<kind>(to_float(row[i]), uniforms[survivors[j]]);
      heap.offer(static_cast<std::int32_t>(i));
    }
  }
  return heap.finish();
}

/// The buffers of Gumbel-top-k over a row of n entries: scratch `perturbed` and `index` (n
/// entries each), and the outputs `tokens` and `values` (k entries each; values may be nullptr).
struct GumbelTopKBuffers {
  float* perturbed = nullptr;
  std::int32_t* index = nullptr;
  Token* tokens = nullptr;
  float* values = nullptr;
};

/// The scratch of GumbelTopKBuffers for rows of `vocab` entries, from `workspace` (the outputs
/// are the caller's to set).
inline GumbelTopKBuffers take_gumbel_top_k_scratch(Workspace& workspace, std::int64_t vocab) {
  const auto n = static_cast<std::size_t>(vocab);
  GumbelTopKBuffers out;
  out.perturbed = workspace.take<float>(n).data();
  out.index = workspace.take<std::int32_t>(n).data();
  return out;
}

/// Gumbel-top-k over one row without validation: writes up to k tokens (sampling order) and
/// their perturbed values (log-weight + Gumbel, decreasing) into `out` and returns how many.
template <RowKind kind, class T, class Source>
std::int64_t gumbel_top_k_row(const T* row, std::int64_t n, std::int64_t k, const Source& source,
                              std::uint32_t first_draw, const GumbelTopKBuffers& out) {
  const auto [perturbed, index, tokens, values] = out;
  std::int64_t kk = 0;
  if constexpr (std::is_same_v<Source, RandomStream>) {
    if (k <= kHeapSelectMax) {
      kk = gumbel_top_k_bounded<kind>(row, n, k, source, first_draw, perturbed, index);
    }
  }
  if (!std::is_same_v<Source, RandomStream> || k > kHeapSelectMax) {
    perturb_row_host<kind>(row, n, source, first_draw, perturbed);
    kk = select_top_k_of_row(perturbed, n, k, index);
  }
  for (std::int64_t j = 0; j < kk; ++j) {
    tokens[j] = static_cast<Token>(index[j]);
    if (values != nullptr) values[j] = perturbed[index[j]];
  }
  return kk;
}

inline void check_sample_count(std::string_view name, std::int64_t k, std::int64_t vocab) {
  if (k < 1 || k > vocab) {
    fail(name, "{} must be in [1, {}] (the vocabulary size)", k, vocab);
  }
}

}  // namespace detail

/// Scratch bytes Gumbel-top-k needs for one row of `vocab` entries.
inline std::size_t gumbel_top_k_workspace_size(std::int64_t vocab) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(vocab, 0));
  return Workspace::round_up(n * sizeof(float)) + Workspace::round_up(n * sizeof(std::int32_t));
}

namespace detail {

/// The validated body shared by both public forms; the row itself was checked by the caller.
template <RowKind kind, class T, UniformSource Source>
std::int64_t gumbel_top_k_checked(std::span<const T> row, std::int64_t k, const Source& source,
                                  std::span<Token> tokens, Workspace& workspace,
                                  std::span<float> values, std::uint32_t first_draw) {
  const auto n = static_cast<std::int64_t>(row.size());
  check_sample_count("k", k, n);
  if (static_cast<std::int64_t>(tokens.size()) < k) {
    fail("tokens", "has {} elements, needs k = {}", tokens.size(), k);
  }
  if (!values.empty() && static_cast<std::int64_t>(values.size()) < k) {
    fail("values", "has {} elements, needs k = {} (or none)", values.size(), k);
  }
  auto scope = workspace.scope();
  auto perturbed = workspace.take<float>(static_cast<std::size_t>(n));
  auto index = workspace.take<std::int32_t>(static_cast<std::size_t>(n));
  return gumbel_top_k_row<kind>(row.data(), n, k, source, first_draw,
                                {.perturbed = perturbed.data(),
                                 .index = index.data(),
                                 .tokens = tokens.data(),
                                 .values = values.empty() ? nullptr : values.data()});
}

}  // namespace detail

/// Draws up to `k` tokens without replacement from the distribution proportional to
/// exp(log_weights) (a raw or warped row of log-probabilities or logits; -inf = banned) and writes
/// them to `tokens` in sampling order: the first is a sample from the row, the second a sample
/// from the row without the first, and so on (Gumbel-top-k). Returns how many were drawn:
/// min(k, number of entries > -inf). If `values` is non-empty it receives the perturbed values
/// log_weight + Gumbel, decreasing. Draws: uniform `first_draw + x` perturbs token x.
/// Throws specdec::Error if k is outside [1, V], a span is too short or the row is invalid.
template <class T = float, UniformSource Source>
std::int64_t gumbel_top_k(std::type_identity_t<std::span<const T>> log_weights, std::int64_t k,
                          const Source& source, std::span<Token> tokens, Workspace& workspace,
                          std::span<float> values = {}, std::uint32_t first_draw = 0) {
  check_logits_row<T>("log_weights", log_weights);
  return detail::gumbel_top_k_checked<RowKind::kLogWeights, T>(log_weights, k, source, tokens,
                                                               workspace, values, first_draw);
}

/// As gumbel_top_k, from a (raw or warped) probability row: tokens with probability 0 are never
/// drawn. The row must be a probability distribution (sum 1 within kProbabilitySumTolerance).
template <class T = float, UniformSource Source>
std::int64_t gumbel_top_k_probabilities(std::type_identity_t<std::span<const T>> probabilities,
                                        std::int64_t k, const Source& source,
                                        std::span<Token> tokens, Workspace& workspace,
                                        std::span<float> values = {},
                                        std::uint32_t first_draw = 0) {
  check_probability_row<T>("probabilities", probabilities);
  return detail::gumbel_top_k_checked<RowKind::kProbabilities, T>(probabilities, k, source, tokens,
                                                                  workspace, values, first_draw);
}

}  // namespace specdec
