// SPDX-License-Identifier: MIT
// The batched chain and tree verification entry points: the CPU backend, or the CUDA backend for
// CUDA tensors when built with SPECDEC_PYTHON_WITH_CUDA; target-only batches on the CPU.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <optional>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/verify/verify.hpp"

#if defined(SPECDEC_PYTHON_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "specdec/backend/cuda/verify_batch.hpp"
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

/// Where a chain batch's sequences lie: the draft offsets given (ragged) or made for B
/// sequences of gamma tokens (uniform, from [B, gamma] tokens), and the shape of `emitted`.
struct ChainBatchLayout {
  std::int64_t batch = 0;
  std::vector<std::int64_t> emitted_shape;
  std::vector<std::int32_t> uniform;  // the offsets of a uniform batch
  std::optional<Array> ragged;        // the caller's offsets
  BatchRowsShape target, draft;       // what 3-D rows must look like (ragged: 2-D only)
  [[nodiscard]] std::span<const std::int32_t> offsets() const {
    return ragged ? ragged->span<std::int32_t>("draft_offsets")
                  : std::span<const std::int32_t>(uniform);
  }
};

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
  layout.ragged = int32_arg(offsets_object, "draft_offsets", 1);
  require_ndim(tokens, "draft_tokens", 1);
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
  backend::Cpu cpu;
  ChainBatchArgs args;

  HostChainBatch(py::handle target_object, const py::handle* draft_object,
                 py::handle tokens_object, py::handle streams_object, py::handle offsets_object,
                 int threads)
      : target(rows_f32_arg(target_object, "target_rows")),
        draft(draft_object != nullptr ? rows_f32_arg(*draft_object, "draft_rows") : Array{}),
        tokens(token_arg(tokens_object, "draft_tokens")),
        streams(streams_arg(streams_object)),
        layout(chain_batch_layout(tokens, offsets_object)),
        emitted(layout.emitted_shape, kind_of(target, draft, tokens)),
        accepted({layout.batch}, kind_of(target, draft, tokens)),
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
  }
  void run() { verify_chain_batch(cpu, args, thread_workspace()); }
  py::tuple result() { return py::make_tuple(emitted.result(), accepted.result()); }
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
  TreeBatchArgs args;

  HostTreeBatch(py::handle offsets_object, py::handle tokens_object, py::handle parents_object,
                py::handle target_object, const py::handle* draft_object,
                py::handle streams_object, int threads)
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
        bonus({batch()}, kind()) {
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
  }
  std::int64_t batch() const { return std::max<std::int64_t>(offsets.size() - 1, 0); }
  ArrayKind kind() const { return kind_of(target, draft, tokens); }
  py::tuple result() {
    return py::make_tuple(accepted_nodes.result(), accepted.result(), final_tokens.result(),
                          bonus.result());
  }
};

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

backend::Cuda current_stream(int device) {
  return backend::cuda.on(reinterpret_cast<cudaStream_t>(torch_current_stream(device)));
}

py::tuple cuda_chain_batch(py::handle target_object, py::handle draft_object,
                           py::handle tokens_object, py::handle streams_object,
                           py::handle offsets_object) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_rows", device);
  const Array tokens = device_tokens(tokens_object, "draft_tokens", device);
  const std::vector<RandomStream> streams = streams_arg(streams_object);
  const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
  const DeviceOutput emitted(layout.emitted_shape, DType::int32, device, "emitted");
  const DeviceOutput accepted({layout.batch}, DType::int32, device, "accepted");
  ChainBatchArgs args;
  args.draft_offsets = layout.offsets();
  args.target_rows = batch_rows<float>(target, "target_rows", layout.target);
  args.draft_rows = batch_rows<float>(draft, "draft_rows", layout.draft);
  args.draft_tokens = tokens.span<Token>("draft_tokens");
  args.streams = streams;
  args.emitted = emitted.values<Token>("emitted");
  args.accepted = accepted.values<std::int32_t>("accepted");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  const DeviceScratch scratch(
      workspace_size(cuda, ChainBatchShape{.batch = layout.batch,
                                           .max_gamma = largest_count(args.draft_offsets),
                                           .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    verify_chain_batch(cuda, args, scratch.workspace());
  }
  return py::make_tuple(emitted.tensor, accepted.tensor);
}

py::tuple cuda_chain_batch_logits(py::handle target_object, py::handle draft_object,
                                  py::handle warps_object, py::handle tokens_object,
                                  py::handle streams_object, py::handle offsets_object) {
  const Array target = device_arg(target_object, "target_logits", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_logits", device);
  const Array tokens = device_tokens(tokens_object, "draft_tokens", device);
  const std::vector<Warp> warps = warps_arg(warps_object);
  const std::vector<RandomStream> streams = streams_arg(streams_object);
  const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
  const DeviceOutput emitted(layout.emitted_shape, DType::int32, device, "emitted");
  const DeviceOutput accepted({layout.batch}, DType::int32, device, "accepted");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
    ChainBatchLogitsArgs<T> args;
    args.draft_offsets = layout.offsets();
    args.target_logits = batch_rows<T>(target, "target_logits", layout.target);
    args.draft_logits = batch_rows<T>(draft, "draft_logits", layout.draft);
    args.warps = warps;
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams;
    args.emitted = emitted.values<Token>("emitted");
    args.accepted = accepted.values<std::int32_t>("accepted");
    const DeviceScratch scratch(
        workspace_size(cuda, ChainBatchShape{.batch = layout.batch,
                                             .max_gamma = largest_count(args.draft_offsets),
                                             .vocab = args.target_logits.cols,
                                             .from_logits = true}),
        device);
    py::gil_scoped_release unlocked;
    verify_chain_batch_logits(cuda, args, scratch.workspace());
  });
  return py::make_tuple(emitted.tensor, accepted.tensor);
}

py::tuple cuda_tree_batch(const Rule& rule, py::handle offsets_object, py::handle tokens_object,
                          py::handle parents_object, py::handle target_object,
                          py::handle draft_object, py::handle streams_object) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_rows", device);
  const Array tokens = device_tokens(tokens_object, "tokens", device);
  const Array parents = device_tokens(parents_object, "parents", device);
  require_ndim(tokens, "tokens", 1);
  require_ndim(parents, "parents", 1);
  const Array offsets = int32_arg(offsets_object, "node_offsets", 1);
  const std::vector<RandomStream> streams = streams_arg(streams_object);
  const auto batch = std::max<std::int64_t>(offsets.size() - 1, 0);
  const DeviceOutput accepted_nodes({tokens.size()}, DType::int32, device, "accepted_nodes");
  accepted_nodes.tensor.attr("fill_")(-1);
  const DeviceOutput accepted({batch}, DType::int32, device, "accepted");
  const DeviceOutput final_tokens({batch}, DType::int32, device, "final_tokens");
  const DeviceOutput bonus({batch}, DType::uint8, device, "bonus");
  TreeBatchArgs args;
  args.node_offsets = offsets.span<std::int32_t>("node_offsets");
  args.trees = {tokens.span<Token>("tokens"), parents.span<std::int32_t>("parents")};
  const BatchRowsShape shape = tree_batch_rows(offsets);
  args.target_rows = batch_rows<float>(target, "target_rows", shape);
  args.draft_rows = batch_rows<float>(draft, "draft_rows", shape);
  args.streams = streams;
  args.accepted_nodes = accepted_nodes.values<std::int32_t>("accepted_nodes");
  args.accepted = accepted.values<std::int32_t>("accepted");
  args.final_tokens = final_tokens.values<Token>("final_tokens");
  args.bonus = bonus.values<std::uint8_t>("bonus");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  const DeviceScratch scratch(
      workspace_size(cuda, TreeBatchShape{.batch = batch,
                                          .max_nodes = largest_count(args.node_offsets),
                                          .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    verify_tree_batch(cuda, rule, args, scratch.workspace());
  }
  return py::make_tuple(accepted_nodes.tensor, accepted.tensor, final_tokens.tensor, bonus.tensor);
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

void bind_batches(py::module_& m) {
  m.attr("_with_cuda") =
#if defined(SPECDEC_PYTHON_WITH_CUDA)
      true;
#else
      false;
#endif
  m.def(
      "verify_chain_batch",
      [](py::handle target_object, py::handle draft_object, py::handle tokens_object,
         py::handle streams_object, py::handle offsets_object, int threads) {
        if (runs_on_cuda(first_cuda({{target_object, "target_rows"},
                                     {draft_object, "draft_rows"},
                                     {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch(target_object, draft_object, tokens_object, streams_object,
                                  offsets_object);
#endif
        }
        HostChainBatch call(target_object, &draft_object, tokens_object, streams_object,
                            offsets_object, threads);
        {
          py::gil_scoped_release unlocked;
          call.run();
        }
        return call.result();
      },
      py::kw_only(), py::arg("target_rows"), py::arg("draft_rows"), py::arg("draft_tokens"),
      py::arg("streams"), py::arg("draft_offsets") = py::none(), py::arg("threads") = 0,
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
      "on PyTorch's current stream, without synchronising, and returns CUDA tensors (offsets\n"
      "and streams stay host values; device rows are not scanned, so they must be valid).");

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
         int threads) {
        if (runs_on_cuda(first_cuda({{target_object, "target_logits"},
                                     {draft_object, "draft_logits"},
                                     {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch_logits(target_object, draft_object, warps_object, tokens_object,
                                         streams_object, offsets_object);
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
        visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
          const ChainBatchLogitsArgs<T> args{
              .draft_offsets = layout.offsets(),
              .target_logits = batch_rows<T>(target, "target_logits", layout.target),
              .draft_logits = batch_rows<T>(draft, "draft_logits", layout.draft),  // same dtype
              .warps = warps,
              .draft_tokens = tokens.span<Token>("draft_tokens"),
              .streams = streams,
              .emitted = emitted.values(),
              .accepted = accepted.values()};
          py::gil_scoped_release unlocked;
          verify_chain_batch_logits(cpu, args, thread_workspace());
        });
        return py::make_tuple(emitted.result(), accepted.result());
      },
      py::kw_only(), py::arg("target_logits"), py::arg("draft_logits"), py::arg("warps"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets") = py::none(),
      py::arg("threads") = 0,
      "verify_chain_batch from raw logits (float32, float16 or bfloat16, read in place): each\n"
      "row is warped with warps[b] (a Warp, or a list with one per sequence) and verified;\n"
      "the same layout, draws and outputs as verify_chain_batch, and the same CUDA rule.");

  m.def(
      "verify_tree_batch",
      [](py::handle rule_object, py::handle offsets_object, py::handle tokens_object,
         py::handle parents_object, py::handle target_object, py::handle draft_object,
         py::handle streams_object, int threads) {
        const Rule rule = rule_arg(rule_object);
        if (runs_on_cuda(first_cuda({{target_object, "target_rows"},
                                     {draft_object, "draft_rows"},
                                     {tokens_object, "tokens"},
                                     {parents_object, "parents"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_tree_batch(rule, offsets_object, tokens_object, parents_object, target_object,
                                 draft_object, streams_object);
#endif
        }
        HostTreeBatch call(offsets_object, tokens_object, parents_object, target_object,
                           &draft_object, streams_object, threads);
        {
          py::gil_scoped_release unlocked;
          verify_tree_batch(call.cpu, rule, call.args, thread_workspace());
        }
        return call.result();
      },
      py::arg("rule"), py::kw_only(), py::arg("node_offsets"), py::arg("tokens"),
      py::arg("parents"), py::arg("target_rows"), py::arg("draft_rows"), py::arg("streams"),
      py::arg("threads") = 0,
      "Tree verification for B ragged trees in CSR layout, in parallel on the CPU; tree b is\n"
      "verify_tree(rule, ...) of its rows with streams[b], bit for bit.\n"
      "node_offsets [B + 1]; tokens, parents [N] (tree b's nodes at node_offsets[b] ..\n"
      "node_offsets[b + 1], parents local to the tree); target_rows, draft_rows [N + B, V]\n"
      "(tree b's N_b + 1 rows from row node_offsets[b] + b, root row first).\n"
      "Returns (accepted_nodes [N] (tree b's accepted local ids from node_offsets[b], the rest\n"
      "-1), accepted [B], final_tokens [B], bonus [B] (uint8, 1 = ended at a leaf)).\n"
      "CUDA tensors run on the CUDA backend as in verify_chain_batch (rules Recursive,\n"
      "MultiRound and Rejection there).");

  m.def(
      "verify_chain_batch_target_only",
      [](py::handle target_object, py::handle tokens_object, py::handle streams_object,
         py::handle offsets_object, int threads) {
        require_host(first_cuda({{target_object, "target_rows"}, {tokens_object, "draft_tokens"}}));
        HostChainBatch call(target_object, nullptr, tokens_object, streams_object, offsets_object,
                            threads);
        {
          py::gil_scoped_release unlocked;
          verify_chain_batch_target_only(call.cpu, call.args, thread_workspace());
        }
        return call.result();
      },
      py::kw_only(), py::arg("target_rows"), py::arg("draft_tokens"), py::arg("streams"),
      py::arg("draft_offsets") = py::none(), py::arg("threads") = 0,
      "verify_chain_target_only for B sequences of drafts without draft rows, in parallel on\n"
      "the CPU: sequence b is verify_chain_target_only of its rows with streams[b], bit for\n"
      "bit. The layout and outputs of verify_chain_batch without draft_rows: uniform\n"
      "(draft_tokens [B, gamma], target_rows [B, gamma + 1, V] or 2-D) or ragged (draft_offsets\n"
      "[B + 1], draft_tokens [G], target_rows [G + B, V]; 0 drafts allowed). Returns (emitted,\n"
      "accepted), emitted padded with -1. Rows are float32 (float16 / bfloat16 converted).");

  m.def(
      "verify_tree_batch_target_only",
      [](py::handle offsets_object, py::handle tokens_object, py::handle parents_object,
         py::handle target_object, py::handle streams_object, int threads) {
        require_host(first_cuda({{target_object, "target_rows"},
                                 {tokens_object, "tokens"},
                                 {parents_object, "parents"}}));
        HostTreeBatch call(offsets_object, tokens_object, parents_object, target_object,
                           nullptr, streams_object, threads);
        {
          py::gil_scoped_release unlocked;
          verify_tree_batch_target_only(call.cpu, call.args, thread_workspace());
        }
        return call.result();
      },
      py::kw_only(), py::arg("node_offsets"), py::arg("tokens"), py::arg("parents"),
      py::arg("target_rows"), py::arg("streams"), py::arg("threads") = 0,
      "verify_tree_target_only for B ragged candidate trees without draft rows, in parallel on\n"
      "the CPU: tree b is verify_tree_target_only of its rows with streams[b], bit for bit.\n"
      "The layout and outputs of verify_tree_batch without draft_rows: node_offsets [B + 1];\n"
      "tokens, parents [N]; target_rows [N + B, V]. Returns (accepted_nodes [N], accepted [B],\n"
      "final_tokens [B], bonus [B]).");
}

}  // namespace

void bind_batch(py::module_& m) { bind_batches(m); }

}  // namespace specdec::python
