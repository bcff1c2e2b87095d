// SPDX-License-Identifier: MIT
// The compiled half of specdec.compat.sglang: SGLang's tree verification (sampled with its
// thresholds, or greedy) over its first-child / next-sibling layout, one tree per sequence.
// Returns what the Python adapter writes into the caller's tensors. Also the engines' lossy
// target-only knobs on a DraftTree (verify/target_only_lossy.hpp), which that walk shares.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <limits>
#include <optional>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/tree/sibling_lists.hpp"
#include "specdec/verify/target_only_lossy.hpp"

namespace specdec::python {

namespace {

/// An int64 array of `ndim` dimensions on the host (SGLang's index tensors are int64).
Array int64_arg(py::handle obj, std::string_view name, int ndim) {
  Array a = array_arg(obj, name);
  require_host(a, name);
  require_ndim(a, name, ndim);
  if (a.dtype != DType::int64) {
    throw Error(std::string(name),
                fmt::format("has dtype {}; expected int64", dtype_name(a.dtype)));
  }
  return a;
}

/// float32 of `ndim` dimensions on the host, or nothing for None.
std::optional<Array> optional_f32(py::handle obj, std::string_view name, int ndim) {
  if (obj.is_none()) return std::nullopt;
  Array a = array_arg(obj, name);
  require_host(a, name);
  require_ndim(a, name, ndim);
  if (a.dtype != DType::float32) {
    throw Error(std::string(name),
                fmt::format("has dtype {}; expected float32", dtype_name(a.dtype)));
  }
  return a;
}

void require_shape(const Array& a, std::string_view name, std::vector<std::int64_t> shape) {
  if (a.shape != shape) {
    throw Error(std::string(name), fmt::format("has shape ({}); expected ({})",
                                               fmt::join(a.shape, ", "), fmt::join(shape, ", ")));
  }
}

/// One sequence's tree in the parents layout, keeping the nodes SGLang's walk can reach: at most
/// `max_depth` deep and, when vocab > 0, under no candidate outside [0, vocab) (such a child and
/// its subtree are never tried, so a -1 placeholder is never an index).
struct SequenceTree {
  std::vector<std::int32_t> parents, slots;
  std::vector<Token> tokens;
};

SequenceTree sequence_tree(const std::int64_t* first, const std::int64_t* next,
                           const std::int64_t* candidates, std::size_t slot_count,
                           std::int64_t batch, std::int64_t max_depth, std::int64_t vocab,
                           std::vector<std::uint8_t>& seen) {
  std::vector<std::int32_t> parents(slot_count - 1), slots(slot_count - 1);
  seen.resize(slot_count);
  detail::parents_from_sibling_lists({{first, slot_count}, {next, slot_count}}, parents, slots,
                                     ArgName("retrive_next_token", batch),
                                     ArgName("retrive_next_sibling", batch), seen);
  SequenceTree out;
  std::vector<std::int32_t> renumbered(parents.size(), -1), depth(parents.size(), 0);
  for (std::size_t k = 0; k < parents.size(); ++k) {
    const auto parent = parents[k];
    const std::int64_t token = candidates[slots[k]];
    depth[k] = parent < 0 ? 1 : depth[static_cast<std::size_t>(parent)] + 1;
    const bool parent_kept = parent < 0 || renumbered[static_cast<std::size_t>(parent)] >= 0;
    const bool usable = vocab <= 0 ? token >= std::numeric_limits<Token>::min() &&
                                         token <= std::numeric_limits<Token>::max()
                                   : token >= 0 && token < vocab;
    if (!parent_kept || !usable || depth[k] > max_depth) continue;
    renumbered[k] = static_cast<std::int32_t>(out.parents.size());
    out.parents.push_back(parent < 0 ? -1 : renumbered[static_cast<std::size_t>(parent)]);
    out.slots.push_back(slots[k]);
    out.tokens.push_back(static_cast<Token>(token));
  }
  return out;
}

/// Coins read from SGLang's uniform tensors by slot, checked as they are read.
struct SlotCoins {
  const float* coins;         // this sequence's N coins, by slot
  const std::int32_t* slots;  // slot of row r = slots[r - 1]; row 0 is slot 0
  float last;
  std::int64_t batch;
  float coin(std::size_t row) const {
    const auto slot = row == 0 ? 0 : slots[row - 1];
    const float c = coins[slot];
    if (!(c >= 0.0f && c <= 1.0f)) {
      detail::fail(ArgName("uniform_samples", batch)[slot], "{} is outside [0, 1]", c);
    }
    return c;
  }
  float final_uniform() const { return last; }
};

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
  const bool greedy = !predict_object.is_none();
  std::optional<Array> predict, target, draft, coins, final_coins;
  std::vector<RandomStream> streams;
  std::int64_t vocab = 0;
  if (greedy) {
    predict = int64_arg(predict_object, "target_predict", 2);
    require_shape(*predict, "target_predict", {batch, slots});
  } else {
    target = optional_f32(target_object, "target_probs", 3);
    if (!target) throw Error("target_probs", "is required (float32 [bs, num_draft_tokens, V])");
    vocab = target->dim(2);
    require_shape(*target, "target_probs", {batch, slots, vocab});
    if (vocab < 1) throw Error("target_probs", "has no columns (vocabulary 0)");
    draft = optional_f32(draft_object, "draft_probs", 3);
    if (draft) require_shape(*draft, "draft_probs", {batch, slots, vocab});
    coins = optional_f32(coins_object, "uniform_samples", 2);
    final_coins = optional_f32(final_object, "uniform_samples_for_final_sampling", 1);
    if (coins.has_value() != final_coins.has_value()) {
      throw Error(coins ? "uniform_samples_for_final_sampling" : "uniform_samples",
                  "must be given with the other uniform tensor, or both left None");
    }
    if (coins) {
      require_shape(*coins, "uniform_samples", {batch, slots});
      require_shape(*final_coins, "uniform_samples_for_final_sampling", {batch});
    } else {
      streams = streams_arg(streams_object);
      if (static_cast<std::int64_t>(streams.size()) != batch) {
        throw Error("streams", fmt::format("has {} streams; expected {}", streams.size(), batch));
      }
    }
    detail::check_thresholds({threshold_single, threshold_acc});
  }
  const auto* candidate_data = candidates.span<std::int64_t>("candidates").data();
  const auto* index_data = index.span<std::int64_t>("retrive_index").data();
  const auto* first_data = first.span<std::int64_t>("retrive_next_token").data();
  const auto* next_data = next.span<std::int64_t>("retrive_next_sibling").data();
  const std::int64_t predict_entries = batch * slots;
  for (std::int64_t i = 0; i < batch * slots; ++i) {
    const auto value = index_data[i];
    const auto limit = greedy ? std::min(predicts_size, predict_entries) : predicts_size;
    if (value < 0 || value >= limit) {
      detail::fail(ArgName("retrive_index", i / slots)[i % slots],
                   "{} is outside [0, {}): it indexes predicts{}", value, limit,
                   greedy ? " and target_predict" : "");
    }
  }
  const auto width = static_cast<std::size_t>(num_spec_step);
  Output<std::int32_t> accept_index({batch, num_spec_step}, ArrayKind::numpy);
  Output<std::int32_t> emitted({batch, num_spec_step}, ArrayKind::numpy);
  Output<std::int32_t> accepted({batch}, ArrayKind::numpy);
  std::fill(accept_index.values().begin(), accept_index.values().end(), -1);
  std::fill(emitted.values().begin(), emitted.values().end(), -1);
  Workspace& ws = thread_workspace();
  std::vector<std::uint8_t> seen;
  const auto n_slots = static_cast<std::size_t>(slots);
  const auto v = static_cast<std::size_t>(vocab);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto offset = static_cast<std::size_t>(b) * n_slots;
    const SequenceTree tree =
        sequence_tree(first_data + offset, next_data + offset, candidate_data + offset, n_slots, b,
                      num_spec_step - 1, greedy ? 0 : vocab, seen);
    const auto n = tree.tokens.size();
    auto scope = ws.scope();
    auto nodes = ws.take<std::int32_t>(n + 1);
    auto kids = ws.take<Token>(n + 1);
    auto ids = ws.take<std::int32_t>(n + 1);
    const TreeView view{tree.tokens, tree.parents};
    const auto slot_of = [&](std::size_t row) {
      return row == 0 ? std::size_t{0} : static_cast<std::size_t>(tree.slots[row - 1]);
    };
    TreeVerdict verdict;
    if (greedy) {
      const auto* predicted = predict->span<std::int64_t>("target_predict").data();
      const auto argmax_at = [&](std::size_t row) {
        return predicted[index_data[offset + slot_of(row)]];
      };
      const auto verify = [&](std::size_t row, const Token* children, std::int32_t count,
                              const RandomStream&) -> NodeVerdict {
        const auto best = argmax_at(row);
        for (std::int32_t k = 0; k < count; ++k) {
          if (children[k] == best) return {k, children[k]};
        }
        return {-1, static_cast<Token>(best)};
      };
      const auto bonus = [&](std::size_t row, const RandomStream&) {
        return static_cast<Token>(argmax_at(row));
      };
      verdict = detail::walk_tree(view, RandomStream{}, nodes.data(), kids.data(), ids.data(),
                                  verify, bonus);
    } else {
      const float* target_rows = target->span<float>("target_probs").data() + offset * v;
      const float* draft_rows =
          draft ? draft->span<float>("draft_probs").data() + offset * v : nullptr;
      const auto target_at = [&](std::size_t row) {
        const float* r = target_rows + slot_of(row) * v;
        check_probability_row<float>(
            ArgName("target_probs", b)[static_cast<std::int64_t>(slot_of(row))],
            std::span<const float>(r, v));
        return r;
      };
      const auto draft_at = [&](std::size_t row) -> const float* {
        return draft_rows == nullptr ? nullptr : draft_rows + slot_of(row) * v;
      };
      auto scratch = ws.take<float>(v);
      const AcceptanceThresholds t{threshold_single, threshold_acc};
      if (coins) {
        const float last = final_coins->span<float>(
            "uniform_samples_for_final_sampling")[static_cast<std::size_t>(b)];
        if (!(last >= 0.0f && last <= 1.0f)) {
          detail::fail(ArgName("uniform_samples_for_final_sampling", b), "{} is outside [0, 1]",
                       last);
        }
        const SlotCoins given{coins->span<float>("uniform_samples").data() + offset,
                              tree.slots.data(), last, b};
        verdict = detail::verify_tree_thresholded_unchecked(
            view, target_at, draft_at, vocab, t, given,
            static_cast<std::int32_t>(num_spec_step - 1), nodes.data(), kids.data(), ids.data(),
            scratch.data());
      } else {
        verdict = detail::verify_tree_thresholded_unchecked(
            view, target_at, draft_at, vocab, t,
            detail::StreamCoins{streams[static_cast<std::size_t>(b)]},
            static_cast<std::int32_t>(num_spec_step - 1), nodes.data(), kids.data(), ids.data(),
            scratch.data());
      }
    }
    auto* accept_row = accept_index.data() + static_cast<std::size_t>(b) * width;
    auto* emitted_row = emitted.data() + static_cast<std::size_t>(b) * width;
    accept_row[0] = static_cast<std::int32_t>(index_data[offset]);
    for (std::int32_t j = 0; j < verdict.accepted; ++j) {
      const auto node = static_cast<std::size_t>(nodes[static_cast<std::size_t>(j)]);
      accept_row[j + 1] = static_cast<std::int32_t>(index_data[offset + tree.slots[node]]);
      emitted_row[j] = tree.tokens[node];
    }
    emitted_row[verdict.accepted] = verdict.token;
    accepted.data()[b] = verdict.accepted;
  }
  return py::make_tuple(accept_index.result(), emitted.result(), accepted.result());
}

const DraftTree& tree_of(py::handle tree_object) {
  if (!py::isinstance<DraftTree>(tree_object)) {
    throw Error("tree", fmt::format("is a {}; expected a DraftTree", type_name(tree_object)));
  }
  return tree_object.cast<const DraftTree&>();
}

py::tuple tree_result(const TreeVerdict& verdict, const std::vector<std::int32_t>& accepted,
                      ArrayKind kind) {
  const auto nodes = std::span<const std::int32_t>(accepted).first(
      static_cast<std::size_t>(verdict.accepted));
  return py::make_tuple(verdict, output_from(nodes, kind));
}

py::tuple thresholded(py::handle tree_object, py::handle target_object, float threshold_single,
                      float threshold_acc, py::handle stream_object, py::handle coins_object,
                      float final_uniform) {
  const DraftTree& tree = tree_of(tree_object);
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
  const TreeVerdict verdict =
      visit_floats(target, "target_rows", [&]<class T>(std::span<const T> target_rows) {
        if (coins) {
          const SuppliedCoins supplied{coins->span<float>("node_coins"), final_uniform};
          py::gil_scoped_release unlocked;
          return verify_tree_target_only_thresholded<T>(tree.view(), target_rows, vocab,
                                                        thresholds, supplied, accepted,
                                                        thread_workspace());
        }
        py::gil_scoped_release unlocked;
        return verify_tree_target_only_thresholded<T>(tree.view(), target_rows, vocab, thresholds,
                                                      *stream, accepted, thread_workspace());
      });
  return tree_result(verdict, accepted, kind_of(target));
}

py::tuple typical(py::handle tree_object, py::handle target_object, py::handle rule_object,
                  const RandomStream& stream) {
  const DraftTree& tree = tree_of(tree_object);
  if (!py::isinstance<Typical>(rule_object)) {
    throw Error("rule", fmt::format("is a {}; expected a Typical", type_name(rule_object)));
  }
  const Typical rule = rule_object.cast<Typical>();
  const Array target = rows_arg(target_object, "target_rows", 2);
  const std::int64_t vocab = target.dim(1);
  std::vector<std::int32_t> accepted(tree.size());
  const TreeVerdict verdict =
      visit_floats(target, "target_rows", [&]<class T>(std::span<const T> target_rows) {
        py::gil_scoped_release unlocked;
        return verify_tree_target_only_typical<T>(tree.view(), target_rows, vocab, rule, stream,
                                                  accepted, thread_workspace());
      });
  return tree_result(verdict, accepted, kind_of(target));
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
}

}  // namespace specdec::python
