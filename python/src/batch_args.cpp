// SPDX-License-Identifier: MIT
// The host side of the batch arguments (batch_args.hpp): layouts, CPU calls read and allocated.
#include "batch_args.hpp"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace specdec::python {

namespace {

/// Batches whose rows hold fewer floats than this run on the calling thread when the caller left
/// `threads` at 0: handing them to the pool costs more than it saves.
constexpr std::int64_t kInlineFloats = std::int64_t{1} << 16;

}  // namespace

backend::Cpu cpu_for(int threads, std::int64_t row_floats) {
  if (threads < 0)
    throw Error("threads", fmt::format("{} is negative (0 = every hardware thread)", threads));
  if (threads == 0 && row_floats < kInlineFloats) threads = 1;
  return backend::cpu.with_threads(threads);
}

std::span<const std::int32_t> ChainBatchLayout::offsets() const {
  if (device) throw Error("draft_offsets", "is a CUDA tensor while the rows are on the host");
  return ragged ? ragged->span<std::int32_t>("draft_offsets")
                : std::span<const std::int32_t>(uniform);
}

Resident<const std::int32_t> ChainBatchLayout::resident() const {
  if (!device) return offsets();
  return on_device(static_cast<const std::int32_t*>(device->data),
                   static_cast<std::size_t>(device->size()));
}

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
HostChainBatch::HostChainBatch(py::handle target_object, const py::handle* draft_object,
                               py::handle tokens_object, py::handle streams_object,
                               py::handle offsets_object, int threads, bool check)
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

HostTreeBatch::HostTreeBatch(py::handle offsets_object, py::handle tokens_object,
                             py::handle parents_object, py::handle target_object,
                             const py::handle* draft_object, py::handle streams_object,
                             int threads, bool check)
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

bool runs_on_cuda(std::string_view cuda_name) {
  if (cuda_name.empty()) return false;
#if !defined(SPECDEC_PYTHON_WITH_CUDA)
  throw Error(std::string(cuda_name), "is a CUDA tensor, but specdec was built without CUDA");
#endif
  return true;
}

}  // namespace specdec::python
