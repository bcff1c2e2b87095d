// SPDX-License-Identifier: MIT
// Constrained chain (standard, target-only, block, greedy, typical) and tree verification from
// logits for ragged batches (backend/cpu/constrained_batch.hpp) with the constraints in the
// engines' forms (constraint_args.hpp): xgrammar's int32 bitmask over the target rows, and
// per sequence vLLM's sampling parameters (allowed ids, bad words, min_tokens with stop ids,
// repetition / frequency / presence penalties over the prompt and output ids). CPU only.
#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "constraint_args.hpp"
#include "specdec/backend/cpu/constrained_batch.hpp"
#include "specdec/backend/cpu/constrained_draft_probs_batch.hpp"
#include "specdec/backend/status.hpp"

namespace specdec::python {

namespace {

/// Refuses CUDA inputs: the kernels have no constrained form yet.
void require_host_inputs(std::initializer_list<std::pair<py::handle, std::string_view>> arrays) {
  const std::string_view cuda = first_cuda(arrays);
  if (!cuda.empty()) {
    throw Error(std::string(cuda),
                "is a CUDA tensor; constrained verification runs on the CPU for now");
  }
}

/// The CPU backend for `threads` (0 = every hardware thread).
backend::Cpu threads_arg(int threads) {
  if (threads < 0) {
    throw Error("threads", fmt::format("{} is negative (0 = every hardware thread)", threads));
  }
  return backend::cpu.with_threads(threads);
}

/// Runs `verify` with the GIL released; the constraints' C++ names become the Python ones.
template <class Verify>
void run_constrained(Verify&& verify) {
  try {
    py::gil_scoped_release unlocked;
    verify();
  } catch (const Error& e) {
    throw Error(python_name(e.argument()), e.problem());
  }
}

/// `outputs`, then the status words when asked for.
py::tuple with_status(py::tuple outputs, const std::optional<Output<std::int32_t>>& status) {
  if (!status) return outputs;
  return py::tuple(outputs + py::make_tuple(status->result()));
}

/// The arguments of a constrained chain batch as passed (warps and streams None for greedy
/// matching, which reads neither).
struct ChainInputs {
  py::handle target_logits, draft_logits, warps, draft_tokens, streams, draft_offsets;
};

/// What a constrained chain batch's draft side holds: logits (warped as the target's), nothing
/// (target-only), or vLLM's draft probabilities (used as given).
enum class DraftSide { kLogits, kNone, kProbs };

/// A constrained chain batch with its inputs read (GIL held).
struct ConstrainedChainCall {
  Array target, draft, tokens, offsets;
  std::vector<Warp> warps;
  std::vector<RandomStream> streams;
  std::optional<BatchConstraints> constraints;
  std::optional<Output<Token>> emitted;
  std::optional<Output<std::int32_t>> accepted, status;
  backend::Cpu cpu;
  ChainBatchLogitsArgs<float> args;

  DraftSide side;

  ConstrainedChainCall(const ChainInputs& in, const ConstraintInputs& c, DraftSide side_,
                       int threads, bool check)
      : side(side_) {
    const bool draft_rows = side != DraftSide::kNone;
    const char* draft_name = side == DraftSide::kProbs ? "draft_probs" : "draft_logits";
    require_host_inputs({{in.target_logits, "target_logits"},
                         {in.draft_logits, draft_name},
                         {in.draft_tokens, "draft_tokens"},
                         {in.draft_offsets, "draft_offsets"},
                         {c.bitmask, "bitmask"}});
    target = rows_f32_arg(in.target_logits, "target_logits", 2);
    if (draft_rows) draft = rows_f32_arg(in.draft_logits, draft_name, 2);
    tokens = token_arg(in.draft_tokens, "draft_tokens", 1);
    offsets = int32_arg(in.draft_offsets, "draft_offsets", 1);
    if (offsets.size() == 0) throw Error("draft_offsets", "is empty; expected B + 1 offsets");
    const std::int64_t batch = offsets.size() - 1;
    const auto spans = offsets.span<std::int32_t>("draft_offsets");
    const std::int64_t drafts = std::max(spans.back(), 0);
    // The rows before the constraints, whose shapes follow theirs.
    if (target.dim(0) != drafts + batch) {
      throw Error("target_logits", fmt::format("has {} rows; draft_offsets gives G + B = {}",
                                               target.dim(0), drafts + batch));
    }
    warps = in.warps.is_none() ? std::vector<Warp>{Warp{.temperature = 0.0f}} : warps_arg(in.warps);
    streams = in.streams.is_none() ? std::vector<RandomStream>(static_cast<std::size_t>(batch))
                                   : streams_arg(in.streams);
    constraints.emplace(c, batch, target.dim(0), target.dim(1));
    cpu = threads_arg(threads);
    const ArrayKind kind = kind_of(target, tokens);
    emitted.emplace(std::vector<std::int64_t>{drafts + batch}, kind);
    accepted.emplace(std::vector<std::int64_t>{batch}, kind);
    if (!check) status.emplace(std::vector<std::int64_t>{batch + 1}, kind);
    args = {.draft_offsets = spans,
            .target_logits = batch_matrix<float>(target, "target_logits"),
            .draft_logits =
                draft_rows ? batch_matrix<float>(draft, draft_name) : MatrixView<const float>{},
            .warps = warps,
            .draft_tokens = tokens.span<Token>("draft_tokens"),
            .streams = streams,
            .emitted = emitted->values(),
            .accepted = accepted->values(),
            .status = status ? status->values() : std::span<std::int32_t>{}};
  }

  /// verify(cpu, args, constraints, workspace): one of the CPU's constrained chain batches.
  template <class Verify>
  py::tuple run(Verify&& verify) {
    const constrained::ChainBatchConstraints view = constraints->view();
    try {
      run_constrained([&] { verify(cpu, args, view, thread_workspace()); });
    } catch (const Error& e) {
      // The batch names the probability rows as its draft_logits.
      if (side != DraftSide::kProbs || !e.argument().starts_with("draft_logits")) throw;
      throw Error("draft_probs" + e.argument().substr(12), e.problem());
    }
    return with_status(py::make_tuple(emitted->result(), accepted->result()), status);
  }
};

/// The arguments of a constrained tree batch as passed.
struct TreeInputs {
  py::handle node_offsets, tokens, parents, target_logits, draft_logits, warps, streams;
};

/// A constrained tree batch with its inputs read (GIL held).
struct ConstrainedTreeCall {
  Array offsets, tokens, parents, target, draft;
  std::vector<Warp> warps;
  std::vector<RandomStream> streams;
  std::optional<BatchConstraints> constraints;
  std::optional<Output<std::int32_t>> accepted_nodes, accepted, status;
  std::optional<Output<Token>> final_tokens;
  std::optional<Output<std::uint8_t>> bonus;
  backend::Cpu cpu;
  TreeBatchArgs args;

  ConstrainedTreeCall(const TreeInputs& in, const ConstraintInputs& c, bool draft_rows, int threads,
                      bool check) {
    require_host_inputs({{in.target_logits, "target_logits"},
                         {in.draft_logits, "draft_logits"},
                         {in.tokens, "tokens"},
                         {in.parents, "parents"},
                         {in.node_offsets, "node_offsets"},
                         {c.bitmask, "bitmask"}});
    offsets = int32_arg(in.node_offsets, "node_offsets", 1);
    tokens = token_arg(in.tokens, "tokens", 1);
    parents = int32_arg(in.parents, "parents", 1);
    target = rows_f32_arg(in.target_logits, "target_logits", 2);
    if (draft_rows) draft = rows_f32_arg(in.draft_logits, "draft_logits", 2);
    if (offsets.size() == 0) throw Error("node_offsets", "is empty; expected B + 1 offsets");
    const std::int64_t batch = offsets.size() - 1;
    const std::int64_t nodes = std::max(offsets.span<std::int32_t>("node_offsets").back(), 0);
    if (target.dim(0) != nodes + batch) {
      throw Error("target_logits", fmt::format("has {} rows; node_offsets gives N + B = {}",
                                               target.dim(0), nodes + batch));
    }
    warps = warps_arg(in.warps);
    streams = streams_arg(in.streams);
    constraints.emplace(c, batch, target.dim(0), target.dim(1));
    cpu = threads_arg(threads);
    const ArrayKind kind = kind_of(target, tokens);
    accepted_nodes.emplace(std::vector<std::int64_t>{tokens.size()}, kind);
    std::fill(accepted_nodes->values().begin(), accepted_nodes->values().end(), -1);
    accepted.emplace(std::vector<std::int64_t>{batch}, kind);
    final_tokens.emplace(std::vector<std::int64_t>{batch}, kind);
    bonus.emplace(std::vector<std::int64_t>{batch}, kind);
    if (!check) status.emplace(std::vector<std::int64_t>{batch + 1}, kind);
    args = {.node_offsets = offsets.span<std::int32_t>("node_offsets"),
            .trees = {tokens.span<Token>("tokens"), parents.span<std::int32_t>("parents")},
            .target_rows = batch_matrix<float>(target, "target_logits"),
            .draft_rows =
                draft_rows ? batch_matrix<float>(draft, "draft_logits") : MatrixView<const float>{},
            .streams = streams,
            .accepted_nodes = accepted_nodes->values(),
            .accepted = accepted->values(),
            .final_tokens = final_tokens->values(),
            .bonus = bonus->values(),
            .status = status ? status->values() : std::span<std::int32_t>{}};
  }

  py::tuple run(const Rule* rule) {
    const constrained::ChainBatchConstraints view = constraints->view();
    run_constrained([&] {
      if (rule != nullptr) {
        constrained::verify_tree_batch_logits(cpu, *rule, args, warps, view, thread_workspace());
      } else {
        constrained::verify_tree_batch_target_only_logits(cpu, args, warps, view,
                                                          thread_workspace());
      }
    });
    return with_status(py::make_tuple(accepted_nodes->result(), accepted->result(),
                                      final_tokens->result(), bonus->result()),
                       status);
  }
};

constexpr const char* kConstraintsDoc =
    "Constraints (each optional, None = none), in the engines' forms:\n"
    "bitmask: xgrammar's / vLLM's packed grammar mask, int32 [G + B, ceil(V / 32)], a row per\n"
    "target row (bit j of word k set = token 32k + j allowed).\n"
    "Per sequence, a list of B entries (each None or a 1-D list / array of token ids):\n"
    "allowed_token_ids (the only ids allowed), stop_token_ids (masked while the output plus the\n"
    "row's draft prefix is shorter than min_tokens[b]; list the end-of-sequence id here),\n"
    "prompt_token_ids and output_token_ids (the tokens so far, drafts excluded: they give the\n"
    "penalties' counts, min_tokens' length and bad words' history); bad_words: B lists of\n"
    "words, each a list of ids (its last id masked where the history ends with the others).\n"
    "min_tokens int [B]; repetition_penalty, frequency_penalty, presence_penalty float32 [B]\n"
    "(vLLM's SamplingParams: 1, 0, 0 = none).\n"
    "Ids of the prompt or output outside the vocabulary raise specdec.Error; other bad\n"
    "constraints follow `check` (False: the sequence fails alone, BAD_ROW for a row that\n"
    "allows no token, TOKEN_OUTSIDE_VOCAB for an id outside the vocabulary).";

/// The keyword arguments of the constraints, with `threads` and `check` after them.
auto constraint_args() {
  return std::make_tuple(
      py::arg("bitmask") = py::none(), py::arg("allowed_token_ids") = py::none(),
      py::arg("bad_words") = py::none(), py::arg("min_tokens") = py::none(),
      py::arg("stop_token_ids") = py::none(), py::arg("repetition_penalty") = py::none(),
      py::arg("frequency_penalty") = py::none(), py::arg("presence_penalty") = py::none(),
      py::arg("prompt_token_ids") = py::none(), py::arg("output_token_ids") = py::none(),
      py::arg("threads") = 0, py::arg("check") = true);
}

/// m.def(name, f, leading..., the constraint arguments, doc).
template <class F, class... Leading>
void def_constrained(py::module_& m, const char* name, F&& f, const std::string& doc,
                     Leading... leading) {
  std::apply(
      [&](auto... tail) { m.def(name, std::forward<F>(f), leading..., tail..., doc.c_str()); },
      constraint_args());
}

using H = py::handle;

/// A CPU constrained chain batch (constrained::verify_chain_batch_logits's signature).
using ChainBatch = void (*)(const backend::Cpu&, const ChainBatchLogitsArgs<float>&,
                            const constrained::ChainBatchConstraints&, Workspace&);

/// The constrained chain batch `verify` whose draft side is rows (`side`: logits or
/// probabilities), as bound.
template <DraftSide side, ChainBatch verify>
py::tuple chain_with_draft_rows(H target, H draft, H warps, H tokens, H streams, H offsets,
                                H bitmask, H allowed, H words, H min_tokens, H stop, H repetition,
                                H frequency, H presence, H prompt, H output, int threads,
                                bool check) {
  return ConstrainedChainCall({target, draft, warps, tokens, streams, offsets},
                              {bitmask, allowed, words, min_tokens, stop, repetition, frequency,
                               presence, prompt, output},
                              side, threads, check)
      .run(verify);
}

/// Binds chain_with_draft_rows<side, verify> as `name`: the keywords of
/// constrained::verify_chain_batch_logits, the draft rows named by their side.
template <DraftSide side, ChainBatch verify>
void def_chain_with_draft_rows(py::module_& m, const char* name, const std::string& doc) {
  def_constrained(m, name, &chain_with_draft_rows<side, verify>, doc + kConstraintsDoc,
                  py::kw_only(), py::arg("target_logits"),
                  py::arg(side == DraftSide::kLogits ? "draft_logits" : "draft_probs"),
                  py::arg("warps"), py::arg("draft_tokens"), py::arg("streams"),
                  py::arg("draft_offsets"));
}

/// constrained::verify_chain_batch_typical_logits with the rule read from `rule_object`, as bound.
py::tuple typical_chain(H rule_object, H target, H warps, H tokens, H streams, H offsets, H bitmask,
                        H allowed, H words, H min_tokens, H stop, H repetition, H frequency,
                        H presence, H prompt, H output, int threads, bool check) {
  if (!py::isinstance<Typical>(rule_object)) {
    throw Error("rule", fmt::format("is a {}; expected a Typical", type_name(rule_object)));
  }
  const Typical rule = rule_object.cast<Typical>();
  return ConstrainedChainCall({target, py::none(), warps, tokens, streams, offsets},
                              {bitmask, allowed, words, min_tokens, stop, repetition, frequency,
                               presence, prompt, output},
                              DraftSide::kNone, threads, check)
      .run([&](const backend::Cpu& cpu, const ChainBatchLogitsArgs<float>& args,
               const constrained::ChainBatchConstraints& view, Workspace& ws) {
        constrained::verify_chain_batch_typical_logits(cpu, args, rule, view, ws);
      });
}

}  // namespace

void bind_constraints(py::module_& m) {
  def_chain_with_draft_rows<DraftSide::kLogits, &constrained::verify_chain_batch_logits>(
      m, "verify_chain_batch_logits_constrained",
      "verify_chain_batch_logits with each sequence's target rows transformed as the request\n"
      "asks: penalties applied, then masked ids set to -inf, then warped with warps[b];\n"
      "sequence b's law is the transformed target's, bit for bit the unconstrained call on\n"
      "logits transformed beforehand. Ragged layout only: draft_offsets [B + 1],\n"
      "draft_tokens [G], target_logits [G + B, V], draft_logits [G, V] (float32; float16 /\n"
      "bfloat16 widened); a draft row is used as given (a masked draft token is rejected).\n"
      "Returns (emitted [G + B], accepted [B]) and with check=False the status words.\n");
  def_constrained(
      m, "verify_chain_batch_target_only_logits_constrained",
      [](H target, H warps, H tokens, H streams, H offsets, H bitmask, H allowed, H words,
         H min_tokens, H stop, H repetition, H frequency, H presence, H prompt, H output,
         int threads, bool check) {
        return ConstrainedChainCall({target, py::none(), warps, tokens, streams, offsets},
                                    {bitmask, allowed, words, min_tokens, stop, repetition,
                                     frequency, presence, prompt, output},
                                    DraftSide::kNone, threads, check)
            .run(constrained::verify_chain_batch_target_only_logits);
      },
      std::string("verify_chain_batch_logits_constrained without draft logits: the target-only\n"
                  "walk (verify_chain_target_only) on the transformed target rows.\n") +
          kConstraintsDoc,
      py::kw_only(), py::arg("target_logits"), py::arg("warps"), py::arg("draft_tokens"),
      py::arg("streams"), py::arg("draft_offsets"));
  def_chain_with_draft_rows<DraftSide::kProbs, &constrained::verify_chain_batch_draft_probs>(
      m, "verify_chain_batch_draft_probs_constrained",
      "verify_chain_batch_logits_constrained with the draft side as probabilities (vLLM's\n"
      "draft_probs [G, V] float32, the rows the drafts were drawn from), used as given: the\n"
      "target rows are transformed and warped with warps[b], sequence b equals\n"
      "verify_chain(Rejection) on its transformed, warped target rows and its draft_probs,\n"
      "bit for bit. A draft token outside [0, V) (vLLM's placeholder -1) or of draft\n"
      "probability 0 is rejected with certainty: the chain ends there with a draw from the\n"
      "residual [p - q]+. Returns (emitted [G + B], accepted [B]) and with check=False the\n"
      "status words.\n");
  def_chain_with_draft_rows<DraftSide::kLogits, &constrained::verify_block_batch_logits>(
      m, "verify_block_batch_logits_constrained",
      "Block verification (Sun et al. 2024; lossless) of each sequence on its transformed\n"
      "target rows: verify_chain_batch_logits_constrained's arguments and outputs, sequence b\n"
      "bit for bit verify_block on its transformed target rows and its draft rows, both\n"
      "warped with warps[b], drawing from streams[b]. A masked draft token has target\n"
      "probability 0, so no block passes it and the rows after it are never read.\n");
  def_chain_with_draft_rows<DraftSide::kProbs, &constrained::verify_block_batch_draft_probs>(
      m, "verify_block_batch_draft_probs_constrained",
      "verify_block_batch_logits_constrained with the draft side as probabilities (vLLM's\n"
      "draft_probs [G, V] float32), used as given: sequence b is bit for bit verify_block on\n"
      "its transformed target rows warped with warps[b] and its draft_probs. Every draft\n"
      "token must lie in [0, V) with draft probability > 0 (else specdec.Error naming\n"
      "draft_tokens[b][i]; cut a chain before such a token).\n");
  def_constrained(
      m, "verify_chain_batch_greedy_logits_constrained",
      [](H target, H tokens, H offsets, H bitmask, H allowed, H words, H min_tokens, H stop,
         H repetition, H frequency, H presence, H prompt, H output, int threads, bool check) {
        return ConstrainedChainCall({target, py::none(), py::none(), tokens, py::none(), offsets},
                                    {bitmask, allowed, words, min_tokens, stop, repetition,
                                     frequency, presence, prompt, output},
                                    DraftSide::kNone, threads, check)
            .run(constrained::verify_chain_batch_greedy_logits);
      },
      std::string(
          "Greedy matching on the transformed target rows (no warps, streams or draft rows: no\n"
          "draws): token i of sequence b is accepted while it is the argmax of its transformed\n"
          "row (ties to the lowest id), the first other one is replaced by that argmax, and a\n"
          "chain accepted whole ends with its last row's argmax; sequence b is\n"
          "verify_chain(Greedy()) on its transformed rows, token for token. target_logits\n"
          "[G + B, V], draft_tokens [G], draft_offsets [B + 1]. Returns (emitted [G + B],\n"
          "accepted [B]) and with check=False the status words.\n") +
          kConstraintsDoc,
      py::kw_only(), py::arg("target_logits"), py::arg("draft_tokens"), py::arg("draft_offsets"));
  def_constrained(
      m, "verify_chain_batch_typical_logits_constrained", &typical_chain,
      std::string(
          "LOSSY: typical acceptance (Medusa; rule a Typical) on the transformed target rows\n"
          "warped with warps[b] (no draft rows): token i is accepted when its probability\n"
          "exceeds min(rule.epsilon, rule.delta * exp(-H)) of its row, the first other one is\n"
          "replaced by a draw from that row, and a chain accepted whole ends with a draw from its\n"
          "last row; sequence b is verify_chain(rule) on its transformed, warped rows with\n"
          "streams[b], token for token. Layout and outputs as\n"
          "verify_chain_batch_target_only_logits_constrained.\n") +
          kConstraintsDoc,
      py::arg("rule"), py::kw_only(), py::arg("target_logits"), py::arg("warps"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets"));
  def_constrained(
      m, "verify_tree_batch_logits_constrained",
      [](H rule_object, H offsets, H tokens, H parents, H target, H draft, H warps, H streams,
         H bitmask, H allowed, H words, H min_tokens, H stop, H repetition, H frequency, H presence,
         H prompt, H output, int threads, bool check) {
        const Rule rule = rule_arg(rule_object);
        return ConstrainedTreeCall({offsets, tokens, parents, target, draft, warps, streams},
                                   {bitmask, allowed, words, min_tokens, stop, repetition,
                                    frequency, presence, prompt, output},
                                   /*draft_rows=*/true, threads, check)
            .run(&rule);
      },
      std::string(
          "Tree verification from logits for B ragged trees with each tree's target rows\n"
          "transformed as for verify_chain_batch_logits_constrained, a node's draft prefix being\n"
          "its ancestors' tokens and its own: tree b is verify_tree_logits(rule, warps[b], ...)\n"
          "on its transformed rows, bit for bit. node_offsets [B + 1]; tokens, parents [N] (as\n"
          "verify_tree_batch); target_logits, draft_logits [N + B, V] (tree b's N_b + 1 rows from\n"
          "row node_offsets[b] + b, root row first; float32, float16 / bfloat16 widened). Returns\n"
          "(accepted_nodes [N], accepted [B], final_tokens [B], bonus [B]) and with check=False\n"
          "the status words. The bitmask has N + B rows.\n") +
          kConstraintsDoc,
      py::arg("rule"), py::kw_only(), py::arg("node_offsets"), py::arg("tokens"),
      py::arg("parents"), py::arg("target_logits"), py::arg("draft_logits"), py::arg("warps"),
      py::arg("streams"));
  def_constrained(
      m, "verify_tree_batch_target_only_logits_constrained",
      [](H offsets, H tokens, H parents, H target, H warps, H streams, H bitmask, H allowed,
         H words, H min_tokens, H stop, H repetition, H frequency, H presence, H prompt, H output,
         int threads, bool check) {
        return ConstrainedTreeCall({offsets, tokens, parents, target, py::none(), warps, streams},
                                   {bitmask, allowed, words, min_tokens, stop, repetition,
                                    frequency, presence, prompt, output},
                                   /*draft_rows=*/false, threads, check)
            .run(nullptr);
      },
      std::string("verify_tree_batch_logits_constrained without draft logits: tree b is\n"
                  "verify_tree_target_only_logits on its transformed rows, bit for bit.\n") +
          kConstraintsDoc,
      py::kw_only(), py::arg("node_offsets"), py::arg("tokens"), py::arg("parents"),
      py::arg("target_logits"), py::arg("warps"), py::arg("streams"));
}

}  // namespace specdec::python
