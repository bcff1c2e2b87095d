// SPDX-License-Identifier: MIT
// The compiled half of specdec.compat.sglang: SGLang's tree verification (sampled with its
// thresholds, or greedy) over its first-child / next-sibling layout, one tree per sequence.
// Returns what the Python adapter writes into the caller's tensors. Also the engines' lossy
// target-only knobs on a DraftTree (verify/target_only_lossy.hpp), which that walk shares.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/backend/cpu/lossy_chain_batch.hpp"
#include "specdec/backend/cpu/sglang_tree_batch.hpp"
#include "specdec/verify/target_only_lossy.hpp"

namespace specdec::python {

namespace {

/// An array of `dtype` and `ndim` dimensions on the host (SGLang's index tensors are int64, its
/// probabilities and uniforms float32).
Array host_arg(py::handle obj, std::string_view name, int ndim, DType dtype) {
  Array a = array_arg(obj, name);
  require_host(a, name);
  require_ndim(a, name, ndim);
  if (a.dtype != dtype) {
    throw Error(std::string(name), fmt::format("has dtype {}; expected {}", dtype_name(a.dtype),
                                               dtype_name(dtype)));
  }
  return a;
}

Array int64_arg(py::handle obj, std::string_view name, int ndim) {
  return host_arg(obj, name, ndim, DType::int64);
}

/// float32 of `ndim` dimensions on the host, or nothing for None.
std::optional<Array> optional_f32(py::handle obj, std::string_view name, int ndim) {
  if (obj.is_none()) return std::nullopt;
  return host_arg(obj, name, ndim, DType::float32);
}

void require_shape(const Array& a, std::string_view name, std::vector<std::int64_t> shape) {
  if (a.shape != shape) {
    throw Error(std::string(name), fmt::format("has shape ({}); expected ({})",
                                               fmt::join(a.shape, ", "), fmt::join(shape, ", ")));
  }
}

/// A C-contiguous host array as a matrix of its last dimension's columns; None: empty.
template <class T>
MatrixView<const T> matrix_of(const std::optional<Array>& a, std::string_view name) {
  if (!a) return {};
  const std::int64_t cols = a->dim(a->ndim() - 1);
  return {a->span<T>(name).data(), cols == 0 ? 0 : a->size() / cols, cols};
}

py::tuple sglang_verify_trees(py::handle candidates_object, py::handle index_object,
                              py::handle next_token_object, py::handle next_sibling_object,
                              std::int64_t num_spec_step, std::int64_t predicts_size,
                              py::handle target_object, py::handle draft_object,
                              py::handle coins_object, py::handle final_object,
                              py::handle streams_object, float threshold_single,
                              float threshold_acc, py::handle predict_object) {
  const Array candidates = int64_arg(candidates_object, "candidates", 2);
  const std::int64_t batch = candidates.dim(0), slots = candidates.dim(1);
  const Array index = int64_arg(index_object, "retrive_index", 2);
  const Array first = int64_arg(next_token_object, "retrive_next_token", 2);
  const Array next = int64_arg(next_sibling_object, "retrive_next_sibling", 2);
  require_shape(index, "retrive_index", {batch, slots});
  require_shape(first, "retrive_next_token", {batch, slots});
  require_shape(next, "retrive_next_sibling", {batch, slots});
  if (slots < 1) throw Error("candidates", "has no columns; slot 0 (the root) is required");
  if (num_spec_step < 1) {
    throw Error("accept_index", fmt::format("has {} columns; expected >= 1", num_spec_step));
  }
  std::optional<Array> predict, target, draft, coins, final_coins;
  std::vector<RandomStream> streams;
  if (!predict_object.is_none()) {
    predict = int64_arg(predict_object, "target_predict", 2);
    require_shape(*predict, "target_predict", {batch, slots});
  } else {
    target = optional_f32(target_object, "target_probs", 3);
    if (!target) throw Error("target_probs", "is required (float32 [bs, num_draft_tokens, V])");
    require_shape(*target, "target_probs", {batch, slots, target->dim(2)});
    if (target->dim(2) < 1) throw Error("target_probs", "has no columns (vocabulary 0)");
    draft = optional_f32(draft_object, "draft_probs", 3);
    if (draft) require_shape(*draft, "draft_probs", {batch, slots, target->dim(2)});
    coins = optional_f32(coins_object, "uniform_samples", 2);
    final_coins = optional_f32(final_object, "uniform_samples_for_final_sampling", 1);
    if (coins) require_shape(*coins, "uniform_samples", {batch, slots});
    if (final_coins) {
      require_shape(*final_coins, "uniform_samples_for_final_sampling", {batch});
    } else if (!coins) {
      streams = streams_arg(streams_object);
    }
  }
  Output<std::int32_t> accept_index({batch, num_spec_step}, ArrayKind::numpy);
  Output<std::int32_t> emitted({batch, num_spec_step}, ArrayKind::numpy);
  Output<std::int32_t> accepted({batch}, ArrayKind::numpy);
  const sglang::TreeBatchArgs args{
      .candidates = matrix_of<std::int64_t>(candidates, "candidates"),
      .retrive_index = matrix_of<std::int64_t>(index, "retrive_index"),
      .retrive_next_token = matrix_of<std::int64_t>(first, "retrive_next_token"),
      .retrive_next_sibling = matrix_of<std::int64_t>(next, "retrive_next_sibling"),
      .predicts_size = predicts_size,
      .target_probs = matrix_of<float>(target, "target_probs"),
      .draft_probs = matrix_of<float>(draft, "draft_probs"),
      .target_predict =
          predict ? predict->span<std::int64_t>("target_predict") : std::span<const std::int64_t>{},
      .thresholds = {threshold_single, threshold_acc},
      .uniform_samples = matrix_of<float>(coins, "uniform_samples"),
      .uniform_samples_for_final_sampling =
          final_coins ? final_coins->span<float>("uniform_samples_for_final_sampling")
                      : std::span<const float>{},
      .streams = streams,
      .accept_index = {accept_index.data(), batch, num_spec_step},
      .emitted = {emitted.data(), batch, num_spec_step},
      .accept_token_num = accepted.values()};
  // One thread: a batch with several bad sequences names the first, as a loop over them would.
  sglang::verify_tree_batch(backend::Cpu{1}, args, thread_workspace());
  return py::make_tuple(accept_index.result(), emitted.result(), accepted.result());
}

py::tuple thresholded(py::handle tree_object, py::handle target_object, float threshold_single,
                      float threshold_acc, py::handle stream_object, py::handle coins_object,
                      float final_uniform) {
  const DraftTree& tree = tree_arg(tree_object);
  const Array target = rows_arg(target_object, "target_rows", 2);
  const std::int64_t vocab = target.dim(1);
  const AcceptanceThresholds thresholds{threshold_single, threshold_acc};
  std::optional<Array> coins;
  std::optional<RandomStream> stream;
  if (!coins_object.is_none()) {
    if (!stream_object.is_none()) {
      throw Error("stream", "must be None when node_coins are given (one source of randomness)");
    }
    coins = values_f32_arg(coins_object, "node_coins", 1);
  } else if (stream_object.is_none()) {
    throw Error("stream", "is required unless node_coins are given");
  } else if (!py::isinstance<RandomStream>(stream_object)) {
    throw Error("stream",
                fmt::format("is a {}; expected a RandomStream", type_name(stream_object)));
  } else {
    stream = stream_object.cast<RandomStream>();
  }
  std::vector<std::int32_t> accepted(tree.size());
  const SuppliedCoins supplied{coins ? coins->span<float>("node_coins") : std::span<const float>{},
                               final_uniform};
  const TreeVerdict verdict = with_rows({{target, "target_rows"}}, [&]<class T>(Rows<T> rows) {
    if (coins) {
      return verify_tree_target_only_thresholded<T>(tree.view(), rows, vocab, thresholds,
                                                    supplied, accepted, thread_workspace());
    }
    return verify_tree_target_only_thresholded<T>(tree.view(), rows, vocab, thresholds, *stream,
                                                  accepted, thread_workspace());
  });
  return verdict_and(verdict, accepted, verdict.accepted, kind_of(target));
}

py::tuple typical(py::handle tree_object, py::handle target_object, py::handle rule_object,
                  const RandomStream& stream) {
  const DraftTree& tree = tree_arg(tree_object);
  if (!py::isinstance<Typical>(rule_object)) {
    throw Error("rule", fmt::format("is a {}; expected a Typical", type_name(rule_object)));
  }
  const Typical rule = rule_object.cast<Typical>();
  const Array target = rows_arg(target_object, "target_rows", 2);
  const std::int64_t vocab = target.dim(1);
  std::vector<std::int32_t> accepted(tree.size());
  const TreeVerdict verdict = with_rows({{target, "target_rows"}}, [&]<class T>(Rows<T> rows) {
    return verify_tree_target_only_typical<T>(tree.view(), rows, vocab, rule, stream, accepted,
                                              thread_workspace());
  });
  return verdict_and(verdict, accepted, verdict.accepted, kind_of(target));
}

/// A ragged chain batch of an engine's lossy rule (synthetic, fly) read from Python: offsets
/// [B + 1], tokens [G], target rows [G + B, V] and draft rows [G, V] or None, all on the host.
struct LossyChainCall {
  Array offsets, tokens, target;
  std::optional<Array> draft;
  std::vector<RandomStream> streams;
  Output<Token> emitted;
  Output<std::int32_t> accepted;
  ChainBatchArgs args;

  LossyChainCall(py::handle target_object, py::handle draft_object, py::handle tokens_object,
                 py::handle offsets_object, py::handle streams_object)
      : offsets(int32_arg(offsets_object, "draft_offsets", 1)),
        tokens(token_arg(tokens_object, "draft_tokens", 1)),
        target(rows_f32_arg(target_object, "target_rows", 2)),
        draft(draft_object.is_none() ? std::nullopt
                                     : std::optional(rows_f32_arg(draft_object, "draft_rows", 2))),
        streams(streams_arg(streams_object)),
        emitted({tokens.size() + std::max<std::int64_t>(offsets.size() - 1, 0)}, kind_of(target)),
        accepted({std::max<std::int64_t>(offsets.size() - 1, 0)}, kind_of(target)) {
    require_host(offsets, "draft_offsets");
    require_host(tokens, "draft_tokens");
    require_host(target, "target_rows");
    if (draft) require_host(*draft, "draft_rows");
    std::fill(emitted.values().begin(), emitted.values().end(), Token{-1});
    args.draft_offsets = offsets.span<std::int32_t>("draft_offsets");
    args.target_rows = batch_matrix<float>(target, "target_rows");
    if (draft) args.draft_rows = batch_matrix<float>(*draft, "draft_rows");
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams;
    args.emitted = emitted.values();
    args.accepted = accepted.values();
  }
  py::tuple result() { return py::make_tuple(emitted.result(), accepted.result()); }
};

backend::Cpu lossy_chain_cpu(int threads) {
  if (threads < 0) throw Error("threads", fmt::format("{} is negative (0 = every hardware thread)", threads));
  return backend::cpu.with_threads(threads == 0 ? 1 : threads);
}

py::tuple synthetic_batch(py::handle target_object, py::handle tokens_object,
                          py::handle offsets_object, py::handle streams_object,
                          py::handle rates_object, int threads) {
  LossyChainCall call(target_object, py::none(), tokens_object, offsets_object, streams_object);
  const Array rates = values_f32_arg(rates_object, "synthetic_acceptance_rates", 1);
  const auto cpu = lossy_chain_cpu(threads);
  {
    py::gil_scoped_release unlocked;
    verify_chain_batch_synthetic(cpu, call.args, rates.span<float>("synthetic_acceptance_rates"),
                                 thread_workspace());
  }
  return call.result();
}

py::tuple fly_batch(py::handle target_object, py::handle draft_object, py::handle tokens_object,
                    py::handle offsets_object, py::handle streams_object, std::int32_t window,
                    float threshold, int threads) {
  LossyChainCall call(target_object, draft_object, tokens_object, offsets_object, streams_object);
  const auto cpu = lossy_chain_cpu(threads);
  {
    py::gil_scoped_release unlocked;
    verify_chain_batch_fly(cpu, call.args, FlyParams{.window = window, .entropy_threshold = threshold},
                           thread_workspace());
  }
  return call.result();
}

}  // namespace

void bind_compat(py::module_& m) {
  m.def("verify_tree_target_only_thresholded", &thresholded, py::arg("tree"),
        py::arg("target_rows"), py::arg("threshold_single") = 1.0f,
        py::arg("threshold_acc") = 1.0f, py::arg("stream") = py::none(), py::kw_only(),
        py::arg("node_coins") = py::none(), py::arg("final_uniform") = 0.5f,
        "LOSSY unless both thresholds are 1: SGLang's threshold_single / threshold_acc walk of\n"
        "a DraftTree without draft rows. At the current node its children are tried in stored\n"
        "order against one running coin: a child is accepted when the coin is at most the tried\n"
        "children's target mass / threshold_acc, or when its own target probability reaches\n"
        "threshold_single; all rejected, the correction is drawn from the target without them.\n"
        "At (1, 1) the output is exactly the target's (verify_tree_target_only's law).\n"
        "target_rows: [N + 1, V] warped rows, row 0 at the root, row i + 1 after node i.\n"
        "Randomness: `stream` (coin of row r: draw 0 of stream.at_node(r); correction or bonus:\n"
        "draw 1 of stream.at_node(0)), or the engine's uniforms instead: node_coins [N + 1]\n"
        "(by row) and final_uniform. Returns (TreeVerdict, accepted_nodes).");
  m.def("verify_tree_target_only_typical", &typical, py::arg("tree"), py::arg("target_rows"),
        py::arg("rule"), py::arg("stream"),
        "LOSSY: typical acceptance (Medusa; TensorRT-LLM's posterior_threshold = rule.epsilon,\n"
        "posterior_alpha = rule.delta) over a DraftTree without draft rows. At the current node\n"
        "the first child, in stored order, whose target probability exceeds\n"
        "min(epsilon, delta * exp(-H(target))) is accepted; none: the correction is drawn from\n"
        "the target row; a leaf: the bonus from its row. target_rows: [N + 1, V] as\n"
        "verify_tree_target_only's. Returns (TreeVerdict, accepted_nodes).");

  m.def("_sglang_verify_trees", &sglang_verify_trees, py::kw_only(), py::arg("candidates"),
        py::arg("retrive_index"), py::arg("retrive_next_token"), py::arg("retrive_next_sibling"),
        py::arg("num_spec_step"), py::arg("predicts_size"), py::arg("target_probs") = py::none(),
        py::arg("draft_probs") = py::none(), py::arg("uniform_samples") = py::none(),
        py::arg("uniform_samples_for_final_sampling") = py::none(), py::arg("streams") = py::none(),
        py::arg("threshold_single") = 1.0f, py::arg("threshold_acc") = 1.0f,
        py::arg("target_predict") = py::none(),
        "specdec.compat.sglang's walk (private): returns (accept_index [B, S] int32, tokens\n"
        "[B, S] int32 (tokens[b, j] goes to predicts[accept_index[b, j]]), accept_token_num\n"
        "[B] int32), -1 where nothing is written.");
  m.def("verify_chain_batch_synthetic", &synthetic_batch, py::kw_only(), py::arg("target_rows"),
        py::arg("draft_tokens"), py::arg("draft_offsets"), py::arg("streams"),
        py::arg("synthetic_acceptance_rates"), py::arg("threads") = 0,
        "LOSSY (benchmarking): vLLM's \"synthetic\" rejection method for a ragged batch. Draft\n"
        "position i, reached, is accepted with probability synthetic_acceptance_rates[i] whatever\n"
        "the rows hold; at the first rejection the token is drawn from the target row without the\n"
        "draft token; all accepted: the bonus from the last row. Layout of\n"
        "verify_chain_batch_target_only's ragged form: draft_offsets [B + 1] int32, draft_tokens\n"
        "[G], target_rows [G + B, V] float32 warped rows. Returns (emitted [G + B] padded with -1,\n"
        "accepted [B]).");
  m.def("verify_chain_batch_fly", &fly_batch, py::kw_only(), py::arg("target_rows"),
        py::arg("draft_rows") = py::none(), py::arg("draft_tokens"), py::arg("draft_offsets"),
        py::arg("streams"), py::arg("fly_window_size") = 1,
        py::arg("fly_entropy_threshold") = 0.0f, py::arg("threads") = 0,
        "LOSSY: FLy (vLLM's \"fly\" rejection method) for a ragged batch. A draft token the\n"
        "lossless test rejects is kept when the target allows it (p > 0), the target row's\n"
        "entropy in nats exceeds fly_entropy_threshold, and the next fly_window_size drafts pass\n"
        "the lossless test; otherwise the lossless correction. draft_rows [G, V] or None (drafts\n"
        "without rows: the target-only test). Layout and outputs of verify_chain_batch_synthetic.\n"
        "An infinite threshold gives verify_chain_batch(_target_only)'s tokens exactly.");
}

}  // namespace specdec::python
