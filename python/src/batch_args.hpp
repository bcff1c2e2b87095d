// SPDX-License-Identifier: MIT
// The arguments of the batched entry points (bind_batch.cpp): the CPU backend for `threads`, the
// layout of a chain or tree batch, host calls read and allocated with the GIL held, and (built
// with SPECDEC_PYTHON_WITH_CUDA) the same calls on CUDA tensors (batch_cuda.cpp).
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/backend/cpu/compiled_batch.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/verify/verify.hpp"

namespace specdec::python {

/// The CPU backend for `threads` (0 = every hardware thread, or only the caller for small work).
backend::Cpu cpu_for(int threads, std::int64_t row_floats);

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
  [[nodiscard]] std::span<const std::int32_t> offsets() const;
  [[nodiscard]] Resident<const std::int32_t> resident() const;
};
ChainBatchLayout chain_batch_layout(const Array& tokens, py::handle offsets_object);

/// CSR offsets given as a CUDA tensor (int32, 1-D): read in place by a CUDA call, never copied.
std::optional<Array> device_offsets(py::handle obj, std::string_view name);

/// What 3-D rows of a tree batch must look like: [B, N_b + 1, V] when every tree has N_b nodes;
/// 2-D [N + B, V] only when the trees differ.
BatchRowsShape tree_batch_rows(const Array& offsets_array);

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
                 int threads, bool check = true);
  void run() { verify_chain_batch(cpu, args, thread_workspace()); }
  /// verify(cpu, args, workspace) without the GIL; the outputs (then the status words).
  template <class Verify>
  py::tuple finish(Verify verify) {
    {
      py::gil_scoped_release unlocked;
      verify(cpu, args, thread_workspace());
    }
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
                py::handle streams_object, int threads, bool check = true);
  [[nodiscard]] std::int64_t batch() const { return std::max<std::int64_t>(offsets.size() - 1, 0); }
  [[nodiscard]] ArrayKind kind() const { return kind_of(target, draft, tokens); }
  /// verify(cpu, args, workspace) without the GIL; the outputs (then the status words).
  template <class Verify>
  py::tuple finish(Verify verify) {
    {
      py::gil_scoped_release unlocked;
      verify(cpu, args, thread_workspace());
    }
    return status.append_to(py::make_tuple(accepted_nodes.result(), accepted.result(),
                                           final_tokens.result(), bonus.result()));
  }
};

/// A warp tensor: int32 [rows, 4] holding one Warp's bytes per row (temperature, top_k, top_p,
/// min_p), where it lives; the warps of a batch built by tensor operations, with no Warp objects.
Array warp_tensor_arg(py::handle obj, std::int64_t rows);

/// True when the call must run on CUDA (`cuda_name` names a CUDA input); refuses CUDA inputs in
/// a build without CUDA.
bool runs_on_cuda(std::string_view cuda_name);

#if defined(SPECDEC_PYTHON_WITH_CUDA)

// ---- the CUDA calls (batch_cuda.cpp): inputs read in place, outputs made as CUDA tensors ------

/// A device input of a CUDA call: a torch CUDA tensor on `device` (-1: any device).
Array device_arg(py::handle obj, std::string_view name, int device);

/// verify_chain_batch on the device, or its target-only form when `draft_object` is null.
py::tuple cuda_chain_batch(py::handle target_object, const py::handle* draft_object,
                           py::handle tokens_object, py::handle streams_object,
                           py::handle offsets_object, bool check);
py::tuple cuda_chain_batch_logits(py::handle target_object, py::handle draft_object,
                                  py::handle warps_object, py::handle tokens_object,
                                  py::handle streams_object, py::handle offsets_object,
                                  bool check);
py::tuple cuda_tree_batch(const Rule& rule, py::handle offsets_object, py::handle tokens_object,
                          py::handle parents_object, py::handle target_object,
                          py::handle draft_object, py::handle streams_object, bool check);

/// warp_logits_batch on the device: logits and a warp tensor read in place, rows warped on
/// PyTorch's current stream (capturable: nothing is read from the host).
py::object cuda_warp_rows(const Array& logits, py::handle warps_object);

/// Uniform draws 0 .. count - 1 of each stream of a CUDA stream tensor, read in place.
py::object cuda_uniforms(const Array& streams, std::int64_t count);

#endif  // SPECDEC_PYTHON_WITH_CUDA

}  // namespace specdec::python
