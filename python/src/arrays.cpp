// SPDX-License-Identifier: MIT
#include "arrays.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <limits>

namespace specdec::python {

namespace {

[[noreturn]] void bad(std::string_view name, std::string problem) {
  throw Error(std::string(name), std::move(problem));
}

bool is_c_contiguous(const std::vector<std::int64_t>& shape, const std::int64_t* strides_in_items) {
  if (strides_in_items == nullptr) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides_in_items[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

DType dtype_from_dlpack(DLDataType t) {
  if (t.lanes != 1) return DType::other;
  if (t.code == kDLFloat && t.bits == 32) return DType::float32;
  if (t.code == kDLFloat && t.bits == 16) return DType::float16;
  if (t.code == kDLFloat && t.bits == 64) return DType::float64;
  if (t.code == kDLBfloat && t.bits == 16) return DType::bfloat16;
  if (t.code == kDLInt && t.bits == 32) return DType::int32;
  if (t.code == kDLInt && t.bits == 64) return DType::int64;
  if (t.code == kDLUInt && t.bits == 8) return DType::uint8;
  if (t.code == kDLUInt && t.bits == 32) return DType::uint32;
  return DType::other;
}

DType dtype_from_format(std::string format, py::ssize_t itemsize) {
  while (!format.empty() && std::string_view("@=<>!").find(format.front()) != std::string_view::npos) {
    format.erase(0, 1);
  }
  if (format.size() != 1) return DType::other;
  const char c = format[0];
  if (c == 'f' && itemsize == 4) return DType::float32;
  if (c == 'e' && itemsize == 2) return DType::float16;
  if (c == 'd' && itemsize == 8) return DType::float64;
  if (c == '?') return DType::boolean;
  if (std::string_view("bhilq").find(c) != std::string_view::npos) {
    return itemsize == 4 ? DType::int32 : itemsize == 8 ? DType::int64 : DType::other;
  }
  if (std::string_view("BHILQ").find(c) != std::string_view::npos) {
    return itemsize == 1 ? DType::uint8 : itemsize == 4 ? DType::uint32 : DType::other;
  }
  return DType::other;
}

bool is_torch(py::handle obj) {
  const auto module = py::str(py::type::handle_of(obj).attr("__module__")).cast<std::string>();
  return module.rfind("torch", 0) == 0;
}

/// What reading a torch.Tensor needs from the torch module, looked up once (torch is imported by
/// then: the caller passed a tensor). Never destroyed: it would outlive the interpreter.
struct TorchNames {
  py::object tensor, from_numpy;
  std::vector<std::pair<py::object, DType>> dtypes;
};
const TorchNames& torch_names() {
  static const TorchNames* names = [] {
    py::module_ torch = py::module_::import("torch");
    auto* n = new TorchNames{torch.attr("Tensor"), torch.attr("from_numpy"), {}};
    const std::pair<const char*, DType> known[] = {
        {"float32", DType::float32}, {"float16", DType::float16}, {"bfloat16", DType::bfloat16},
        {"float64", DType::float64}, {"int32", DType::int32},     {"int64", DType::int64},
        {"uint8", DType::uint8},     {"bool", DType::boolean}};
    for (const auto& [name, dtype] : known) n->dtypes.emplace_back(torch.attr(name), dtype);
    return n;
  }();
  return *names;
}

/// True for a torch.Tensor (or subclass); torch is never imported for other objects.
bool is_torch_tensor(py::handle obj) {
  static bool torch_seen = false;
  if (!torch_seen) {
    if (!is_torch(obj)) return false;
    torch_seen = true;
  }
  return PyObject_IsInstance(obj.ptr(), torch_names().tensor.ptr()) == 1;
}

/// A torch.Tensor read through its attributes (data_ptr, shape, dtype, device): a fraction of
/// the cost of exporting a DLPack capsule, and no detach needed for tensors that require grad.
Array from_torch(py::object tensor, std::string_view name) {
  if (!tensor.attr("is_contiguous")().cast<bool>()) tensor = tensor.attr("contiguous")();
  Array a;
  a.kind = ArrayKind::torch;
  const py::object dtype = tensor.attr("dtype");
  for (const auto& [object, value] : torch_names().dtypes) {
    if (dtype.is(object)) a.dtype = value;
  }
  for (auto d : py::reinterpret_borrow<py::tuple>(tensor.attr("shape"))) {
    a.shape.push_back(d.cast<std::int64_t>());
  }
  if (tensor.attr("is_cuda").cast<bool>()) {
    a.on_cuda = true;
    a.device = tensor.attr("get_device")().cast<int>();
  } else if (!tensor.attr("is_cpu").cast<bool>()) {
    bad(name, fmt::format("lives on device {}, which specdec cannot read",
                          py::str(tensor.attr("device")).cast<std::string>()));
  }
  a.data = reinterpret_cast<void*>(tensor.attr("data_ptr")().cast<std::uintptr_t>());
  // The tensor keeps its memory alive; it is released with the GIL held (arrays die after the
  // C++ work, once the GIL is back).
  a.owner = std::shared_ptr<void>(new py::object(std::move(tensor)),
                                  [](void* p) { delete static_cast<py::object*>(p); });
  return a;
}

Array from_dlpack(py::object obj, std::string_view name, ArrayKind kind) {
  if (kind == ArrayKind::torch) {
    obj = obj.attr("detach")();  // a tensor that requires grad cannot be exported
    if (!obj.attr("is_contiguous")().cast<bool>()) obj = obj.attr("contiguous")();
  }
  py::object capsule = obj.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    bad(name, "its __dlpack__ did not return a DLPack tensor capsule");
  }
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");  // we own it now: the deleter is ours to call
  Array a;
  a.owner = std::shared_ptr<void>(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter != nullptr) m->deleter(m);
  });
  const DLTensor& t = managed->dl_tensor;
  a.kind = kind;
  a.dtype = dtype_from_dlpack(t.dtype);
  a.shape.assign(t.shape, t.shape + t.ndim);
  if (!is_c_contiguous(a.shape, t.strides)) bad(name, "is not C-contiguous (make it contiguous first)");
  a.data = static_cast<char*>(t.data) + t.byte_offset;
  if (t.device.device_type == kDLCUDA || t.device.device_type == kDLCUDAManaged) {
    a.on_cuda = true;
    a.device = t.device.device_id;
  } else if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDAHost) {
    bad(name, fmt::format("lives on DLPack device type {}, which specdec cannot read",
                          static_cast<int>(t.device.device_type)));
  }
  return a;
}

Array from_buffer(py::object obj, std::string_view name) {
  if (py::isinstance<py::array>(obj) && !(py::array(obj).flags() & py::array::c_style)) {
    // The one copy a strided view needs.
    obj = py::module_::import("numpy").attr("ascontiguousarray")(obj);
  }
  auto info = std::make_shared<py::buffer_info>(py::reinterpret_borrow<py::buffer>(obj).request());
  Array a;
  a.kind = ArrayKind::numpy;
  a.dtype = dtype_from_format(info->format, info->itemsize);
  a.shape.assign(info->shape.begin(), info->shape.end());
  std::vector<std::int64_t> strides;
  for (auto s : info->strides) strides.push_back(s / std::max<py::ssize_t>(info->itemsize, 1));
  if (!is_c_contiguous(a.shape, strides.data())) {
    bad(name, "is not C-contiguous (make it contiguous first)");
  }
  a.data = info->ptr;
  a.owner = std::move(info);
  return a;
}

/// A list, tuple or scalar as a NumPy array of `dtype`, with a specdec::Error if it cannot be.
Array from_sequence(py::handle obj, std::string_view name, const char* dtype) {
  try {
    py::object converted = py::module_::import("numpy").attr("asarray")(obj, dtype);
    return from_buffer(converted, name);
  } catch (const py::error_already_set& e) {
    bad(name, fmt::format("cannot be read as an array of {}: {}", dtype, e.what()));
  }
}

}  // namespace

bool is_array_like(py::handle obj) {
  return PyObject_CheckBuffer(obj.ptr()) || py::hasattr(obj, "__dlpack__");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float32";
    case DType::float16: return "float16";
    case DType::bfloat16: return "bfloat16";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::uint32: return "uint32";
    case DType::boolean: return "bool";
    case DType::other: break;
  }
  return "an unsupported dtype";
}

std::int64_t Array::size() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void Array::require(DType want, std::string_view name) const {
  if (dtype != want) {
    bad(name, fmt::format("has dtype {}; expected {}", dtype_name(dtype), dtype_name(want)));
  }
}

Array array_arg(py::handle obj, std::string_view name) {
  if (obj.is_none()) bad(name, "is None; expected an array");
  if (py::isinstance<py::array>(obj)) return from_buffer(py::reinterpret_borrow<py::object>(obj), name);
  if (is_torch_tensor(obj)) {
    return from_torch(py::reinterpret_borrow<py::object>(obj), name);
  }
  if (py::hasattr(obj, "__dlpack__")) {
    return from_dlpack(py::reinterpret_borrow<py::object>(obj), name,
                       is_torch(obj) ? ArrayKind::torch : ArrayKind::numpy);
  }
  if (PyObject_CheckBuffer(obj.ptr())) return from_buffer(py::reinterpret_borrow<py::object>(obj), name);
  return from_sequence(obj, name, nullptr);
}

void require_host(const Array& a, std::string_view name) {
  if (a.on_cuda) {
    bad(name, "is a CUDA tensor; this function runs on the host (pass a CPU tensor)");
  }
}

void require_ndim(const Array& a, std::string_view name, int ndim) {
  if (ndim != 0 && a.ndim() != ndim) {
    bad(name, fmt::format("has {} dimensions; expected {}", a.ndim(), ndim));
  }
}

namespace {

/// A float array by the rules of rows_arg; `rows` requires at least one column.
Array float_array(py::handle obj, std::string_view name, int ndim, bool rows) {
  Array a = is_array_like(obj) ? array_arg(obj, name) : from_sequence(obj, name, "float32");
  require_host(a, name);
  require_ndim(a, name, ndim);
  if (a.dtype != DType::float32 && a.dtype != DType::float16 && a.dtype != DType::bfloat16) {
    bad(name, fmt::format("has dtype {}; expected float32, float16 or bfloat16{}", dtype_name(a.dtype),
                          a.dtype == DType::float64 ? " (convert with .astype(numpy.float32))" : ""));
  }
  if (a.ndim() == 0) bad(name, "is a scalar; expected an array");
  if (rows && a.shape.back() == 0) bad(name, "has rows of 0 entries; a row needs at least one");
  return a;
}

/// `a` with float16 / bfloat16 widened to float32 (exactly).
Array widened(Array a, std::string_view name) {
  if (a.dtype == DType::float32) return a;
  auto converted = std::make_shared<std::vector<float>>(static_cast<std::size_t>(a.size()));
  visit_floats(a, name, [&]<class T>(std::span<const T> in) {
    std::transform(in.begin(), in.end(), converted->begin(),
                   [](T x) { return static_cast<float>(x); });
  });
  a.dtype = DType::float32;
  a.data = converted->data();
  a.owner = std::move(converted);
  return a;
}

}  // namespace

Array rows_arg(py::handle obj, std::string_view name, int ndim) {
  return float_array(obj, name, ndim, true);
}

Array values_f32_arg(py::handle obj, std::string_view name, int ndim) {
  return widened(float_array(obj, name, ndim, false), name);
}

std::optional<Array> optional_rows_arg(py::handle obj, std::string_view name, int ndim) {
  if (obj.is_none()) return std::nullopt;
  return rows_arg(obj, name, ndim);
}

Token token_value(std::int64_t value, std::string_view name, std::int64_t vocab) {
  if (value < std::numeric_limits<Token>::min() || value > std::numeric_limits<Token>::max()) {
    bad(name, fmt::format("{} does not fit in int32", value));
  }
  if (vocab > 0 && (value < 0 || value >= vocab)) {
    bad(name, fmt::format("{} is not a token of the vocabulary [0, {})", value, vocab));
  }
  return static_cast<Token>(value);
}

void check_vocab_tokens(const Array& tokens, std::string_view name, std::int64_t vocab) {
  const auto values = tokens.span<Token>(name);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= vocab) {
      bad(fmt::format("{}[{}]", name, i),
          fmt::format("{} is not a token of the vocabulary [0, {})", values[i], vocab));
    }
  }
}

void check_batch_rows(const Array& a, std::string_view name, const BatchRowsShape& shape) {
  if (a.ndim() == 2) return;  // the C++ checks count the rows
  if (a.ndim() != 3 || shape.per_sequence < 0) {
    bad(name, fmt::format("has {} dimensions; expected 2 ([rows, vocab]){}", a.ndim(),
                          shape.per_sequence < 0 ? "" : " or 3 ([sequences, rows, vocab])"));
  }
  if (a.dim(0) != shape.sequences || a.dim(1) != shape.per_sequence) {
    bad(name, fmt::format("has leading dimensions [{}, {}]; {} gives [{}, {}]", a.dim(0), a.dim(1),
                          shape.from, shape.sequences, shape.per_sequence));
  }
}

Array token_arg(py::handle obj, std::string_view name, int ndim) {
  Array a = is_array_like(obj) ? array_arg(obj, name) : from_sequence(obj, name, "int64");
  require_host(a, name);
  require_ndim(a, name, ndim);
  if (a.dtype == DType::int32) return a;
  if (a.dtype != DType::int64) {
    bad(name, fmt::format("has dtype {}; expected int32 or int64", dtype_name(a.dtype)));
  }
  auto narrowed = std::make_shared<std::vector<std::int32_t>>(static_cast<std::size_t>(a.size()));
  const auto* wide = static_cast<const std::int64_t*>(a.data);
  for (std::size_t i = 0; i < narrowed->size(); ++i) {
    if (wide[i] < std::numeric_limits<std::int32_t>::min() ||
        wide[i] > std::numeric_limits<std::int32_t>::max()) {
      bad(fmt::format("{}[{}]", name, i), fmt::format("{} does not fit in int32", wide[i]));
    }
    (*narrowed)[i] = static_cast<std::int32_t>(wide[i]);
  }
  a.dtype = DType::int32;
  a.data = narrowed->data();
  a.owner = std::move(narrowed);
  return a;
}

Array rows_f32_arg(py::handle obj, std::string_view name, int ndim) {
  return widened(rows_arg(obj, name, ndim), name);
}

bool is_cuda_array(py::handle obj) {
  if (py::isinstance<py::array>(obj)) return false;
  if (is_torch_tensor(obj)) return obj.attr("is_cuda").cast<bool>();
  if (!py::hasattr(obj, "__dlpack_device__")) return false;
  const auto device = py::reinterpret_borrow<py::tuple>(obj.attr("__dlpack_device__")());
  const auto device_type = device[0].cast<int>();
  return device_type == kDLCUDA || device_type == kDLCUDAManaged;
}

std::string_view first_cuda(std::initializer_list<std::pair<py::handle, std::string_view>> arrays) {
  for (const auto& [object, name] : arrays) {
    if (is_cuda_array(object)) return name;
  }
  return {};
}

py::object cuda_empty(const std::vector<std::int64_t>& shape, DType dtype, int device) {
  const char* name = nullptr;
  for (const auto& [object, value] : torch_names().dtypes) {
    if (value == dtype) name = dtype_name(value).data();
  }
  if (name == nullptr) throw std::logic_error("cuda_empty: a dtype torch does not have");
  py::module_ torch = py::module_::import("torch");
  py::tuple size(shape.size());
  for (std::size_t i = 0; i < shape.size(); ++i) size[i] = py::int_(shape[i]);
  return torch.attr("empty")(size, py::arg("dtype") = torch.attr(name),
                             py::arg("device") = fmt::format("cuda:{}", device));
}

std::uintptr_t torch_current_stream(int device) {
  return py::module_::import("torch")
      .attr("cuda")
      .attr("current_stream")(device)
      .attr("cuda_stream")
      .cast<std::uintptr_t>();
}

py::object numpy_to_torch(const py::array& array) {
  return torch_names().from_numpy(array);
}

}  // namespace specdec::python
