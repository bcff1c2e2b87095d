// SPDX-License-Identifier: MIT
// Draft trees, masks, positions, KV compaction and the engine exporters.
#include <pybind11/stl.h>

#include <fmt/format.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/tree/tree.hpp"

namespace specdec::python {

namespace {

DraftTree make_tree(py::handle tokens, py::handle parents) {
  DraftTree tree;
  if (tokens.is_none() && parents.is_none()) return tree;
  const Array token_array = token_arg(tokens, "tokens", 1);
  const Array parent_array = int32_arg(parents, "parents", 1);
  const auto token_values = token_array.span<Token>("tokens");
  const auto parent_values = parent_array.span<std::int32_t>("parents");
  if (parent_values.size() != token_values.size()) {
    throw Error("parents", fmt::format("has {} entries; tokens has {}", parent_values.size(),
                                       token_values.size()));
  }
  tree.reserve(token_values.size());
  for (std::size_t i = 0; i < token_values.size(); ++i) {
    if (parent_values[i] < -1 || parent_values[i] >= static_cast<std::int32_t>(i)) {
      throw Error(fmt::format("parents[{}]", i),
                  fmt::format("{} must be -1 (root) or an earlier node (< {})", parent_values[i], i));
    }
    tree.add(token_values[i], parent_values[i]);
  }
  return tree;
}

}  // namespace

void bind_tree(py::module_& m) {
  py::class_<DraftTree>(m, "DraftTree",
                        "A draft tree in level order: node i holds tokens[i], its parent parents[i]\n"
                        "(-1 for a child of the root, the last committed token) and its depth\n"
                        "(1 for children of the root).")
      .def(py::init(&make_tree), py::arg("tokens") = py::none(), py::arg("parents") = py::none(),
           "A tree from tokens and parents (each parent an earlier node or -1); depths are\n"
           "computed. With no arguments, an empty tree to `add` to.")
      .def("add", &DraftTree::add, py::arg("token"), py::arg("parent"),
           "Appends a child of `parent` (-1 for the root) and returns its node id.")
      .def("size", &DraftTree::size)
      .def("__len__", &DraftTree::size)
      .def("max_depth", &DraftTree::max_depth, "The deepest level (0 for an empty tree).")
      .def("validate", &DraftTree::validate, py::arg("vocab"),
           "Raises specdec.Error unless the tree is well formed, in level order, with every\n"
           "token in [0, vocab).")
      .def_property_readonly(
          "tokens", [](const DraftTree& t) { return output_from<Token>(t.tokens, ArrayKind::numpy); },
          "The tokens (a copy, int32).")
      .def_property_readonly(
          "parents",
          [](const DraftTree& t) { return output_from<std::int32_t>(t.parents, ArrayKind::numpy); },
          "The parents (a copy, int32; -1 for children of the root).")
      .def_property_readonly(
          "depths",
          [](const DraftTree& t) { return output_from<std::int32_t>(t.depths, ArrayKind::numpy); },
          "The depths (a copy, int32; 1 for children of the root).")
      .def("__repr__", [](const DraftTree& t) {
        return fmt::format("DraftTree(tokens=[{}], parents=[{}])", fmt::join(t.tokens, ", "),
                           fmt::join(t.parents, ", "));
      });
}

}  // namespace specdec::python
