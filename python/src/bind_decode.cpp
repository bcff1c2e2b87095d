// SPDX-License-Identifier: MIT
#include "arrays.hpp"
#include "bindings.hpp"

namespace specdec::python {

void bind_decode(py::module_& m) { (void)m; }

}  // namespace specdec::python
