// SPDX-License-Identifier: MIT
#include "args.hpp"

#include <fmt/format.h>

#include <cstring>

#include "arrays.hpp"

namespace specdec::python {

std::string type_name(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>();
}

Rule rule_arg(py::handle obj) {
  if (py::isinstance<Rejection>(obj)) return obj.cast<Rejection>();
  if (py::isinstance<MultiRound>(obj)) return obj.cast<MultiRound>();
  if (py::isinstance<Recursive>(obj)) return obj.cast<Recursive>();
  if (py::isinstance<SpecTr>(obj)) return obj.cast<SpecTr>();
  if (py::isinstance<Lossy>(obj)) return obj.cast<Lossy>();
  if (py::isinstance<Cascade>(obj)) return obj.cast<Cascade>();
  if (py::isinstance<Typical>(obj)) return obj.cast<Typical>();
  if (py::isinstance<Greedy>(obj)) return obj.cast<Greedy>();
  throw Error("rule", fmt::format("is a {}; expected Rejection, MultiRound, Recursive, SpecTr, "
                                  "Lossy, Cascade, Typical or Greedy",
                                  type_name(obj)));
}

bool is_stream_tensor(py::handle obj) { return is_array_like(obj); }

Array stream_tensor_arg(py::handle obj, std::string_view name) {
  Array a = array_arg(obj, name);
  if (a.dtype != DType::int32 || a.ndim() != 2 || a.dim(1) != kStreamWords) {
    throw Error(std::string(name),
                fmt::format("is a {}-D {} array; a stream tensor is int32 [B, {}] (the bytes of B "
                            "RandomStreams: specdec.stream_tensor)",
                            a.ndim(), dtype_name(a.dtype), kStreamWords));
  }
  return a;
}

std::vector<RandomStream> streams_arg(py::handle obj, std::string_view name) {
  if (is_stream_tensor(obj)) {
    const Array a = stream_tensor_arg(obj, name);
    require_host(a, name);
    std::vector<RandomStream> streams(static_cast<std::size_t>(a.dim(0)));
    std::memcpy(streams.data(), a.data, streams.size() * sizeof(RandomStream));
    return streams;
  }
  if (py::isinstance<RandomStream>(obj)) {
    throw Error(std::string(name), "is one RandomStream; expected a sequence of them, one per sequence");
  }
  if (!PySequence_Check(obj.ptr())) {
    throw Error(std::string(name),
                fmt::format("is a {}; expected a sequence of RandomStream", type_name(obj)));
  }
  // A list or tuple is read in place; any other sequence through one copy into a list.
  const auto items = py::reinterpret_steal<py::object>(PySequence_Fast(obj.ptr(), "a sequence"));
  if (!items) throw py::error_already_set();
  const auto count = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(items.ptr()));
  PyObject** item = PySequence_Fast_ITEMS(items.ptr());
  std::vector<RandomStream> streams(count);
  py::detail::make_caster<RandomStream> caster;
  for (std::size_t b = 0; b < count; ++b) {
    if (!caster.load(item[b], false)) {
      throw Error(fmt::format("{}[{}]", name, b),
                  fmt::format("is a {}; expected a RandomStream", type_name(item[b])));
    }
    streams[b] = py::detail::cast_op<const RandomStream&>(caster);
  }
  return streams;
}

namespace {

/// The items of a Python sequence `name` as T (a bound class), "name[b]" naming a wrong item.
template <class T>
std::vector<T> items_of(const py::sequence& list, std::string_view name, std::string_view what) {
  std::vector<T> out;
  out.reserve(list.size());
  for (std::size_t b = 0; b < list.size(); ++b) {
    py::object item = list[b];
    if (!py::isinstance<T>(item)) {
      throw Error(fmt::format("{}[{}]", name, b),
                  fmt::format("is a {}; expected a {}", type_name(item), what));
    }
    out.push_back(item.cast<T>());
  }
  return out;
}

}  // namespace

std::vector<Warp> warps_arg(py::handle obj) {
  if (py::isinstance<Warp>(obj)) return {obj.cast<Warp>()};
  if (!py::isinstance<py::sequence>(obj)) {
    throw Error("warps",
                fmt::format("is a {}; expected a Warp or a sequence of them", type_name(obj)));
  }
  return items_of<Warp>(py::reinterpret_borrow<py::sequence>(obj), "warps", "Warp");
}

std::vector<DraftTree> trees_arg(py::handle obj) {
  if (!py::isinstance<py::sequence>(obj) || py::isinstance<DraftTree>(obj)) {
    throw Error("trees", fmt::format("is a {}; expected a sequence of DraftTree", type_name(obj)));
  }
  return items_of<DraftTree>(py::reinterpret_borrow<py::sequence>(obj), "trees", "DraftTree");
}

const DraftTree& tree_arg(py::handle obj) {
  if (!py::isinstance<DraftTree>(obj)) {
    throw Error("tree", fmt::format("is a {}; expected a DraftTree", type_name(obj)));
  }
  return obj.cast<const DraftTree&>();
}

}  // namespace specdec::python
