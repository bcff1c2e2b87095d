// SPDX-License-Identifier: MIT
// The parts of the extension module, one per area of the C++ headers. Python names are the C++
// names (functions snake_case, classes CamelCase); keyword arguments are the C++ parameter names.
#pragma once

#include <pybind11/pybind11.h>

#include <initializer_list>

#include "specdec/core/workspace.hpp"

// In a py::class_<C> chain, SPECDEC_FIELDS(C, a, b, ...) is .def_readwrite("a", &C::a)
// .def_readwrite("b", &C::b) ...: a parameter struct's fields under their C++ names (up to 32).
#define SPECDEC_FIELDS(C, ...) __VA_OPT__(SPECDEC_EXPAND_(SPECDEC_FIELDS_(C, __VA_ARGS__)))
#define SPECDEC_FIELDS_(C, field, ...) \
  .def_readwrite(#field, &C::field) __VA_OPT__(SPECDEC_FIELDS_AGAIN_ SPECDEC_PARENS_(C, __VA_ARGS__))
#define SPECDEC_FIELDS_AGAIN_() SPECDEC_FIELDS_
#define SPECDEC_PARENS_ ()
#define SPECDEC_EXPAND_(...) SPECDEC_EXPAND3_(SPECDEC_EXPAND3_(SPECDEC_EXPAND3_(__VA_ARGS__)))
#define SPECDEC_EXPAND3_(...) SPECDEC_EXPAND2_(SPECDEC_EXPAND2_(SPECDEC_EXPAND2_(__VA_ARGS__)))
#define SPECDEC_EXPAND2_(...) SPECDEC_EXPAND1_(SPECDEC_EXPAND1_(SPECDEC_EXPAND1_(__VA_ARGS__)))
#define SPECDEC_EXPAND1_(...) __VA_ARGS__

namespace specdec::python {

namespace py = pybind11;

/// Calls each of an area's bind functions on `m`, in order.
inline void bind_parts(py::module_& m, std::initializer_list<void (*)(py::module_&)> parts) {
  for (auto* bind : parts) bind(m);
}

/// A workspace per thread, grown on first use and reused by every later call on that thread.
Workspace& thread_workspace();

void bind_core(py::module_& m);    // Error, RandomStream, Warp, warps, sampling
void bind_rules(py::module_& m);   // the rule classes and verdicts
void bind_verify(py::module_& m);  // node/chain/block/tree verification, MTAD, exact laws
void bind_logits(py::module_& m);  // chain/block/tree verification of one sequence from logits
void bind_batch(py::module_& m);   // batched chain and tree verification (CPU, CUDA)
void bind_constraints(py::module_& m);  // constrained chain batches from logits (CPU)
void bind_draft(py::module_& m);   // drafters and the ReDrafter head
void bind_tree(py::module_& m);    // trees, masks, positions, KV compaction, exporters
void bind_shape(py::module_& m);   // tree shapes, acceptance estimates, draft lengths
void bind_decode(py::module_& m);  // LogitsProvider, decode, toy models
void bind_compat(py::module_& m);  // the compiled half of specdec.compat (SGLang's tree walk)

}  // namespace specdec::python
