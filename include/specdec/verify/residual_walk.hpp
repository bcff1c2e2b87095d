// SPDX-License-Identifier: MIT
// The residual walk of multi-round (SpecInfer) and recursive (RRS) rejection sampling, and the row
// operations it is made of: the verdict, the residual floor, [source - scale * draft]+, and
// sampling a row by the inverse-CDF rule. Written once for the host and the CUDA tree kernel: the walk is templated on
// the rule and on a row-operations policy (HostRows here: plain loops; the kernel's BlockRows:
// block-wide loops, reductions and barriers). Plain SPECDEC_HOST_DEVICE code (no Eigen, no fmt).
#pragma once

#include <cstdint>

#include "specdec/config.hpp"
#include "specdec/core/blocked_sum.hpp"
#include "specdec/core/inverse_cdf.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/scalar.hpp"
#include "specdec/core/token.hpp"

namespace specdec {

/// The outcome of verifying an ordered list of candidates at one node.
struct NodeVerdict {
  std::int32_t accepted;  // index of the accepted candidate, or -1 when every one was rejected
  Token token;            // the accepted candidate, or the correction token
  friend bool operator==(const NodeVerdict&, const NodeVerdict&) = default;
};

/// A residual whose mass (relative to the row it came from) is below this is treated as empty:
/// the verifier falls back to the current target-side row (docs/algorithms.md §2.5). RRS also
/// floors the draft mass not yet removed at it.
inline constexpr double kResidualFloor = 1e-30;

namespace detail {

/// max(x, 0) without a libm call (fmaxf is an out-of-line call unless NaNs are ruled out).
SPECDEC_HOST_DEVICE float positive_part(float x) { return x > 0.0f ? x : 0.0f; }

/// The accept test of a candidate x, never a division: u * draft(x) * scale < target(x), with
/// `scale` the mass of a scaled residual row (1 for the first candidate) and `target` read on the
/// same scale. Every verifier's test on both backends.
SPECDEC_HOST_DEVICE bool accepts(float u, float draft, float scale, float target) {
  return u * draft * scale < target;
}

/// One residual entry [source - scale * draft]+, the product rounded on its own (nvcc would
/// otherwise fuse it into the subtraction), so every backend computes the same entries.
SPECDEC_HOST_DEVICE float scaled_residual(float source, float scale, float draft) {
#if defined(__CUDA_ARCH__)
  return positive_part(source - __fmul_rn(scale, draft));
#else
  return positive_part(source - scale * draft);
#endif
}

/// scratch = [source - scale * draft]+ when its mass is at least `floor_mass`; returns that mass,
/// or -1 (scratch untouched) when it is below. `source` may alias `scratch`. Two passes, so the
/// current row survives a fallback.
template <class S, class T>
SPECDEC_HOST_DEVICE double residual_update(const S* source, const T* draft, float scale,
                                           std::int64_t n, float* scratch, double floor_mass) {
  const auto positive = [=](std::int64_t i) {
    return scaled_residual(to_float(source[i]), scale, to_float(draft[i]));
  };
  const double mass = blocked_sum(positive, 0, n);
  if (!(mass >= floor_mass) || mass <= 0.0) return -1.0;
  for (std::int64_t i = 0; i < n; ++i) scratch[i] = positive(i);
  return mass;
}

/// scratch = source (as float); returns the sum.
template <class S>
SPECDEC_HOST_DEVICE double copy_row(const S* source, std::int64_t n, float* scratch) {
  for (std::int64_t i = 0; i < n; ++i) scratch[i] = to_float(source[i]);
  return blocked_sum([=](std::int64_t i) { return scratch[i]; }, 0, n);
}

/// A row held as its positive entries: values[j] at ids[j] (ascending, j < m), +0 elsewhere in
/// [0, n). Its sums and draws are blocked_sum's and sample_row's on the written row bit for bit
/// (the +0 entries left out change no sum), without writing it.
struct SparseRow {
  const std::int32_t* ids;
  const float* values;
  std::int64_t m;
  std::int64_t n;

  static constexpr int kLanes = 8;  // blocked_sum's lanes and block
  static constexpr std::int64_t kBlock = 1024;

  /// blocked_sum's float sum of block [b, b + kBlock), whose entries are [first, last): the tail
  /// entries first, then the lanes in order.
  float block_sum(std::int64_t b, std::int64_t first, std::int64_t last) const {
    const std::int64_t e = b + kBlock < n ? b + kBlock : n;
    const std::int64_t tail = b + (e - b) / kLanes * kLanes;
    float lanes[kLanes] = {};
    float block = 0.0f;
    for (std::int64_t j = first; j < last; ++j) {
      if (ids[j] >= tail) {
        block += values[j];
      } else {
        lanes[(ids[j] - b) % kLanes] += values[j];
      }
    }
    for (float lane : lanes) block += lane;
    return block;
  }
  /// Calls visit(b, first, last) for each block in order until it returns true.
  template <class Visit>
  void blocks(const Visit& visit) const {
    std::int64_t first = 0;
    for (std::int64_t b = 0; b < n; b += kBlock) {
      std::int64_t last = first;
      while (last < m && ids[last] < b + kBlock) ++last;
      if (visit(b, first, last)) return;
      first = last;
    }
  }
  /// blocked_sum over the row.
  double sum() const {
    double total = 0.0;
    blocks([&](std::int64_t b, std::int64_t first, std::int64_t last) {
      total += block_sum(b, first, last);
      return false;
    });
    return total;
  }
  /// sample_row(row, n, u).
  Token sample(float u) const {
    const double threshold = u * sum();
    double running = 0.0;
    Token found = -1;
    blocks([&](std::int64_t b, std::int64_t first, std::int64_t last) {
      const double block = block_sum(b, first, last);
      if (running + block <= threshold && b + kBlock < n) {
        running += block;
        return false;
      }
      for (std::int64_t j = first; j < last; ++j) {  // inverse_cdf_scan over the block
        if (values[j] > 0.0f) {
          running += values[j];
          if (running > threshold) {
            found = static_cast<Token>(ids[j]);
            return true;
          }
        }
      }
      return false;
    });
    if (found >= 0) return found;
    for (std::int64_t j = m - 1; j >= 0; --j) {  // last_positive
      if (values[j] > 0.0f) return static_cast<Token>(ids[j]);
    }
    return 0;
  }
};

/// Entries a FilledRow computes at a time: a group of blocked_sum's blocks.
inline constexpr std::int64_t kFilledSpan = kBlockedSumGroup * kBlockedSumBlock;

/// A row that is not written: fill(b, e, out) computes its entries [b, e) into out. Its sum and
/// draws are blocked_sum's and sample_row's on the written row bit for bit: each block of
/// blocked_sum is computed once for its sum (kept in block_sums; kSpan entries at a time, so
/// block_sums adds whole groups), and the block a draw falls in once more for its scan.
template <class Fill>
struct FilledRow {
  Fill fill;
  std::int64_t n;
  float* buffer;       // kSpan floats
  float* block_sums;   // one per block
  static constexpr std::int64_t kBlock = kBlockedSumBlock;  // blocked_sum's and sample_row's
  static constexpr std::int64_t kSpan = kFilledSpan;

  std::int64_t blocks() const { return (n + kBlock - 1) / kBlock; }
  std::int64_t end(std::int64_t k) const { return (k + 1) * kBlock < n ? (k + 1) * kBlock : n; }
  const float* filled(std::int64_t k) const {
    fill(k * kBlock, end(k), buffer);
    return buffer;
  }
  /// blocked_sum over the row; keeps the block sums for sample().
  double sum() const {
    double total = 0.0;
    for (std::int64_t b = 0; b < n; b += kSpan) {
      const std::int64_t e = b + kSpan < n ? b + kSpan : n;
      fill(b, e, buffer);
      const float* values = buffer;
      float* sums = block_sums + b / kBlock;
      const int count = detail::block_sums([=](std::int64_t i) { return values[i]; }, 0, e - b, sums);
      for (int k = 0; k < count; ++k) total += sums[k];
    }
    return total;
  }
  /// sample_row(row, n, u) given total = sum().
  Token sample(float u, double total) const {
    const double threshold = u * total;
    double running = 0.0;
    for (std::int64_t k = 0; k < blocks(); ++k) {
      if (running + block_sums[k] <= threshold && end(k) < n) {
        running += block_sums[k];
        continue;
      }
      const float* values = filled(k);
      const std::int64_t found = inverse_cdf_scan([=](std::int64_t i) { return values[i]; }, 0,
                                                  end(k) - k * kBlock, running, threshold);
      if (found >= 0) return static_cast<Token>(k * kBlock + found);
    }
    // last_positive: a block holding a positive entry has a positive sum.
    for (std::int64_t k = blocks() - 1; k >= 0; --k) {
      if (!(block_sums[k] > 0.0f)) continue;
      const float* values = filled(k);
      return static_cast<Token>(k * kBlock + last_positive([=](std::int64_t i) { return values[i]; },
                                                           0, end(k) - k * kBlock, 0));
    }
    return 0;
  }
};

template <class Fill>
FilledRow(Fill, std::int64_t, float*, float*) -> FilledRow<Fill>;

/// rejection_row's correction after a rejection (draw 1 of `uniforms`) when the target row is
/// positive only at ids[0, m): residual[j] = [target[j] - draft[j]]+ over those entries, drawn
/// from when its mass reaches the floor, else the target row itself. `residual` holds m floats.
template <UniformSource U>
Token rejection_correction_sparse(const std::int32_t* ids, const float* target, const float* draft,
                                  std::int64_t m, std::int64_t n, const U& uniforms,
                                  float* residual) {
  for (std::int64_t j = 0; j < m; ++j) residual[j] = scaled_residual(target[j], 1.0f, draft[j]);
  const SparseRow rest{ids, residual, m, n};
  const double mass = rest.sum();
  const float u = uniforms.uniform(1u);
  if (!(mass >= kResidualFloor) || mass <= 0.0) return SparseRow{ids, target, m, n}.sample(u);
  return rest.sample(u);
}

/// rejection_row's correction after a rejection (draw 1 of `uniforms`) from rows that are not
/// written: the residual [target - draft]+ when its mass reaches the floor, else the target row.
template <class Residual, class Target, UniformSource U>
Token rejection_correction_filled(const FilledRow<Residual>& residual,
                                  const FilledRow<Target>& target, const U& uniforms) {
  const double mass = residual.sum();
  const float u = uniforms.uniform(1u);
  if (!(mass >= kResidualFloor) || mass <= 0.0) return target.sample(u, target.sum());
  return residual.sample(u, mass);
}

/// The residual walk's row operations on the host: plain loops over the row.
struct HostRows {
  template <class S, class T>
  SPECDEC_HOST_DEVICE double residual_update(const S* source, const T* draft, float scale,
                                             std::int64_t n, float* scratch,
                                             double floor_mass) const {
    return detail::residual_update(source, draft, scale, n, scratch, floor_mass);
  }
  template <class S>
  SPECDEC_HOST_DEVICE double copy_row(const S* source, std::int64_t n, float* scratch) const {
    return detail::copy_row(source, n, scratch);
  }
  template <class S>
  SPECDEC_HOST_DEVICE Token sample_row(const S* row, std::int64_t n, float u) const {
    return detail::sample_row(row, n, u);
  }
  /// Runs `section` (work on the scratch row that one thread does) and returns its result.
  template <class F>
  SPECDEC_HOST_DEVICE double one_thread(const F& section) const {
    return section();
  }
};

/// Which residual walk: i.i.d. candidates (multi-round) or candidates without replacement (RRS).
enum class ResidualRule { kMultiRound, kRecursive };

/// Verifies `count` candidates drawn from the warped `draft` row against the warped `target` row.
/// Multi-round (i.i.d. candidates): p_1 = target; candidate k is accepted iff
/// u_k * draft(x_k) < p_k(x_k); otherwise p_(k+1) = norm([p_k - draft]+).
/// Recursive (distinct candidates in drawing order): q_1 = draft, q_(k+1) = norm(q_k without x_k),
/// p_(k+1) = norm([p_k - q_k]+); accepted iff u_k * q_k(x_k) < p_k(x_k). q_k is never
/// materialised (it is draft / (1 - removed mass) off the removed tokens).
/// All rejected: the correction is drawn from p_(count+1). Residuals are formed lazily (accepting
/// the first candidate reads two entries); a residual below the floor keeps the current row.
/// Draws: draw k (k < count) tests candidate k; draw `count` draws the correction.
/// `scratch` holds `vocab` floats.
/// Rows, candidates and scratch are pointers, or the CUDA kernel's global-memory views.
template <ResidualRule rule, class Rows, class Row, class Candidates, class Scratch,
          UniformSource U>
SPECDEC_HOST_DEVICE NodeVerdict residual_walk(const Rows& rows, Row target, Row draft,
                                              std::int64_t vocab, Candidates candidates,
                                              std::int32_t count, const U& uniforms,
                                              Scratch scratch) {
  constexpr bool kRecursive = rule == ResidualRule::kRecursive;
  bool materialised = false;  // scratch holds p_k * mass once true
  double mass = 1.0;          // scale of scratch
  double remaining = 1.0;     // recursive: draft mass not yet removed
  for (std::int32_t k = 0; k < count; ++k) {
    const Token x = candidates[k];
    const float px = materialised ? scratch[x] : to_float(target[x]);
    const float qx = to_float(draft[x]);
    // Recursive: u * q_k(x) < p_k(x)  <=>  u * draft(x) * mass < scratch(x) * remaining.
    if (accepts(uniforms.uniform(static_cast<std::uint32_t>(k)), qx, static_cast<float>(mass),
                kRecursive ? px * static_cast<float>(remaining) : px)) {
      return {k, x};
    }
    // [p_k - q_k]+ scaled by mass: [scratch - (mass / remaining) * draft]+ (remaining = 1 for
    // multi-round).
    const float scale = static_cast<float>(kRecursive ? mass / remaining : mass);
    double next;
    if (!materialised) {
      next = rows.residual_update(target, draft, scale, vocab, scratch, kResidualFloor);
      if (next < 0.0) next = rows.copy_row(target, vocab, scratch);
      materialised = true;
    } else {
      next = rows.residual_update(scratch, draft, scale, vocab, scratch, kResidualFloor * mass);
      if (next < 0.0) next = mass;
    }
    if constexpr (kRecursive) {
      // Removed tokens have no target-side mass left (their q_k is 0 from now on; a rejected
      // candidate had p_k < q_k, so this only clears rounding residue).
      next = rows.one_thread([&] {
        double left = next;
        for (std::int32_t j = 0; j <= k; ++j) {
          left -= scratch[candidates[j]];
          scratch[candidates[j]] = 0.0f;
        }
        return left;
      });
      // Nothing left off the removed tokens: fall back to the target row.
      if (!(next > 0.0)) next = rows.copy_row(target, vocab, scratch);
      remaining -= qx;
      if (remaining < kResidualFloor) remaining = kResidualFloor;
    }
    mass = next;
  }
  const float u = uniforms.uniform(static_cast<std::uint32_t>(count));
  return {-1, materialised ? rows.sample_row(scratch, vocab, u) : rows.sample_row(target, vocab, u)};
}

}  // namespace detail
}  // namespace specdec
