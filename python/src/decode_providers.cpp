// SPDX-License-Identifier: MIT
// Provider arguments of the decoding bindings (decode_providers.hpp).
#include "decode_providers.hpp"

#include <cctype>

#include "specdec/toy/toy.hpp"

namespace specdec::python {

py::object batch_copy(const TreeBatch& batch) {
  TreeBatch copy;
  copy.tokens = batch.tokens;
  copy.parents = batch.parents;
  copy.positions = batch.positions;
  copy.committed_length = batch.committed_length;
  return py::cast(std::move(copy));
}

AnyLogitsProvider provider_arg(py::handle obj, const std::string& name, ProviderErrors& errors) {
  if (obj.is_none()) throw Error(name, "is None; expected a provider");
  if (py::isinstance<toy::MarkovProvider>(obj)) return std::ref(obj.cast<toy::MarkovProvider&>());
  if (py::isinstance<toy::NGramProvider>(obj)) return std::ref(obj.cast<toy::NGramProvider&>());
  for (const char* method : {"vocab_size", "committed_length", "reset", "evaluate", "commit"}) {
    if (!py::hasattr(obj, method)) {
      throw Error(name,
                  fmt::format("{} has no {}() method: not a LogitsProvider",
                              py::repr(py::type::handle_of(obj)).cast<std::string>(), method));
    }
  }
  return PyProvider(obj, name, errors);
}

MatrixView<float> writable_rows(py::handle obj, std::string_view name, std::int64_t rows,
                                std::int64_t cols, Array& keep) {
  if (py::isinstance<py::array>(obj) &&
      !py::array(py::reinterpret_borrow<py::array>(obj)).writeable()) {
    throw Error(std::string(name), "is read-only; pass a writable array");
  }
  if (py::hasattr(obj, "is_contiguous") && !obj.attr("is_contiguous")().cast<bool>()) {
    throw Error(std::string(name), "is not contiguous (a copy would not be written back)");
  }
  if (py::isinstance<py::array>(obj) &&
      !(py::reinterpret_borrow<py::array>(obj).flags() & py::array::c_style)) {
    throw Error(std::string(name), "is not C-contiguous (a copy would not be written back)");
  }
  keep = array_arg(obj, name);
  require_host(keep, name);
  require_ndim(keep, name, 2);
  const auto values = keep.mutable_span<float>(name);
  if (keep.dim(0) != rows || keep.dim(1) != cols) {
    throw Error(std::string(name), fmt::format("has shape [{}, {}]; expected [{}, {}]", keep.dim(0),
                                               keep.dim(1), rows, cols));
  }
  return {values.data(), rows, cols};
}

std::vector<Token> prompt_arg(py::handle prompt) {
  const Array array = token_arg(prompt, "prompt", 1);
  const auto values = array.span<Token>("prompt");
  return {values.begin(), values.end()};
}

std::string python_method_name(Method method) {
  std::string name(method_name(method));
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

}  // namespace specdec::python
