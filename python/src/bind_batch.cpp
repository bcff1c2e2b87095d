// SPDX-License-Identifier: MIT
// The batched chain and tree verification entry points: the CPU backend, or the CUDA backend for
// CUDA tensors when built with SPECDEC_PYTHON_WITH_CUDA (batch_cuda.cpp); target-only batches on
// the CPU. Their arguments are read by batch_args.hpp.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "batch_args.hpp"
#include "specdec/backend/cpu/fill_random.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/backend/status.hpp"

namespace specdec::python {

namespace {

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
      .value("RESIDUAL_OVERFLOW", SequenceStatus::kResidualOverflow)
      .value("CHAIN_TOO_LONG", SequenceStatus::kChainTooLong);
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
        return call.finish([](auto&... args) { verify_chain_batch(args...); });
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
        return call.finish([&rule](auto& cpu, auto& args, auto& workspace) {
          verify_tree_batch(cpu, rule, args, workspace);
        });
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
        return call.finish([](auto&... args) { verify_chain_batch_target_only(args...); });
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
        const std::string_view on_cuda = first_cuda(
            {{target_object, "target_rows"}, {tokens_object, "tokens"}, {parents_object, "parents"}});
        if (!on_cuda.empty()) {
          throw Error(std::string(on_cuda),
                      "is a CUDA tensor; target-only verification runs on the CPU for now");
        }
        HostTreeBatch call(offsets_object, tokens_object, parents_object, target_object,
                           nullptr, streams_object, threads, check);
        return call.finish([](auto&... args) { verify_tree_batch_target_only(args...); });
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
        require_host(warps, "warps");
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
