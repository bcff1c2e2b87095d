// SPDX-License-Identifier: MIT
// Non-owning views over caller memory. Host signatures use std::span; row functions that must also
// compile for the device take RowView (a pointer and a size).
#pragma once

#include <cstdint>
#include <span>

#include "specdec/config.hpp"

namespace specdec {

/// One row of `size` values (a distribution, logits or log-probabilities over the vocabulary).
template <class T>
struct RowView {
  T* data = nullptr;
  std::int64_t size = 0;

  SPECDEC_HOST_DEVICE T& operator[](std::int64_t i) const { return data[i]; }

  /// Host-side conversion from a span.
  static RowView from(std::span<T> s) { return {s.data(), static_cast<std::int64_t>(s.size())}; }
  std::span<T> span() const { return {data, static_cast<std::size_t>(size)}; }
};

/// A row-major matrix view: `rows` rows of `cols` values, consecutive rows `stride` apart.
template <class T>
struct MatrixView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t stride = 0;  // elements between the starts of consecutive rows (>= cols)

  MatrixView() = default;
  MatrixView(T* d, std::int64_t r, std::int64_t c) : data(d), rows(r), cols(c), stride(c) {}
  MatrixView(T* d, std::int64_t r, std::int64_t c, std::int64_t s)
      : data(d), rows(r), cols(c), stride(s) {}

  SPECDEC_HOST_DEVICE T* row_data(std::int64_t r) const { return data + r * stride; }
  SPECDEC_HOST_DEVICE RowView<T> row_view(std::int64_t r) const { return {row_data(r), cols}; }
  std::span<T> row(std::int64_t r) const { return {row_data(r), static_cast<std::size_t>(cols)}; }
  SPECDEC_HOST_DEVICE T& operator()(std::int64_t r, std::int64_t c) const {
    return data[r * stride + c];
  }

  /// A read-only view of the same memory.
  operator MatrixView<const T>() const { return {data, rows, cols, stride}; }
};

}  // namespace specdec
