// SPDX-License-Identifier: MIT
// Rows handed to Python callbacks (providers, draft-row functions): writable float32 NumPy views
// of the caller's C++ buffer, so a callback fills them in place and nothing is copied.
#pragma once

#include <pybind11/numpy.h>

#include "specdec/core/views.hpp"

namespace specdec::python {

namespace py = pybind11;

/// A writable float32 [rows, cols] NumPy view of `rows` (no copy). The memory belongs to the
/// caller: the view is valid during the callback only.
inline py::array_t<float> rows_view(MatrixView<float> rows) {
  return py::array_t<float>({rows.rows, rows.cols},
                            {rows.stride * static_cast<std::int64_t>(sizeof(float)),
                             static_cast<std::int64_t>(sizeof(float))},
                            rows.data, py::none());
}

}  // namespace specdec::python
