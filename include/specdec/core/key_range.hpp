// SPDX-License-Identifier: MIT
// The check of a row of logits as it is read: the largest and smallest order keys of its entries
// (an integer reduction, which vectorises at any ISA level), from which its largest logit and
// whether it holds a NaN or +inf follow.
#pragma once

#include <cstdint>
#include <limits>

#include "specdec/core/numerics.hpp"
#include "specdec/core/order_key.hpp"
#include "specdec/core/row_loop.hpp"

namespace specdec::detail {

/// The largest and smallest signed_order_key of `count` entries, into (best, worst).
template <class T>
SPECDEC_ENTRY_INLINE void key_range(const T* logits, std::int64_t count, std::int32_t& best,
                                    std::int32_t& worst) {
  std::int32_t hi = best, lo = worst;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int32_t key = signed_order_key(to_float(logits[i]));
    hi = key > hi ? key : hi;
    lo = key < lo ? key : lo;
  }
  best = hi;
  worst = lo;
}

/// key_range over a tile or a row (a row loop: compiled for the CPU's vector width).
template <class T>
SPECDEC_ROW_LOOP void add_key_range(const T* logits, std::int64_t count, std::int32_t& best,
                                    std::int32_t& worst) {
  key_range(logits, count, best, worst);
}

/// The extreme keys of the entries read (signed_order_key): the row's largest logit, and whether
/// it holds a NaN or +inf (a key above +inf's or, negative, below -inf's).
struct KeyRange {
  std::int32_t best = std::numeric_limits<std::int32_t>::min();
  std::int32_t worst = std::numeric_limits<std::int32_t>::max();

  template <class T>
  void add(const T* logits, std::int64_t count) {
    add_key_range(logits, count, best, worst);
  }
  /// A NaN or +inf was read.
  bool bad() const { return best >= kInfKey || worst < -kInfKey - 1; }
  /// A NaN or +inf was read, or no finite entry (the row's checks name the bad entry).
  bool invalid() const { return bad() || !(from_signed_order_key(best) > kNegInf); }
};

}  // namespace specdec::detail
