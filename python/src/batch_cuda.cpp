// SPDX-License-Identifier: MIT
// The batch calls on CUDA tensors (built with SPECDEC_PYTHON_WITH_CUDA): inputs read in place on
// their device, outputs made as torch CUDA tensors, work enqueued on PyTorch's current stream.
#include "batch_args.hpp"

#if defined(SPECDEC_PYTHON_WITH_CUDA)
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "specdec/backend/cuda/fill_random.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"

namespace specdec::python {

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

namespace {

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

/// A CUDA call's device made current for the scope, and PyTorch's current stream on it.
struct OnDevice {
  DeviceScope scope;
  backend::Cuda cuda;
  explicit OnDevice(int device)
      : scope(device),
        cuda(backend::cuda.on(reinterpret_cast<cudaStream_t>(torch_current_stream(device)))) {}
};

/// What a chain batch on the device reads and makes (GIL held): the tokens, streams and layout on
/// the rows' device, made current, and the outputs and status words there.
struct DeviceChain {
  int device;
  OnDevice on;
  Array tokens;
  CallStreams streams;
  ChainBatchLayout layout;
  DeviceOutput emitted, accepted;
  DeviceStatus status;

  DeviceChain(const Array& target, py::handle tokens_object, py::handle streams_object,
              py::handle offsets_object, bool check)
      : device(target.device),
        on(device),
        tokens(device_tokens(tokens_object, "draft_tokens", device)),
        streams(streams_object, device),
        layout(chain_batch_layout(tokens, offsets_object)),
        emitted(layout.emitted_shape, DType::int32, device, "emitted"),
        accepted({layout.batch}, DType::int32, device, "accepted"),
        status(check, layout.batch, device) {}
  DeviceChain(const DeviceChain&) = delete;
  DeviceChain& operator=(const DeviceChain&) = delete;

  /// Sets what every chain call's arguments take from the batch: offsets, tokens, streams and
  /// outputs.
  template <class Args>
  void fill(Args& args) const {
    args.draft_offsets = layout.resident();
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams.resident();
    args.emitted = emitted.values<Token>("emitted");
    args.accepted = accepted.values<std::int32_t>("accepted");
    args.status = status.span();
  }
  /// The device scratch of a chain call over `vocab` columns (rows, or logits to warp).
  [[nodiscard]] DeviceScratch scratch(std::int64_t vocab, bool from_logits) const {
    return {workspace_size(on.cuda,
                           ChainBatchShape{.batch = layout.batch,
                                           .max_gamma = largest_count(layout.resident(),
                                                                      tokens.size()),
                                           .vocab = vocab,
                                           .from_logits = from_logits}),
            device};
  }
  [[nodiscard]] py::tuple finish() const {
    return status.finish(py::make_tuple(emitted.tensor, accepted.tensor));
  }
};

}  // namespace

/// verify_chain_batch on the device, or its target-only form when `draft_object` is null.
py::tuple cuda_chain_batch(py::handle target_object, const py::handle* draft_object,
                           py::handle tokens_object, py::handle streams_object,
                           py::handle offsets_object, bool check) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const Array draft =
      draft_object != nullptr ? device_arg(*draft_object, "draft_rows", target.device) : Array{};
  const DeviceChain chain(target, tokens_object, streams_object, offsets_object, check);
  ChainBatchArgs args;
  chain.fill(args);
  args.target_rows = batch_rows<float>(target, "target_rows", chain.layout.target);
  if (draft_object != nullptr) {
    args.draft_rows = batch_rows<float>(draft, "draft_rows", chain.layout.draft);
  }
  // The target-only form needs at most verify_chain_batch's workspace.
  const DeviceScratch scratch = chain.scratch(args.target_rows.cols, false);
  {
    py::gil_scoped_release unlocked;
    if (draft_object != nullptr) {
      verify_chain_batch(chain.on.cuda, args, scratch.workspace());
    } else {
      verify_chain_batch_target_only(chain.on.cuda, args, scratch.workspace());
    }
  }
  return chain.finish();
}

py::tuple cuda_chain_batch_logits(py::handle target_object, py::handle draft_object,
                                  py::handle warps_object, py::handle tokens_object,
                                  py::handle streams_object, py::handle offsets_object,
                                  bool check) {
  const Array target = device_arg(target_object, "target_logits", -1);
  const Array draft = device_arg(draft_object, "draft_logits", target.device);
  const DeviceChain chain(target, tokens_object, streams_object, offsets_object, check);
  const std::vector<Warp> warps = warps_arg(warps_object);
  visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
    ChainBatchLogitsArgs<T> args;
    chain.fill(args);
    args.target_logits = batch_rows<T>(target, "target_logits", chain.layout.target);
    args.draft_logits = batch_rows<T>(draft, "draft_logits", chain.layout.draft);
    args.warps = warps;
    const DeviceScratch scratch = chain.scratch(args.target_logits.cols, true);
    py::gil_scoped_release unlocked;
    verify_chain_batch_logits(chain.on.cuda, args, scratch.workspace());
  });
  return chain.finish();
}

py::tuple cuda_tree_batch(const Rule& rule, py::handle offsets_object, py::handle tokens_object,
                          py::handle parents_object, py::handle target_object,
                          py::handle draft_object, py::handle streams_object, bool check) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const OnDevice on(device);
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
  const DeviceScratch scratch(
      workspace_size(on.cuda, TreeBatchShape{.batch = batch,
                                          .max_nodes = largest_count(args.node_offsets,
                                                                     tokens.size()),
                                          .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    verify_tree_batch(on.cuda, rule, args, scratch.workspace());
  }
  return status.finish(
      py::make_tuple(accepted_nodes.tensor, accepted.tensor, final_tokens.tensor, bonus.tensor));
}

/// warp_logits_batch on the device: logits and a warp tensor read in place, rows warped on
/// PyTorch's current stream (capturable: nothing is read from the host).
py::object cuda_warp_rows(const Array& logits, py::handle warps_object) {
  const int device = logits.device;
  const OnDevice on(device);
  const Array warps = warp_tensor_arg(warps_object, logits.dim(0));
  if (!warps.on_cuda || warps.device != device) {
    throw Error("warps", fmt::format("is not on cuda:{}, where the logits are", device));
  }
  const DeviceOutput warped({logits.dim(0), logits.dim(1)}, DType::float32, device, "warped");
  visit_floats(logits, "logits", [&]<class T>(std::span<const T>) {
    const WarpBatchArgs<T> args{
        .logits = batch_matrix<T>(logits, "logits"),
        .warps = on_device(static_cast<const Warp*>(warps.data),
                           static_cast<std::size_t>(logits.dim(0))),
        .warped = MatrixView<float>(warped.values<float>("warped").data(), logits.dim(0),
                                    logits.dim(1), logits.dim(1))};
    const DeviceScratch scratch(
        workspace_size(on.cuda, WarpBatchShape{logits.dim(0), logits.dim(1)}), device);
    py::gil_scoped_release unlocked;
    warp_logits_batch(on.cuda, args, scratch.workspace());
  });
  return warped.tensor;
}

/// Uniform draws 0 .. count - 1 of each stream of a CUDA stream tensor, read in place.
py::object cuda_uniforms(const Array& streams, std::int64_t count) {
  const int device = streams.device;
  const OnDevice on(device);
  const DeviceOutput out({streams.dim(0), count}, DType::float32, device, "uniforms");
  const auto* words = static_cast<const RandomStream*>(streams.data);
  fill_random(on.cuda,
              FillRandomArgs{.streams = on_device(words, static_cast<std::size_t>(streams.dim(0))),
                             .out = MatrixView<float>(out.values<float>("uniforms").data(),
                                                      streams.dim(0), count, count)},
              backend::DeviceWorkspace{});
  return out.tensor;
}


}  // namespace specdec::python

#endif  // SPECDEC_PYTHON_WITH_CUDA
