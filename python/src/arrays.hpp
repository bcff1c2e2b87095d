// SPDX-License-Identifier: MIT
// Arrays crossing the Python boundary: a borrowed, C-contiguous view of whatever the caller passed
// (a NumPy array or anything with the buffer protocol, a PyTorch tensor or anything with
// __dlpack__, or a plain list), and outputs made as the same kind of array (NumPy in, NumPy out;
// torch in, torch out).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"

namespace specdec::python {

namespace py = pybind11;

enum class DType : std::uint8_t { float32, float16, bfloat16, float64, int32, int64, uint8, uint32, boolean, other };

/// "float32", "bfloat16", ...: the names NumPy and PyTorch print.
std::string_view dtype_name(DType dtype);

/// What the caller passed, so outputs can be made as the same kind.
enum class ArrayKind : std::uint8_t { numpy, torch };

/// A C-contiguous view of a caller's array; the caller's object (or a contiguous copy of it, made
/// only where the layout demands one) stays alive as long as this view does.
class Array {
 public:
  DType dtype = DType::other;
  ArrayKind kind = ArrayKind::numpy;
  bool on_cuda = false;
  int device = -1;  // CUDA device ordinal when on_cuda
  void* data = nullptr;
  std::vector<std::int64_t> shape;

  [[nodiscard]] int ndim() const { return static_cast<int>(shape.size()); }
  [[nodiscard]] std::int64_t dim(int i) const { return shape.at(static_cast<std::size_t>(i)); }
  [[nodiscard]] std::int64_t size() const;

  /// The elements as T; throws specdec::Error naming `name` unless the dtype is T's.
  template <class T>
  [[nodiscard]] std::span<const T> span(std::string_view name) const {
    require(dtype_of<T>(), name);
    return {static_cast<const T*>(data), static_cast<std::size_t>(size())};
  }
  template <class T>
  [[nodiscard]] std::span<T> mutable_span(std::string_view name) const {
    require(dtype_of<T>(), name);
    return {static_cast<T*>(data), static_cast<std::size_t>(size())};
  }

  template <class T>
  static constexpr DType dtype_of() {
    if constexpr (std::is_same_v<T, float>) return DType::float32;
    else if constexpr (std::is_same_v<T, Eigen::half>) return DType::float16;
    else if constexpr (std::is_same_v<T, Eigen::bfloat16>) return DType::bfloat16;
    else if constexpr (std::is_same_v<T, double>) return DType::float64;
    else if constexpr (std::is_same_v<T, std::int32_t>) return DType::int32;
    else if constexpr (std::is_same_v<T, std::int64_t>) return DType::int64;
    else if constexpr (std::is_same_v<T, std::uint8_t>) return DType::uint8;
    else if constexpr (std::is_same_v<T, std::uint32_t>) return DType::uint32;
    else static_assert(sizeof(T) == 0, "no DType for this element type");
  }

  // Keeps the caller's memory alive (a buffer, a DLPack capsule's tensor, or a copy).
  std::shared_ptr<void> owner;

 private:
  void require(DType want, std::string_view name) const;
};

/// Whether `obj` is read as an array (the buffer protocol or __dlpack__), not as a sequence.
bool is_array_like(py::handle obj);

/// Any array-like argument, as it is (any dtype). CUDA tensors are accepted here; functions that
/// run on the host call `require_host` (through the helpers below) and so reject them clearly.
Array array_arg(py::handle obj, std::string_view name);

// ---- the array rules: one reader per kind of array, shared by every entry point ----------------

/// Rows of floats (logits, probabilities, hidden states, weights): float32, float16 or bfloat16
/// read in place (a list becomes float32), on the host, with `ndim` dimensions (0 = any) and at
/// least one column. float64 is refused with a hint: narrowing it here would hide a copy.
Array rows_arg(py::handle obj, std::string_view name, int ndim = 0);

/// rows_arg for functions that compute in float32: float16 / bfloat16 are widened (exactly).
Array rows_f32_arg(py::handle obj, std::string_view name, int ndim = 0);

/// Float values that are not rows (one per token, say), as float32 like rows_f32_arg; may be
/// empty.
Array values_f32_arg(py::handle obj, std::string_view name, int ndim = 0);

/// rows_arg, or nothing for None.
std::optional<Array> optional_rows_arg(py::handle obj, std::string_view name, int ndim = 0);

/// Tokens (int32, or int64 converted to int32 with a range check; a list becomes int32) on the
/// host with `ndim` dimensions (0 = any). Ids below the vocabulary are checked by the C++ calls.
Array token_arg(py::handle obj, std::string_view name, int ndim = 0);

/// Throws specdec::Error naming `name[i]` unless every token lies in [0, vocab).
void check_vocab_tokens(const Array& tokens, std::string_view name, std::int64_t vocab);

/// Any int32/int64 integer array as int32 (parents, offsets, counts ...), like token_arg.
inline Array int32_arg(py::handle obj, std::string_view name, int ndim = 0) {
  return token_arg(obj, name, ndim);
}

/// A token given as a Python int: fits in int32 and, when `vocab` > 0, lies in [0, vocab).
Token token_value(std::int64_t value, std::string_view name, std::int64_t vocab = 0);

/// The rows of a batch, as 2-D [rows, V] or 3-D [B, rows per sequence, V]. A 3-D array's
/// leading dimensions must be `sequences` and `per_sequence` (what the tokens say); a layout
/// without equal sequences passes per_sequence = -1 and takes 2-D rows only.
struct BatchRowsShape {
  std::int64_t sequences = 0;
  std::int64_t per_sequence = -1;
  std::string_view from;  // the argument the leading dimensions come from (for messages)
};
void check_batch_rows(const Array& a, std::string_view name, const BatchRowsShape& shape);

/// The rows of a checked batch array as a [rows, V] matrix of T.
template <class T>
MatrixView<const T> batch_matrix(const Array& a, std::string_view name) {
  const std::int64_t vocab = a.shape.back();
  return {a.span<T>(name).data(), vocab == 0 ? 0 : a.size() / vocab, vocab};
}

/// Throws specdec::Error naming `name` when the array lives on a GPU.
void require_host(const Array& a, std::string_view name);
/// Throws specdec::Error naming `name` unless a.ndim() == ndim.
void require_ndim(const Array& a, std::string_view name, int ndim);

/// Calls f(std::span<const T>) with T = float, Eigen::half or Eigen::bfloat16 per the dtype.
template <class F>
decltype(auto) visit_floats(const Array& a, std::string_view name, F&& f) {
  switch (a.dtype) {
    case DType::float16: return f(a.span<Eigen::half>(name));
    case DType::bfloat16: return f(a.span<Eigen::bfloat16>(name));
    default: return f(a.span<float>(name));
  }
}

/// A row argument of with_rows: an array and its name, or nothing (None: an empty span).
struct NamedRows {
  const Array* array = nullptr;
  std::string_view name;
  NamedRows(const Array& a, std::string_view n) : array(&a), name(n) {}
  NamedRows(const std::optional<Array>& a, std::string_view n) : array(a ? &*a : nullptr), name(n) {}
  template <class T>
  [[nodiscard]] std::span<const T> as() const {
    return array == nullptr ? std::span<const T>{} : array->span<T>(name);
  }
};

/// The rows of one float dtype, as a call over them takes them.
template <class T>
using Rows = std::span<const T>;

/// Calls f(Rows<T>...) on `rows` read as the first one's dtype T (float32, float16 or bfloat16;
/// the others must share it), with the GIL released: a binding's "rows of a dtype, call" in one.
template <std::size_t N, class F>
decltype(auto) with_rows(const NamedRows (&rows)[N], F&& f) {
  return visit_floats(*rows[0].array, rows[0].name, [&]<class T>(Rows<T>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      const std::array<Rows<T>, N> spans{rows[I].template as<T>()...};
      py::gil_scoped_release unlocked;
      return f(spans[I]...);
    }(std::make_index_sequence<N>{});
  });
}

/// The kind of array outputs are made as: torch if any of the inputs is a torch tensor.
template <class... A>
ArrayKind kind_of(const A&... inputs) {
  return ((inputs.kind == ArrayKind::torch) || ... || false) ? ArrayKind::torch : ArrayKind::numpy;
}

/// A fresh output array, allocated while the GIL is held; fill `values()` (GIL may be released),
/// then hand `result()` back to Python.
template <class T>
class Output {
 public:
  Output(std::vector<std::int64_t> shape, ArrayKind kind)
      : array_(std::vector<py::ssize_t>(shape.begin(), shape.end())), kind_(kind) {}
  [[nodiscard]] std::span<T> values() {
    return {array_.mutable_data(), static_cast<std::size_t>(array_.size())};
  }
  [[nodiscard]] T* data() { return array_.mutable_data(); }
  /// The array (a torch tensor sharing its memory when outputs are torch).
  [[nodiscard]] py::object result() const;

 private:
  py::array_t<T> array_;
  ArrayKind kind_;
};

/// True when `obj` is an array on a CUDA device: a torch CUDA tensor, or anything whose
/// __dlpack_device__ says CUDA. Cheap for NumPy arrays and lists (never imports torch).
bool is_cuda_array(py::handle obj);

/// The name of the first of `arrays` that lives on a CUDA device, or an empty view.
std::string_view first_cuda(std::initializer_list<std::pair<py::handle, std::string_view>> arrays);

/// A fresh, uninitialised torch tensor of `dtype` on CUDA device `device` (PyTorch's caching
/// allocator, ordered on PyTorch's current stream like any tensor of that device).
py::object cuda_empty(const std::vector<std::int64_t>& shape, DType dtype, int device);

/// PyTorch's current CUDA stream on `device`, as its integer handle (a cudaStream_t).
std::uintptr_t torch_current_stream(int device);

/// A NumPy array as a torch tensor sharing its memory (torch.from_numpy).
py::object numpy_to_torch(const py::array& array);

template <class T>
py::object Output<T>::result() const {
  if (kind_ == ArrayKind::torch) return numpy_to_torch(array_);
  return array_;
}

/// A 1-D output filled from a std::vector / span.
template <class T>
py::object output_from(std::span<const T> values, ArrayKind kind) {
  Output<T> out({static_cast<std::int64_t>(values.size())}, kind);
  std::copy(values.begin(), values.end(), out.values().begin());
  return out.result();
}

/// A fresh NumPy array of `shape` filled by fill(its values) without the GIL.
template <class T, class Fill>
py::object filled(std::vector<std::int64_t> shape, Fill&& fill) {
  Output<T> out(std::move(shape), ArrayKind::numpy);
  {
    py::gil_scoped_release unlocked;
    fill(out.values());
  }
  return out.result();
}

/// The getter of a read-only property: a copy of the vector `member` as a 1-D NumPy array.
template <class C, class T>
auto copy_of(std::vector<T> C::*member) {
  return [member](const C& object) { return output_from<T>(object.*member, ArrayKind::numpy); };
}

/// (verdict, the first `count` of `values` as a 1-D output): what a single-sequence walk returns
/// (its emitted tokens, or its accepted nodes).
template <class Verdict, class T>
py::tuple verdict_and(const Verdict& verdict, const std::vector<T>& values, std::int64_t count,
                      ArrayKind kind) {
  const auto first = std::span<const T>(values).first(static_cast<std::size_t>(count));
  return py::make_tuple(verdict, output_from(first, kind));
}

}  // namespace specdec::python
