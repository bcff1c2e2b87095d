// SPDX-License-Identifier: MIT
// The host checks every batch entry makes, once: a matrix's shape, a ragged batch's CSR offsets
// (on the host or on the device) and what follows from them. The base of every backend entry
// header: with it come the backend policy, Resident arrays, views and errors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "specdec/backend/policy.hpp"
#include "specdec/backend/resident.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"

namespace specdec::detail {

/// Whether a backend reads its arrays from host memory (the CPU): it then checks a device array
/// as a host array.
template <class Backend>
inline constexpr bool kHostMemory = std::is_same_v<std::remove_cvref_t<Backend>, backend::Cpu>;

/// What a matrix argument must be (check_matrix): `rows` rows, counted as `formula` says ("G + B";
/// any count when negative, at least `min_rows`), of `cols` columns, like `cols_of`'s (any count
/// >= 1 when negative).
struct MatrixShape {
  std::int64_t rows = -1;
  std::string_view formula = {};
  std::int64_t min_rows = 0;
  std::int64_t cols = -1;
  std::string_view cols_of = {};
};

/// Throws specdec::Error naming `name` unless `m` has the shape, and a stride >= its columns.
template <class T>
void check_matrix(std::string_view name, const MatrixView<T>& m, const MatrixShape& shape = {}) {
  if (m.rows < shape.min_rows)
    fail(name, "has {} rows, expected at least {}", m.rows, shape.min_rows);
  if (m.cols < 1) fail(name, "has {} columns, expected at least 1", m.cols);
  if (shape.cols >= 0 && m.cols != shape.cols)
    fail(name, "has {} columns, expected {} like {}", m.cols, shape.cols, shape.cols_of);
  if (shape.rows >= 0 && m.rows != shape.rows) {
    if (shape.formula.empty()) fail(name, "has {} rows, expected {}", m.rows, shape.rows);
    fail(name, "has {} rows, expected {} = {}", m.rows, shape.formula, shape.rows);
  }
  if (m.stride < m.cols) fail(name, "stride {} is smaller than its {} columns", m.stride, m.cols);
}

/// Host checks of CSR offsets (B + 1 entries, starting at 0, non-decreasing); returns the largest
/// count of one sequence.
inline std::int64_t check_offsets(std::string_view name, std::span<const std::int32_t> offsets) {
  if (offsets.size() < 2) fail(name, "has {} entries, expected B + 1 >= 2", offsets.size());
  if (offsets[0] != 0) fail(ArgName(name, 0), "is {}, expected 0", offsets[0]);
  std::int64_t largest = 0;
  for (std::size_t b = 1; b < offsets.size(); ++b) {
    if (offsets[b] < offsets[b - 1]) {
      fail(ArgName(name, static_cast<std::int64_t>(b)), "{} is smaller than {}[{}] = {}",
           offsets[b], name, b - 1, offsets[b - 1]);
    }
    largest = std::max<std::int64_t>(largest, offsets[b] - offsets[b - 1]);
  }
  return largest;
}

/// The sizes of a ragged batch: B sequences, N entries in all (draft tokens, tree nodes), and the
/// largest sequence's count.
struct RaggedSizes {
  std::int64_t batch = 0;
  std::int64_t total = 0;
  std::int64_t largest = 0;
};

/// Checks a ragged batch's B + 1 CSR offsets and returns its sizes. Offsets the host can read are
/// scanned; offsets on the device are only sized (not read): N is then `entries` (the size of the
/// per-entry array, e.g. draft_tokens), and largest ceil(N / B), the least a largest sequence can
/// be (what a workspace sized for the largest is laid out for at least).
template <class Backend>
RaggedSizes check_ragged(std::string_view name, const Resident<const std::int32_t>& offsets,
                         std::size_t entries) {
  if (!offsets.on_device() || kHostMemory<Backend>) {
    const std::int64_t largest = check_offsets(name, offsets.span());
    return {static_cast<std::int64_t>(offsets.size() - 1), offsets.back(), largest};
  }
  if (offsets.size() < 2) fail(name, "has {} entries, expected B + 1 >= 2", offsets.size());
  if (offsets.data() == nullptr) fail(name, "is a null device pointer");
  if (entries > INT32_MAX) fail(name, "cannot index {} entries, at most {}", entries, INT32_MAX);
  const auto batch = static_cast<std::int64_t>(offsets.size() - 1);
  const auto total = static_cast<std::int64_t>(entries);
  return {batch, total, (total + batch - 1) / batch};
}

/// Throws specdec::Error naming `name` unless the array holds `expected` entries (on the device,
/// also unless it is null).
template <class T>
void check_resident(std::string_view name, const Resident<T>& array, std::size_t expected) {
  check_size(name, array.size(), expected);
  if (array.on_device() && expected > 0 && array.data() == nullptr)
    fail(name, "is a null device pointer");
}

/// The CPU backend needs back-to-back rows: each named matrix must have stride == columns.
template <class T>
void check_contiguous(std::string_view name, const MatrixView<T>& m) {
  if (m.stride != m.cols) fail(name, "must be contiguous (stride == vocab) on the CPU backend");
}

}  // namespace specdec::detail
