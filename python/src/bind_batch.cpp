// SPDX-License-Identifier: MIT
// The batched chain and tree verification entry points: the CPU backend, or the CUDA backend for
// CUDA tensors when built with SPECDEC_PYTHON_WITH_CUDA; target-only batches on the CPU.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/backend/cpu/fill_random.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/backend/status.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/verify/verify.hpp"

#if defined(SPECDEC_PYTHON_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "specdec/backend/cuda/fill_random.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#endif

namespace specdec::python {

namespace {

/// Batches whose rows hold fewer floats than this run on the calling thread when the caller left
/// `threads` at 0: handing them to the pool costs more than it saves.
constexpr std::int64_t kInlineFloats = std::int64_t{1} << 16;

/// The CPU backend for `threads` (0 = every hardware thread, or only the caller for small work).
backend::Cpu cpu_for(int threads, std::int64_t row_floats) {
  if (threads < 0)
    throw Error("threads", fmt::format("{} is negative (0 = every hardware thread)", threads));
  if (threads == 0 && row_floats < kInlineFloats) threads = 1;
  return backend::cpu.with_threads(threads);
}

/// A batch's float rows checked against the layout, as a [rows, V] matrix.
template <class T>
MatrixView<const T> batch_rows(const Array& a, std::string_view name, const BatchRowsShape& shape) {
  check_batch_rows(a, name, shape);
  return batch_matrix<T>(a, name);
}

/// The status words (B + 1, backend/status.hpp) of a host call made with check=False, returned
/// after its other outputs; with check=True there are none and the C++ call throws instead.
struct HostStatus {
  std::optional<Output<std::int32_t>> words;
  HostStatus(bool check, std::int64_t batch, ArrayKind kind) {
    if (!check) words.emplace(std::vector<std::int64_t>{batch + 1}, kind);
  }
  [[nodiscard]] std::span<std::int32_t> span() {
    return words ? words->values() : std::span<std::int32_t>{};
  }
  /// `outputs`, then the status words when asked for.
  [[nodiscard]] py::tuple append_to(const py::tuple& outputs) const {
    if (!words) return outputs;
    return py::tuple(outputs + py::make_tuple(words->result()));
  }
};

/// Where a chain batch's sequences lie: the draft offsets given (ragged) or made for B
/// sequences of gamma tokens (uniform, from [B, gamma] tokens), and the shape of `emitted`.
struct ChainBatchLayout {
  std::int64_t batch = 0;
  std::vector<std::int64_t> emitted_shape;
  std::vector<std::int32_t> uniform;  // the offsets of a uniform batch
  std::optional<Array> ragged;        // the caller's offsets
  std::optional<Array> device;        // the caller's offsets as a CUDA tensor, read in place
  BatchRowsShape target, draft;       // what 3-D rows must look like (ragged: 2-D only)
  [[nodiscard]] std::span<const std::int32_t> offsets() const {
    if (device) throw Error("draft_offsets", "is a CUDA tensor while the rows are on the host");
    return ragged ? ragged->span<std::int32_t>("draft_offsets")
                  : std::span<const std::int32_t>(uniform);
  }
  [[nodiscard]] Resident<const std::int32_t> resident() const {
    if (!device) return offsets();
    return on_device(static_cast<const std::int32_t*>(device->data),
                     static_cast<std::size_t>(device->size()));
  }
};

/// CSR offsets given as a CUDA tensor (int32, 1-D): read in place by a CUDA call, never copied.
std::optional<Array> device_offsets(py::handle obj, std::string_view name) {
  if (obj.is_none() || !is_cuda_array(obj)) return std::nullopt;
  Array a = array_arg(obj, name);
  require_ndim(a, name, 1);
  if (a.dtype != DType::int32) {
    throw Error(std::string(name),
                fmt::format("is a CUDA tensor of {}; device offsets are int32", dtype_name(a.dtype)));
  }
  return a;
}

ChainBatchLayout chain_batch_layout(const Array& tokens, py::handle offsets_object) {
  ChainBatchLayout layout;
  if (offsets_object.is_none()) {
    if (tokens.ndim() != 2) {
      throw Error("draft_tokens",
                  fmt::format("has {} dimensions; a uniform batch takes [B, gamma] tokens (pass "
                              "draft_offsets for a ragged batch of 1-D tokens)",
                              tokens.ndim()));
    }
    layout.batch = tokens.dim(0);
    layout.uniform.resize(static_cast<std::size_t>(layout.batch) + 1);
    uniform_draft_offsets(tokens.dim(1), layout.uniform);
    layout.emitted_shape = {layout.batch, tokens.dim(1) + 1};
    layout.target = {.sequences = layout.batch, .per_sequence = tokens.dim(1) + 1,
                     .from = "draft_tokens [B, gamma]"};
    layout.draft = {.sequences = layout.batch, .per_sequence = tokens.dim(1),
                    .from = "draft_tokens [B, gamma]"};
    return layout;
  }
  require_ndim(tokens, "draft_tokens", 1);
  layout.device = device_offsets(offsets_object, "draft_offsets");
  if (layout.device) {  // B from its size, G from the tokens: nothing read back
    layout.batch = std::max<std::int64_t>(layout.device->size() - 1, 0);
    layout.emitted_shape = {tokens.size() + layout.batch};
    layout.target = layout.draft = {.sequences = layout.batch, .per_sequence = -1,
                                    .from = "draft_offsets"};
    return layout;
  }
  layout.ragged = int32_arg(offsets_object, "draft_offsets", 1);
  const auto offsets = layout.offsets();
  layout.batch = std::max<std::int64_t>(static_cast<std::int64_t>(offsets.size()) - 1, 0);
  // Sized by the offsets, so a token count that disagrees is reported as draft_tokens.
  const std::int64_t drafts = offsets.empty() ? tokens.size() : std::max(offsets.back(), 0);
  layout.emitted_shape = {drafts + layout.batch};
  layout.target = layout.draft = {.sequences = layout.batch, .per_sequence = -1,
                                  .from = "draft_offsets"};
  return layout;
}

/// What 3-D rows of a tree batch must look like: [B, N_b + 1, V] when every tree has N_b nodes;
/// 2-D [N + B, V] only when the trees differ.
BatchRowsShape tree_batch_rows(const Array& offsets_array) {
  const auto offsets = offsets_array.span<std::int32_t>("node_offsets");
  BatchRowsShape shape{.sequences = std::max<std::int64_t>(static_cast<std::int64_t>(offsets.size()) - 1, 0),
                       .per_sequence = -1, .from = "node_offsets"};
  for (std::size_t b = 1; b < offsets.size(); ++b) {
    const std::int64_t rows = std::int64_t{offsets[b]} - offsets[b - 1] + 1;
    if (b > 1 && rows != shape.per_sequence) return {shape.sequences, -1, shape.from};
    shape.per_sequence = rows;
  }
  return shape;
}

/// verify_chain_batch (or its target-only form when `draft_object` is null) on the CPU with its
/// inputs read and outputs allocated (GIL held); run() needs no GIL.
struct HostChainBatch {
  Array target, draft, tokens;
  std::vector<RandomStream> streams;
  ChainBatchLayout layout;
  Output<Token> emitted;
  Output<std::int32_t> accepted;
  HostStatus status;
  backend::Cpu cpu;
  ChainBatchArgs args;

  HostChainBatch(py::handle target_object, const py::handle* draft_object,
                 py::handle tokens_object, py::handle streams_object, py::handle offsets_object,
                 int threads, bool check = true)
      : target(rows_f32_arg(target_object, "target_rows")),
        draft(draft_object != nullptr ? rows_f32_arg(*draft_object, "draft_rows") : Array{}),
        tokens(token_arg(tokens_object, "draft_tokens")),
        streams(streams_arg(streams_object)),
        layout(chain_batch_layout(tokens, offsets_object)),
        emitted(layout.emitted_shape, kind_of(target, draft, tokens)),
        accepted({layout.batch}, kind_of(target, draft, tokens)),
        status(check, layout.batch, kind_of(target, draft, tokens)),
        cpu(cpu_for(threads, target.size())) {
    args.draft_offsets = layout.offsets();
    args.target_rows = batch_rows<float>(target, "target_rows", layout.target);
    if (draft_object != nullptr) {
      args.draft_rows = batch_rows<float>(draft, "draft_rows", layout.draft);
    }
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams;
    args.emitted = emitted.values();
    args.accepted = accepted.values();
    args.status = status.span();
  }
  void run() { verify_chain_batch(cpu, args, thread_workspace()); }
  py::tuple result() {
    return status.append_to(py::make_tuple(emitted.result(), accepted.result()));
  }
};

/// A CPU tree batch (verify_tree_batch, or its target-only form when `draft_object` is null) with
/// its inputs read and outputs allocated (GIL held); the call itself needs no GIL.
struct HostTreeBatch {
  Array offsets, tokens, parents, target, draft;
  backend::Cpu cpu;
  std::vector<RandomStream> streams;
  Output<std::int32_t> accepted_nodes, accepted;
  Output<Token> final_tokens;
  Output<std::uint8_t> bonus;
  HostStatus status;
  TreeBatchArgs args;

  HostTreeBatch(py::handle offsets_object, py::handle tokens_object, py::handle parents_object,
                py::handle target_object, const py::handle* draft_object,
                py::handle streams_object, int threads, bool check = true)
      : offsets(int32_arg(offsets_object, "node_offsets", 1)),
        tokens(token_arg(tokens_object, "tokens", 1)),
        parents(int32_arg(parents_object, "parents", 1)),
        target(rows_f32_arg(target_object, "target_rows")),
        draft(draft_object != nullptr ? rows_f32_arg(*draft_object, "draft_rows") : Array{}),
        cpu(cpu_for(threads, target.size())),
        streams(streams_arg(streams_object)),
        accepted_nodes({tokens.size()}, kind()),
        accepted({batch()}, kind()),
        final_tokens({batch()}, kind()),
        bonus({batch()}, kind()),
        status(check, batch(), kind()) {
    const BatchRowsShape shape = tree_batch_rows(offsets);
    std::fill(accepted_nodes.values().begin(), accepted_nodes.values().end(), -1);
    args.node_offsets = offsets.span<std::int32_t>("node_offsets");
    args.trees = {tokens.span<Token>("tokens"), parents.span<std::int32_t>("parents")};
    args.target_rows = batch_rows<float>(target, "target_rows", shape);
    if (draft_object != nullptr) args.draft_rows = batch_rows<float>(draft, "draft_rows", shape);
    args.streams = streams;
    args.accepted_nodes = accepted_nodes.values();
    args.accepted = accepted.values();
    args.final_tokens = final_tokens.values();
    args.bonus = bonus.values();
    args.status = status.span();
  }
  std::int64_t batch() const { return std::max<std::int64_t>(offsets.size() - 1, 0); }
  ArrayKind kind() const { return kind_of(target, draft, tokens); }
  py::tuple result() {
    return status.append_to(py::make_tuple(accepted_nodes.result(), accepted.result(),
                                           final_tokens.result(), bonus.result()));
  }
};

/// A warp tensor: int32 [rows, 4] holding one Warp's bytes per row (temperature, top_k, top_p,
/// min_p), where it lives; the warps of a batch built by tensor operations, with no Warp objects.
Array warp_tensor_arg(py::handle obj, std::int64_t rows) {
  static_assert(sizeof(Warp) == 4 * sizeof(std::int32_t));
  Array a = array_arg(obj, "warps");
  if (a.dtype != DType::int32 || a.ndim() != 2 || a.dim(1) != 4 || a.dim(0) != rows) {
    throw Error("warps", fmt::format("is a {}-D {} array; expected int32 [{}, 4] (one Warp's bytes "
                                     "per row of logits)",
                                     a.ndim(), dtype_name(a.dtype), rows));
  }
  return a;
}

/// Target-only batches run on the CPU alone: refuses the CUDA input `on_cuda` names, if any.
void require_host(std::string_view on_cuda) {
  if (on_cuda.empty()) return;
  throw Error(std::string(on_cuda),
              "is a CUDA tensor; target-only verification runs on the CPU for now");
}

#if defined(SPECDEC_PYTHON_WITH_CUDA)

/// The largest count of one sequence in CSR offsets (0 for offsets the C++ checks will refuse).
std::int64_t largest_count(std::span<const std::int32_t> offsets) {
  std::int64_t largest = 0;
  for (std::size_t b = 1; b < offsets.size(); ++b) {
    largest = std::max<std::int64_t>(largest, offsets[b] - offsets[b - 1]);
  }
  return largest;
}

/// Makes `device` the current CUDA device for the scope (kernels launch on the current device).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (device != previous_) cudaSetDevice(device);
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

/// A device input of a CUDA call: a torch CUDA tensor on `device` (-1: any device).
Array device_arg(py::handle obj, std::string_view name, int device) {
  Array a = array_arg(obj, name);
  if (!a.on_cuda) {
    throw Error(std::string(name),
                "is on the host while the rows are CUDA tensors; pass every row and token input "
                "on the same device");
  }
  if (a.kind != ArrayKind::torch) {
    throw Error(std::string(name),
                "is a CUDA array but not a torch tensor (CUDA results are made as torch tensors)");
  }
  if (device >= 0 && a.device != device) {
    throw Error(std::string(name),
                fmt::format("is on cuda:{}, the rows on cuda:{}", a.device, device));
  }
  return a;
}

/// Device tokens as int32 (an int64 tensor is narrowed on the device, unchecked like the rows).
Array device_tokens(py::handle obj, std::string_view name, int device) {
  Array a = device_arg(obj, name, device);
  if (a.dtype == DType::int64)
    a = device_arg(py::reinterpret_borrow<py::object>(obj).attr("int")(), name, device);
  if (a.dtype != DType::int32) {
    throw Error(std::string(name),
                fmt::format("has dtype {}; expected int32 or int64", dtype_name(a.dtype)));
  }
  return a;
}

/// The largest count of one sequence the workspace is sized for: read from host offsets, or
/// ceil(total / B) for device offsets (what the C++ checks size device offsets by).
std::int64_t largest_count(const Resident<const std::int32_t>& offsets, std::int64_t total) {
  if (!offsets.on_device()) return largest_count(offsets.span());
  const auto batch = static_cast<std::int64_t>(offsets.size()) - 1;
  return batch > 0 ? (total + batch - 1) / batch : 0;
}

/// The streams of a CUDA call: a CUDA stream tensor (int32 [B, 6]) read in place, as a graph
/// capture needs, or host streams the launcher copies.
struct CallStreams {
  std::vector<RandomStream> host;
  std::optional<Array> device;
  CallStreams(py::handle obj, int device_index) {
    if (is_stream_tensor(obj) && is_cuda_array(obj)) {
      device = stream_tensor_arg(obj);
      if (device->device != device_index) {
        throw Error("streams", fmt::format("is on cuda:{}, the rows on cuda:{}", device->device,
                                           device_index));
      }
    } else {
      host = streams_arg(obj);
    }
  }
  [[nodiscard]] Resident<const RandomStream> resident() const {
    if (!device) return host;
    return on_device(static_cast<const RandomStream*>(device->data),
                     static_cast<std::size_t>(device->dim(0)));
  }
};

/// A fresh CUDA tensor and its memory.
struct DeviceOutput {
  py::object tensor;
  Array array;
  DeviceOutput(const std::vector<std::int64_t>& shape, DType dtype, int device,
               std::string_view name)
      : tensor(cuda_empty(shape, dtype, device)), array(array_arg(tensor, name)) {}
  template <class T>
  std::span<T> values(std::string_view name) const {
    return array.mutable_span<T>(name);
  }
};

/// Device scratch of `bytes` bytes, alive until the call returns; PyTorch's allocator orders its
/// reuse after the work enqueued on the current stream.
struct DeviceScratch {
  DeviceOutput memory;
  std::size_t bytes;
  DeviceScratch(std::size_t size, int device)
      : memory({static_cast<std::int64_t>(std::max<std::size_t>(size, 1))}, DType::uint8, device,
               "workspace"),
        bytes(size) {}
  [[nodiscard]] backend::DeviceWorkspace workspace() const { return {memory.array.data, bytes}; }
};

/// The status words of a CUDA call (B + 1, on the device, backend/status.hpp): returned after the
/// other outputs with check=False (nothing waits: a capturable call); with check=True read back
/// once after the call, the call's one synchronisation, and raised as specdec.Error.
struct DeviceStatus {
  DeviceOutput words;
  bool check;
  DeviceStatus(bool check_after, std::int64_t batch, int device)
      : words({batch + 1}, DType::int32, device, "status"), check(check_after) {}
  [[nodiscard]] std::span<std::int32_t> span() const {
    return words.values<std::int32_t>("status");
  }
  [[nodiscard]] py::tuple finish(const py::tuple& outputs) const {
    if (!check) return py::tuple(outputs + py::make_tuple(words.tensor));
    const py::object host = words.tensor.attr("cpu")();  // waits for the call on its stream
    throw_if_failed(array_arg(host, "status").span<std::int32_t>("status"));
    return outputs;
  }
};

backend::Cuda current_stream(int device) {
  return backend::cuda.on(reinterpret_cast<cudaStream_t>(torch_current_stream(device)));
}

/// verify_chain_batch on the device, or its target-only form when `draft_object` is null.
py::tuple cuda_chain_batch(py::handle target_object, const py::handle* draft_object,
                           py::handle tokens_object, py::handle streams_object,
                           py::handle offsets_object, bool check) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const Array draft =
      draft_object != nullptr ? device_arg(*draft_object, "draft_rows", device) : Array{};
  const Array tokens = device_tokens(tokens_object, "draft_tokens", device);
  const CallStreams streams(streams_object, device);
  const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
  const DeviceOutput emitted(layout.emitted_shape, DType::int32, device, "emitted");
  const DeviceOutput accepted({layout.batch}, DType::int32, device, "accepted");
  const DeviceStatus status(check, layout.batch, device);
  ChainBatchArgs args;
  args.draft_offsets = layout.resident();
  args.target_rows = batch_rows<float>(target, "target_rows", layout.target);
  if (draft_object != nullptr) args.draft_rows = batch_rows<float>(draft, "draft_rows", layout.draft);
  args.draft_tokens = tokens.span<Token>("draft_tokens");
  args.streams = streams.resident();
  args.emitted = emitted.values<Token>("emitted");
  args.accepted = accepted.values<std::int32_t>("accepted");
  args.status = status.span();
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  // The target-only form needs at most verify_chain_batch's workspace.
  const DeviceScratch scratch(
      workspace_size(cuda, ChainBatchShape{.batch = layout.batch,
                                           .max_gamma = largest_count(args.draft_offsets,
                                                                      tokens.size()),
                                           .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    if (draft_object != nullptr) {
      verify_chain_batch(cuda, args, scratch.workspace());
    } else {
      verify_chain_batch_target_only(cuda, args, scratch.workspace());
    }
  }
  return status.finish(py::make_tuple(emitted.tensor, accepted.tensor));
}

py::tuple cuda_chain_batch_logits(py::handle target_object, py::handle draft_object,
                                  py::handle warps_object, py::handle tokens_object,
                                  py::handle streams_object, py::handle offsets_object,
                                  bool check) {
  const Array target = device_arg(target_object, "target_logits", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_logits", device);
  const Array tokens = device_tokens(tokens_object, "draft_tokens", device);
  const std::vector<Warp> warps = warps_arg(warps_object);
  const CallStreams streams(streams_object, device);
  const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
  const DeviceOutput emitted(layout.emitted_shape, DType::int32, device, "emitted");
  const DeviceOutput accepted({layout.batch}, DType::int32, device, "accepted");
  const DeviceStatus status(check, layout.batch, device);
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
    ChainBatchLogitsArgs<T> args;
    args.draft_offsets = layout.resident();
    args.target_logits = batch_rows<T>(target, "target_logits", layout.target);
    args.draft_logits = batch_rows<T>(draft, "draft_logits", layout.draft);
    args.warps = warps;
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams.resident();
    args.emitted = emitted.values<Token>("emitted");
    args.accepted = accepted.values<std::int32_t>("accepted");
    args.status = status.span();
    const DeviceScratch scratch(
        workspace_size(cuda, ChainBatchShape{.batch = layout.batch,
                                             .max_gamma = largest_count(args.draft_offsets,
                                                                        tokens.size()),
                                             .vocab = args.target_logits.cols,
                                             .from_logits = true}),
        device);
    py::gil_scoped_release unlocked;
    verify_chain_batch_logits(cuda, args, scratch.workspace());
  });
  return status.finish(py::make_tuple(emitted.tensor, accepted.tensor));
}

py::tuple cuda_tree_batch(const Rule& rule, py::handle offsets_object, py::handle tokens_object,
                          py::handle parents_object, py::handle target_object,
                          py::handle draft_object, py::handle streams_object, bool check) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_rows", device);
  const Array tokens = device_tokens(tokens_object, "tokens", device);
  const Array parents = device_tokens(parents_object, "parents", device);
  require_ndim(tokens, "tokens", 1);
  require_ndim(parents, "parents", 1);
  const std::optional<Array> on_gpu = device_offsets(offsets_object, "node_offsets");
  const Array offsets = on_gpu ? *on_gpu : int32_arg(offsets_object, "node_offsets", 1);
  const CallStreams streams(streams_object, device);
  const auto batch = std::max<std::int64_t>(offsets.size() - 1, 0);
  const DeviceOutput accepted_nodes({tokens.size()}, DType::int32, device, "accepted_nodes");
  accepted_nodes.tensor.attr("fill_")(-1);
  const DeviceOutput accepted({batch}, DType::int32, device, "accepted");
  const DeviceOutput final_tokens({batch}, DType::int32, device, "final_tokens");
  const DeviceOutput bonus({batch}, DType::uint8, device, "bonus");
  const DeviceStatus status(check, batch, device);
  TreeBatchArgs args;
  const std::span<const std::int32_t> offset_values = offsets.span<std::int32_t>("node_offsets");
  if (on_gpu) {
    args.node_offsets = on_device(offset_values.data(), offset_values.size());
  } else {
    args.node_offsets = offset_values;
  }
  args.trees = {tokens.span<Token>("tokens"), parents.span<std::int32_t>("parents")};
  const BatchRowsShape shape =
      on_gpu ? BatchRowsShape{.sequences = batch, .per_sequence = -1, .from = "node_offsets"}
             : tree_batch_rows(offsets);
  args.target_rows = batch_rows<float>(target, "target_rows", shape);
  args.draft_rows = batch_rows<float>(draft, "draft_rows", shape);
  args.streams = streams.resident();
  args.accepted_nodes = accepted_nodes.values<std::int32_t>("accepted_nodes");
  args.accepted = accepted.values<std::int32_t>("accepted");
  args.final_tokens = final_tokens.values<Token>("final_tokens");
  args.bonus = bonus.values<std::uint8_t>("bonus");
  args.status = status.span();
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  const DeviceScratch scratch(
      workspace_size(cuda, TreeBatchShape{.batch = batch,
                                          .max_nodes = largest_count(args.node_offsets,
                                                                     tokens.size()),
                                          .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    verify_tree_batch(cuda, rule, args, scratch.workspace());
  }
  return status.finish(
      py::make_tuple(accepted_nodes.tensor, accepted.tensor, final_tokens.tensor, bonus.tensor));
}

/// warp_logits_batch on the device: logits and a warp tensor read in place, rows warped on
/// PyTorch's current stream (capturable: nothing is read from the host).
py::object cuda_warp_rows(const Array& logits, py::handle warps_object) {
  const int device = logits.device;
  const Array warps = warp_tensor_arg(warps_object, logits.dim(0));
  if (!warps.on_cuda || warps.device != device) {
    throw Error("warps", fmt::format("is not on cuda:{}, where the logits are", device));
  }
  const DeviceOutput warped({logits.dim(0), logits.dim(1)}, DType::float32, device, "warped");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  visit_floats(logits, "logits", [&]<class T>(std::span<const T>) {
    const WarpBatchArgs<T> args{
        .logits = batch_matrix<T>(logits, "logits"),
        .warps = on_device(static_cast<const Warp*>(warps.data),
                           static_cast<std::size_t>(logits.dim(0))),
        .warped = MatrixView<float>(warped.values<float>("warped").data(), logits.dim(0),
                                    logits.dim(1), logits.dim(1))};
    const DeviceScratch scratch(workspace_size(cuda, WarpBatchShape{logits.dim(0), logits.dim(1)}),
                                device);
    py::gil_scoped_release unlocked;
    warp_logits_batch(cuda, args, scratch.workspace());
  });
  return warped.tensor;
}

/// Uniform draws 0 .. count - 1 of each stream of a CUDA stream tensor, read in place.
py::object cuda_uniforms(const Array& streams, std::int64_t count) {
  const int device = streams.device;
  const DeviceOutput out({streams.dim(0), count}, DType::float32, device, "uniforms");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  const auto* words = static_cast<const RandomStream*>(streams.data);
  fill_random(cuda,
              FillRandomArgs{.streams = on_device(words, static_cast<std::size_t>(streams.dim(0))),
                             .out = MatrixView<float>(out.values<float>("uniforms").data(),
                                                      streams.dim(0), count, count)},
              backend::DeviceWorkspace{});
  return out.tensor;
}

#endif  // SPECDEC_PYTHON_WITH_CUDA

/// True when the call must run on CUDA (`cuda_name` names a CUDA input); refuses CUDA inputs in
/// a build without CUDA.
bool runs_on_cuda(std::string_view cuda_name) {
  if (cuda_name.empty()) return false;
#if !defined(SPECDEC_PYTHON_WITH_CUDA)
  throw Error(std::string(cuda_name), "is a CUDA tensor, but specdec was built without CUDA");
#endif
  return true;
}

void bind_status(py::module_& m) {
  py::enum_<SequenceStatus>(m, "SequenceStatus",
                            "Why a sequence of a batch call made with check=False failed (its\n"
                            "status word); OK when it verified. int(code) is the word's value.",
                            py::arithmetic())
      .value("OK", SequenceStatus::kOk)
      .value("TOKEN_OUTSIDE_VOCAB", SequenceStatus::kTokenOutsideVocab)
      .value("ZERO_DRAFT_PROBABILITY", SequenceStatus::kZeroDraftProbability)
      .value("BAD_WARP", SequenceStatus::kBadWarp)
      .value("TOO_MANY_CHILDREN", SequenceStatus::kTooManyChildren)
      .value("BAD_ROW", SequenceStatus::kBadRow)
      .value("BAD_TREE", SequenceStatus::kBadTree)
      .value("RESIDUAL_OVERFLOW", SequenceStatus::kResidualOverflow);
  m.def(
      "check_status",
      [](py::handle status_object) {
        py::object host = py::reinterpret_borrow<py::object>(status_object);
        if (is_cuda_array(status_object)) host = host.attr("cpu")();  // one synchronisation
        const Array words = int32_arg(host, "status", 1);
        throw_if_failed(words.span<std::int32_t>("status"));
      },
      py::arg("status"),
      "Raises specdec.Error naming the first failed sequence of the status words a batch call\n"
      "returned with check=False (int32 [B + 1]; a CUDA tensor is read back first); returns\n"
      "None when every sequence verified.");
  m.def(
      "stream_tensor",
      [](py::handle streams_object) {
        const std::vector<RandomStream> streams = streams_arg(streams_object);
        py::array_t<std::int32_t> out(
            std::vector<py::ssize_t>{static_cast<py::ssize_t>(streams.size()), kStreamWords});
        if (!streams.empty())
          std::memcpy(out.mutable_data(), streams.data(), streams.size() * sizeof(RandomStream));
        return out;
      },
      py::arg("streams"),
      "The streams as an int32 NumPy array [B, 6] of their bytes (seed low and high words,\n"
      "sequence, position, node, domain), which every batch call takes as `streams`: moved to a\n"
      "device once, it is read there in place, and a step advances it in place (column 3 is the\n"
      "position).");
}

void bind_batches(py::module_& m) {
  bind_status(m);
  m.attr("_with_cuda") =
#if defined(SPECDEC_PYTHON_WITH_CUDA)
      true;
#else
      false;
#endif
  m.def(
      "verify_chain_batch",
      [](py::handle target_object, py::handle draft_object, py::handle tokens_object,
         py::handle streams_object, py::handle offsets_object, int threads, bool check) {
        if (runs_on_cuda(first_cuda({{target_object, "target_rows"},
                                     {draft_object, "draft_rows"},
                                     {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch(target_object, &draft_object, tokens_object, streams_object,
                                  offsets_object, check);
#endif
        }
        HostChainBatch call(target_object, &draft_object, tokens_object, streams_object,
                            offsets_object, threads, check);
        {
          py::gil_scoped_release unlocked;
          call.run();
        }
        return call.result();
      },
      py::kw_only(), py::arg("target_rows"), py::arg("draft_rows"), py::arg("draft_tokens"),
      py::arg("streams"), py::arg("draft_offsets") = py::none(), py::arg("threads") = 0,
      py::arg("check") = true,
      "Chain verification with standard rejection sampling for B sequences, in parallel on the\n"
      "CPU (`threads`: 0 = every hardware thread, or the calling thread alone for small batches;\n"
      "results never depend on it). Sequence b is\n"
      "verify_chain(Rejection(), ...) of its rows with streams[b], bit for bit.\n"
      "Uniform batch (draft_offsets None): draft_tokens [B, gamma], target_rows\n"
      "[B, gamma + 1, V] (or [B * (gamma + 1), V]), draft_rows [B, gamma, V] (or 2-D); returns\n"
      "(emitted [B, gamma + 1], accepted [B]).\n"
      "Ragged batch: draft_offsets [B + 1] (CSR; sequence b drafted draft_offsets[b + 1] -\n"
      "draft_offsets[b] tokens), draft_tokens [G], target_rows [G + B, V] (sequence b's rows from\n"
      "row draft_offsets[b] + b), draft_rows [G, V]; returns (emitted [G + B], accepted [B]).\n"
      "Emitted tokens: the accepted ones, the correction or bonus token, then -1 padding.\n"
      "Rows are float32 (float16 / bfloat16 rows are converted; see verify_chain_batch_logits).\n"
      "CUDA: when the rows and tokens are torch CUDA tensors the call runs on the CUDA backend\n"
      "on PyTorch's current stream and returns CUDA tensors, copying no row, token or output;\n"
      "draft_offsets (int32) and streams (a stream_tensor) may be CUDA tensors too, read in\n"
      "place, so the call can be captured in a CUDA graph (with check=False). Device rows and\n"
      "offsets are not scanned: bad data fails its sequence (see check).\n"
      "check: True raises specdec.Error naming the first bad sequence (on CUDA after reading\n"
      "the status back: the call's one synchronisation); False verifies every good sequence,\n"
      "gives a bad one accepted = -1 and -1 tokens, and returns its status words last: int32\n"
      "[B + 1], status[b] a SequenceStatus, status[B] the number of failed sequences.");

  m.def(
      "_time_verify_chain_batch",
      [](std::int64_t repeats, py::handle target_object, py::handle draft_object,
         py::handle tokens_object, py::handle streams_object, py::handle offsets_object,
         int threads) {
        if (repeats < 1) throw Error("repeats", fmt::format("{} must be >= 1", repeats));
        HostChainBatch call(target_object, &draft_object, tokens_object, streams_object,
                            offsets_object, threads);
        py::gil_scoped_release unlocked;
        call.run();  // warm-up: the workspace grows here
        const auto start = std::chrono::steady_clock::now();
        for (std::int64_t i = 0; i < repeats; ++i) call.run();
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        return elapsed.count() / static_cast<double>(repeats);
      },
      py::arg("repeats"), py::kw_only(), py::arg("target_rows"), py::arg("draft_rows"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets") = py::none(),
      py::arg("threads") = 0,
      "Seconds per call of the C++ verify_chain_batch alone on these arguments (mean of\n"
      "`repeats` calls after one warm-up), for measuring the Python call's overhead\n"
      "(bench/python/bench_call_overhead.py).");

  m.def(
      "verify_chain_batch_logits",
      [](py::handle target_object, py::handle draft_object, py::handle warps_object,
         py::handle tokens_object, py::handle streams_object, py::handle offsets_object,
         int threads, bool check) {
        if (runs_on_cuda(first_cuda({{target_object, "target_logits"},
                                     {draft_object, "draft_logits"},
                                     {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch_logits(target_object, draft_object, warps_object, tokens_object,
                                         streams_object, offsets_object, check);
#endif
        }
        const Array target = rows_arg(target_object, "target_logits");
        const Array draft = rows_arg(draft_object, "draft_logits");
        const backend::Cpu cpu = cpu_for(threads, target.size());
        const Array tokens = token_arg(tokens_object, "draft_tokens");
        const std::vector<Warp> warps = warps_arg(warps_object);
        const std::vector<RandomStream> streams = streams_arg(streams_object);
        const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
        Output<Token> emitted(layout.emitted_shape, kind_of(target, draft, tokens));
        Output<std::int32_t> accepted({layout.batch}, kind_of(target, draft, tokens));
        HostStatus status(check, layout.batch, kind_of(target, draft, tokens));
        visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
          const ChainBatchLogitsArgs<T> args{
              .draft_offsets = layout.offsets(),
              .target_logits = batch_rows<T>(target, "target_logits", layout.target),
              .draft_logits = batch_rows<T>(draft, "draft_logits", layout.draft),  // same dtype
              .warps = warps,
              .draft_tokens = tokens.span<Token>("draft_tokens"),
              .streams = streams,
              .emitted = emitted.values(),
              .accepted = accepted.values(),
              .status = status.span()};
          py::gil_scoped_release unlocked;
          verify_chain_batch_logits(cpu, args, thread_workspace());
        });
        return status.append_to(py::make_tuple(emitted.result(), accepted.result()));
      },
      py::kw_only(), py::arg("target_logits"), py::arg("draft_logits"), py::arg("warps"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets") = py::none(),
      py::arg("threads") = 0, py::arg("check") = true,
      "verify_chain_batch from raw logits (float32, float16 or bfloat16, read in place): each\n"
      "row is warped with warps[b] (a Warp, or a list with one per sequence) and verified;\n"
      "the same layout, draws and outputs as verify_chain_batch, and the same CUDA rule and\n"
      "`check` (a bad warp or a row with NaN, +inf or no finite logit fails its sequence).");

  m.def(
      "verify_tree_batch",
      [](py::handle rule_object, py::handle offsets_object, py::handle tokens_object,
         py::handle parents_object, py::handle target_object, py::handle draft_object,
         py::handle streams_object, int threads, bool check) {
        const Rule rule = rule_arg(rule_object);
        if (runs_on_cuda(first_cuda({{target_object, "target_rows"},
                                     {draft_object, "draft_rows"},
                                     {tokens_object, "tokens"},
                                     {parents_object, "parents"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_tree_batch(rule, offsets_object, tokens_object, parents_object, target_object,
                                 draft_object, streams_object, check);
#endif
        }
        HostTreeBatch call(offsets_object, tokens_object, parents_object, target_object,
                           &draft_object, streams_object, threads, check);
        {
          py::gil_scoped_release unlocked;
          verify_tree_batch(call.cpu, rule, call.args, thread_workspace());
        }
        return call.result();
      },
      py::arg("rule"), py::kw_only(), py::arg("node_offsets"), py::arg("tokens"),
      py::arg("parents"), py::arg("target_rows"), py::arg("draft_rows"), py::arg("streams"),
      py::arg("threads") = 0, py::arg("check") = true,
      "Tree verification for B ragged trees in CSR layout, in parallel on the CPU; tree b is\n"
      "verify_tree(rule, ...) of its rows with streams[b], bit for bit.\n"
      "node_offsets [B + 1]; tokens, parents [N] (tree b's nodes at node_offsets[b] ..\n"
      "node_offsets[b + 1], parents local to the tree); target_rows, draft_rows [N + B, V]\n"
      "(tree b's N_b + 1 rows from row node_offsets[b] + b, root row first).\n"
      "Returns (accepted_nodes [N] (tree b's accepted local ids from node_offsets[b], the rest\n"
      "-1), accepted [B], final_tokens [B], bonus [B] (uint8, 1 = ended at a leaf)).\n"
      "CUDA tensors run on the CUDA backend as in verify_chain_batch (rules Recursive,\n"
      "MultiRound and Rejection there), and `check` as there (status words last).");

  m.def(
      "verify_chain_batch_target_only",
      [](py::handle target_object, py::handle tokens_object, py::handle streams_object,
         py::handle offsets_object, int threads, bool check) {
        if (runs_on_cuda(
                first_cuda({{target_object, "target_rows"}, {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch(target_object, nullptr, tokens_object, streams_object,
                                  offsets_object, check);
#endif
        }
        HostChainBatch call(target_object, nullptr, tokens_object, streams_object, offsets_object,
                            threads, check);
        {
          py::gil_scoped_release unlocked;
          verify_chain_batch_target_only(call.cpu, call.args, thread_workspace());
        }
        return call.result();
      },
      py::kw_only(), py::arg("target_rows"), py::arg("draft_tokens"), py::arg("streams"),
      py::arg("draft_offsets") = py::none(), py::arg("threads") = 0, py::arg("check") = true,
      "verify_chain_target_only for B sequences of drafts without draft rows, in parallel on\n"
      "the CPU: sequence b is verify_chain_target_only of its rows with streams[b], bit for\n"
      "bit. The layout and outputs of verify_chain_batch without draft_rows: uniform\n"
      "(draft_tokens [B, gamma], target_rows [B, gamma + 1, V] or 2-D) or ragged (draft_offsets\n"
      "[B + 1], draft_tokens [G], target_rows [G + B, V]; 0 drafts allowed). Returns (emitted,\n"
      "accepted), emitted padded with -1. Rows are float32 (float16 / bfloat16 converted).\n"
      "CUDA tensors run on the CUDA backend as in verify_chain_batch (offsets and streams may\n"
      "be CUDA tensors; a token outside the vocabulary fails its sequence), and `check` as\n"
      "there (status words last).");

  m.def(
      "verify_tree_batch_target_only",
      [](py::handle offsets_object, py::handle tokens_object, py::handle parents_object,
         py::handle target_object, py::handle streams_object, int threads, bool check) {
        require_host(first_cuda({{target_object, "target_rows"},
                                 {tokens_object, "tokens"},
                                 {parents_object, "parents"}}));
        HostTreeBatch call(offsets_object, tokens_object, parents_object, target_object,
                           nullptr, streams_object, threads, check);
        {
          py::gil_scoped_release unlocked;
          verify_tree_batch_target_only(call.cpu, call.args, thread_workspace());
        }
        return call.result();
      },
      py::kw_only(), py::arg("node_offsets"), py::arg("tokens"), py::arg("parents"),
      py::arg("target_rows"), py::arg("streams"), py::arg("threads") = 0, py::arg("check") = true,
      "verify_tree_target_only for B ragged candidate trees without draft rows, in parallel on\n"
      "the CPU: tree b is verify_tree_target_only of its rows with streams[b], bit for bit.\n"
      "The layout and outputs of verify_tree_batch without draft_rows: node_offsets [B + 1];\n"
      "tokens, parents [N]; target_rows [N + B, V]. Returns (accepted_nodes [N], accepted [B],\n"
      "final_tokens [B], bonus [B]).");

  m.def(
      "_warp_rows",
      [](py::handle logits_object, py::handle warps_object, int threads) -> py::object {
        if (runs_on_cuda(first_cuda({{logits_object, "logits"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          const Array device_logits = device_arg(logits_object, "logits", -1);
          require_ndim(device_logits, "logits", 2);
          if (device_logits.dim(0) == 0) {
            return cuda_empty({0, device_logits.dim(1)}, DType::float32, device_logits.device);
          }
          return cuda_warp_rows(device_logits, warps_object);
#endif
        }
        const Array logits = rows_arg(logits_object, "logits", 2);
        const Array warps = warp_tensor_arg(warps_object, logits.dim(0));
        specdec::python::require_host(warps, "warps");
        Output<float> warped({logits.dim(0), logits.dim(1)}, kind_of(logits));
        if (logits.dim(0) == 0) return warped.result();
        const backend::Cpu cpu = cpu_for(threads, logits.size());
        const std::span<const Warp> row_warps(static_cast<const Warp*>(warps.data),
                                              static_cast<std::size_t>(logits.dim(0)));
        visit_floats(logits, "logits", [&]<class T>(std::span<const T>) {
          if (cpu.threads == 1) {  // warp_logits checks a row in its first pass, not a pass of its own
            const MatrixView<const T> rows = batch_matrix<T>(logits, "logits");
            py::gil_scoped_release unlocked;
            for (std::int64_t r = 0; r < rows.rows; ++r) {
              warp_logits<T>(row_warps[static_cast<std::size_t>(r)], rows.row(r),
                             std::span<float>(warped.data() + r * rows.cols,
                                              static_cast<std::size_t>(rows.cols)),
                             thread_workspace());
            }
            return;
          }
          const WarpBatchArgs<T> args{
              .logits = batch_matrix<T>(logits, "logits"),
              .warps = row_warps,
              .warped = MatrixView<float>(warped.data(), logits.dim(0), logits.dim(1),
                                          logits.dim(1))};
          py::gil_scoped_release unlocked;
          warp_logits_batch(cpu, args, thread_workspace());
        });
        return warped.result();
      },
      py::arg("logits"), py::arg("warps"), py::arg("threads") = 0,
      "warp_logits on every row of logits [rows, V] (float32, float16, bfloat16) with its own\n"
      "warp: `warps` int32 [rows, 4], each row a Warp's bytes (temperature, top_k, top_p, min_p\n"
      "as float32 / int32 / float32 / float32 bits). Returns float32 [rows, V] where the logits\n"
      "are; CUDA tensors are read in place on PyTorch's current stream (a row whose warp the\n"
      "device cannot apply, top_k above 1024 and below V, is written as NaN).");

  m.def(
      "_fill_uniforms",
      [](py::handle streams_object, std::int64_t count) -> py::object {
        if (count < 0) throw Error("count", fmt::format("{} is negative", count));
        if (is_stream_tensor(streams_object) && is_cuda_array(streams_object)) {
          const Array streams = stream_tensor_arg(streams_object);
          if (runs_on_cuda("streams")) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
            if (streams.dim(0) == 0 || count == 0) {
              return cuda_empty({streams.dim(0), count}, DType::float32, streams.device);
            }
            return cuda_uniforms(streams, count);
#endif
          }
        }
        const std::vector<RandomStream> streams = streams_arg(streams_object);
        const ArrayKind kind = is_stream_tensor(streams_object)
                                   ? array_arg(streams_object, "streams").kind
                                   : ArrayKind::numpy;
        Output<float> out({static_cast<std::int64_t>(streams.size()), count}, kind);
        if (!streams.empty() && count > 0) {
          py::gil_scoped_release unlocked;
          fill_random(backend::cpu.with_threads(1), streams, 0,
                      MatrixView<float>(out.data(), static_cast<std::int64_t>(streams.size()),
                                        count, count),
                      RandomKind::kUniform, thread_workspace());
        }
        return out.result();
      },
      py::arg("streams"), py::arg("count"),
      "Uniform draws 0 .. count - 1 of each stream (float32 [B, count]): row b is\n"
      "streams[b].uniforms(count). A CUDA stream tensor is read in place and the draws made on\n"
      "its device, on PyTorch's current stream; otherwise on the host (torch in, torch out).");
}

}  // namespace

void bind_batch(py::module_& m) { bind_batches(m); }

}  // namespace specdec::python
