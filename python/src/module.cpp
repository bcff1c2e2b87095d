// SPDX-License-Identifier: MIT
// specdec._specdec: the compiled half of the Python package (python/specdec/__init__.py is the
// other).
#include "bindings.hpp"

namespace specdec::python {

Workspace& thread_workspace() {
  thread_local Workspace workspace;
  return workspace;
}

}  // namespace specdec::python

PYBIND11_MODULE(_specdec, m) {
  m.doc() = "Speculative decoding algorithms (the compiled core of the specdec package).";
  specdec::python::bind_core(m);
  specdec::python::bind_rules(m);
  specdec::python::bind_verify(m);
  specdec::python::bind_logits(m);
  specdec::python::bind_batch(m);
  specdec::python::bind_constraints(m);
  specdec::python::bind_draft(m);
  specdec::python::bind_tree(m);
  specdec::python::bind_shape(m);
  specdec::python::bind_decode(m);
  specdec::python::bind_compat(m);
}
