// SPDX-License-Identifier: MIT
// Constrained chain and tree verification from logits for ragged batches
// (backend/cpu/constrained_batch.hpp) with the constraints in the engines' forms: xgrammar's int32 bitmask over the target rows, and
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
#include "specdec/backend/cpu/constrained_batch.hpp"
#include "specdec/backend/cpu/constrained_draft_probs_batch.hpp"
#include "specdec/backend/status.hpp"

namespace specdec::python {

namespace {

/// The entries of a per-sequence argument (a list, or an array read row by row): none for None,
/// else exactly `batch`.
std::vector<py::object> per_sequence(py::handle obj, std::string_view name, std::int64_t batch) {
  std::vector<py::object> out;
  if (obj.is_none()) return out;
  if (!is_array_like(obj) && !py::isinstance<py::sequence>(obj)) {
    throw Error(std::string(name), fmt::format("is a {}; expected a list with one entry per "
                                               "sequence",
                                               type_name(obj)));
  }
  const auto count = static_cast<std::int64_t>(py::len(obj));
  if (count != batch) {
    throw Error(std::string(name),
                fmt::format("has {} entries; expected {} (one per sequence)", count, batch));
  }
  for (std::int64_t b = 0; b < batch; ++b) out.push_back(obj[py::int_(b)]);
  return out;
}

/// Per-sequence values (min_tokens, penalties): none for None, else a 1-D array of `batch`.
template <class Read>
std::optional<Array> per_sequence_values(py::handle obj, std::string_view name, std::int64_t batch,
                                         Read read) {
  if (obj.is_none()) return std::nullopt;
  Array a = read(obj, name, 1);
  if (a.size() != batch) {
    throw Error(std::string(name),
                fmt::format("has {} entries; expected {} (one per sequence)", a.size(), batch));
  }
  return a;
}

/// The C++ names of a sequence's constraints as the Python arguments that hold them.
std::string python_name(const std::string& argument) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"constraints.bitmask", "bitmask"},
      {"penalties.repetition", "repetition_penalty"},
      {"penalties.frequency", "frequency_penalty"},
      {"penalties.presence", "presence_penalty"},
      {"penalties.tokens", "output_token_ids"},
      {"allowed", "allowed_token_ids"},
      {"stop_tokens", "stop_token_ids"},
      {"bad_word_offsets", "bad_words"},
      {"output_tail", "output_token_ids"},
      {"target_rows", "target_logits"},
      {"draft_rows", "draft_logits"}};
  for (const auto& [from, to] : kNames) {
    if (argument.starts_with(from) &&
        (argument.size() == from.size() || argument[from.size()] == '[' ||
         argument[from.size()] == ' ')) {
      return std::string(to) + argument.substr(from.size());
    }
  }
  return argument;
}

/// The constraints of one sequence and the memory they view.
struct SequenceConstraints {
  Array allowed, stop;
  std::vector<Array> words;
  std::vector<Token> bad_words;
  std::vector<std::int32_t> bad_word_offsets;
  std::vector<Token> tail;
  std::vector<PenalisedToken> penalised;
};

/// Tokens of a per-sequence list entry (None: none) as a 1-D int32 array.
Array entry_tokens(const std::vector<py::object>& entries, std::int64_t b, std::string_view name) {
  if (entries.empty() || entries[static_cast<std::size_t>(b)].is_none()) {
    return token_arg(py::list(), name, 1);
  }
  return token_arg(entries[static_cast<std::size_t>(b)], fmt::format("{}[{}]", name, b), 1);
}

/// (token, count in the output, in the prompt) for every token of `prompt` or `output`.
void penalised_tokens(std::span<const Token> prompt, std::span<const Token> output,
                      std::vector<PenalisedToken>& out) {
  std::vector<Token> sorted_output(output.begin(), output.end());
  std::vector<Token> sorted_prompt(prompt.begin(), prompt.end());
  std::sort(sorted_output.begin(), sorted_output.end());
  std::sort(sorted_prompt.begin(), sorted_prompt.end());
  sorted_prompt.erase(std::unique(sorted_prompt.begin(), sorted_prompt.end()), sorted_prompt.end());
  auto o = sorted_output.begin();
  auto p = sorted_prompt.begin();
  while (o != sorted_output.end() || p != sorted_prompt.end()) {
    const Token t = (p == sorted_prompt.end() || (o != sorted_output.end() && *o < *p)) ? *o : *p;
    const auto run = std::upper_bound(o, sorted_output.end(), t);
    const bool in_prompt = p != sorted_prompt.end() && *p == t;
    out.push_back(
        {.token = t, .count = static_cast<std::int32_t>(run - o), .in_prompt = in_prompt});
    o = run;
    if (in_prompt) ++p;
  }
}

/// The constraint arguments as passed (None where not given).
struct ConstraintInputs {
  py::handle bitmask, allowed_token_ids, bad_words, min_tokens, stop_token_ids, repetition_penalty,
      frequency_penalty, presence_penalty, prompt_token_ids, output_token_ids;
};

/// The constraints of `batch` sequences over `rows` target rows of `vocab` tokens, read (GIL
/// held) into the memory their spans view.
struct BatchConstraints {
  std::int64_t batch = 0;
  std::optional<Array> bitmask, min_tokens, repetition, frequency, presence;
  std::vector<SequenceConstraints> held;
  std::vector<LogitConstraints> sequences;

  BatchConstraints(const ConstraintInputs& in, std::int64_t batch_, std::int64_t rows,
                   std::int64_t vocab)
      : batch(batch_) {
    if (!in.bitmask.is_none()) {
      bitmask = int32_arg(in.bitmask, "bitmask", 2);
      if (bitmask->dim(0) != rows || bitmask->dim(1) != detail::mask_words(vocab)) {
        throw Error("bitmask",
                    fmt::format("has shape [{}, {}]; expected [{}, {}] (ceil(V / 32) "
                                "int32 words per target row)",
                                bitmask->dim(0), bitmask->dim(1), rows, detail::mask_words(vocab)));
      }
    }
    const auto allowed = per_sequence(in.allowed_token_ids, "allowed_token_ids", batch);
    const auto stop = per_sequence(in.stop_token_ids, "stop_token_ids", batch);
    const auto words = per_sequence(in.bad_words, "bad_words", batch);
    const auto prompt = per_sequence(in.prompt_token_ids, "prompt_token_ids", batch);
    const auto output = per_sequence(in.output_token_ids, "output_token_ids", batch);
    min_tokens = per_sequence_values(in.min_tokens, "min_tokens", batch, int32_arg);
    repetition =
        per_sequence_values(in.repetition_penalty, "repetition_penalty", batch, values_f32_arg);
    frequency =
        per_sequence_values(in.frequency_penalty, "frequency_penalty", batch, values_f32_arg);
    presence = per_sequence_values(in.presence_penalty, "presence_penalty", batch, values_f32_arg);
    held.resize(static_cast<std::size_t>(batch));  // never resized again: the spans below view it
    sequences.resize(static_cast<std::size_t>(batch));
    for (std::int64_t b = 0; b < batch; ++b) {
      const auto i = static_cast<std::size_t>(b);
      SequenceConstraints& s = held[i];
      LogitConstraints& c = sequences[i];
      s.allowed = entry_tokens(allowed, b, "allowed_token_ids");
      s.stop = entry_tokens(stop, b, "stop_token_ids");
      // The history is the caller's own: ids outside the vocabulary raise whatever `check` says.
      const Array prompt_ids = entry_tokens(prompt, b, "prompt_token_ids");
      const Array output_ids = entry_tokens(output, b, "output_token_ids");
      check_vocab_tokens(prompt_ids, fmt::format("prompt_token_ids[{}]", b), vocab);
      check_vocab_tokens(output_ids, fmt::format("output_token_ids[{}]", b), vocab);
      const auto out_span = output_ids.span<Token>("output_token_ids");
      c.allowed = s.allowed.span<Token>("allowed_token_ids");
      c.stop_tokens = s.stop.span<Token>("stop_token_ids");
      c.output_length = static_cast<std::int64_t>(out_span.size());
      if (min_tokens) c.min_tokens = min_tokens->span<std::int32_t>("min_tokens")[i];
      // Bad words: a list of token lists per sequence, flattened with offsets.
      std::size_t longest = 0;
      if (!words.empty() && !words[i].is_none()) {
        const std::string name = fmt::format("bad_words[{}]", b);
        if (is_array_like(words[i]) || !py::isinstance<py::sequence>(words[i])) {
          throw Error(name, fmt::format("is a {}; expected a list of words (lists of token ids)",
                                        type_name(words[i])));
        }
        s.bad_word_offsets.push_back(0);
        for (std::size_t w = 0; w < py::len(words[i]); ++w) {
          s.words.push_back(token_arg(words[i][py::int_(w)], fmt::format("{}[{}]", name, w), 1));
          const auto word = s.words.back().span<Token>(name);
          s.bad_words.insert(s.bad_words.end(), word.begin(), word.end());
          s.bad_word_offsets.push_back(static_cast<std::int32_t>(s.bad_words.size()));
          longest = std::max(longest, word.size());
        }
        if (s.words.empty()) s.bad_word_offsets.clear();
      }
      c.bad_words = s.bad_words;
      c.bad_word_offsets = s.bad_word_offsets;
      // The output's last tokens a banned word can start in.
      const std::size_t tail = std::min(out_span.size(), longest > 0 ? longest - 1 : 0);
      s.tail.assign(out_span.end() - static_cast<std::ptrdiff_t>(tail), out_span.end());
      c.output_tail = s.tail;
      Penalties& p = c.penalties;
      if (repetition) p.repetition = repetition->span<float>("repetition_penalty")[i];
      if (frequency) p.frequency = frequency->span<float>("frequency_penalty")[i];
      if (presence) p.presence = presence->span<float>("presence_penalty")[i];
      if (p.any()) {
        penalised_tokens(prompt_ids.span<Token>("prompt_token_ids"), out_span, s.penalised);
        p.tokens = s.penalised;
      }
    }
  }

  [[nodiscard]] ChainBatchConstraints view() const {
    return {.bitmask =
                bitmask ? bitmask->span<std::int32_t>("bitmask") : std::span<const std::int32_t>{},
            .sequences = sequences};
  }
};

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

/// The arguments of a constrained chain batch as passed.
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
    warps = warps_arg(in.warps);
    streams = streams_arg(in.streams);
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

  py::tuple run() {
    const ChainBatchConstraints view = constraints->view();
    try {
      run_constrained([&] {
        if (side == DraftSide::kLogits) {
          verify_chain_batch_logits_constrained(cpu, args, view, thread_workspace());
        } else if (side == DraftSide::kNone) {
          verify_chain_batch_target_only_logits_constrained(cpu, args, view, thread_workspace());
        } else {
          verify_chain_batch_draft_probs_constrained(cpu, args, view, thread_workspace());
        }
      });
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
    const ChainBatchConstraints view = constraints->view();
    run_constrained([&] {
      if (rule != nullptr) {
        verify_tree_batch_logits_constrained(cpu, *rule, args, warps, view, thread_workspace());
      } else {
        verify_tree_batch_target_only_logits_constrained(cpu, args, warps, view,
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

/// A constrained chain batch whose draft side is rows (`side`: logits or probabilities), as bound.
template <DraftSide side>
py::tuple chain_with_draft_rows(H target, H draft, H warps, H tokens, H streams, H offsets,
                                H bitmask, H allowed, H words, H min_tokens, H stop, H repetition,
                                H frequency, H presence, H prompt, H output, int threads,
                                bool check) {
  return ConstrainedChainCall({target, draft, warps, tokens, streams, offsets},
                              {bitmask, allowed, words, min_tokens, stop, repetition, frequency,
                               presence, prompt, output},
                              side, threads, check)
      .run();
}

}  // namespace

void bind_constraints(py::module_& m) {
  def_constrained(
      m, "verify_chain_batch_logits_constrained", &chain_with_draft_rows<DraftSide::kLogits>,
      std::string(
          "verify_chain_batch_logits with each sequence's target rows transformed as the request\n"
          "asks: penalties applied, then masked ids set to -inf, then warped with warps[b];\n"
          "sequence b's law is the transformed target's, bit for bit the unconstrained call on\n"
          "logits transformed beforehand. Ragged layout only: draft_offsets [B + 1],\n"
          "draft_tokens [G], target_logits [G + B, V], draft_logits [G, V] (float32; float16 /\n"
          "bfloat16 widened); a draft row is used as given (a masked draft token is rejected).\n"
          "Returns (emitted [G + B], accepted [B]) and with check=False the status words.\n") +
          kConstraintsDoc,
      py::kw_only(), py::arg("target_logits"), py::arg("draft_logits"), py::arg("warps"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets"));
  def_constrained(
      m, "verify_chain_batch_target_only_logits_constrained",
      [](H target, H warps, H tokens, H streams, H offsets, H bitmask, H allowed, H words,
         H min_tokens, H stop, H repetition, H frequency, H presence, H prompt, H output,
         int threads, bool check) {
        return ConstrainedChainCall({target, py::none(), warps, tokens, streams, offsets},
                                    {bitmask, allowed, words, min_tokens, stop, repetition,
                                     frequency, presence, prompt, output},
                                    DraftSide::kNone, threads, check)
            .run();
      },
      std::string("verify_chain_batch_logits_constrained without draft logits: the target-only\n"
                  "walk (verify_chain_target_only) on the transformed target rows.\n") +
          kConstraintsDoc,
      py::kw_only(), py::arg("target_logits"), py::arg("warps"), py::arg("draft_tokens"),
      py::arg("streams"), py::arg("draft_offsets"));
  def_constrained(
      m, "verify_chain_batch_draft_probs_constrained", &chain_with_draft_rows<DraftSide::kProbs>,
      std::string(
          "verify_chain_batch_logits_constrained with the draft side as probabilities (vLLM's\n"
          "draft_probs [G, V] float32, the rows the drafts were drawn from), used as given: the\n"
          "target rows are transformed and warped with warps[b], sequence b equals\n"
          "verify_chain(Rejection) on its transformed, warped target rows and its draft_probs,\n"
          "bit for bit. A draft token outside [0, V) (vLLM's placeholder -1) or of draft\n"
          "probability 0 is rejected with certainty: the chain ends there with a draw from the\n"
          "residual [p - q]+. Returns (emitted [G + B], accepted [B]) and with check=False the\n"
          "status words.\n") +
          kConstraintsDoc,
      py::kw_only(), py::arg("target_logits"), py::arg("draft_probs"), py::arg("warps"),
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
