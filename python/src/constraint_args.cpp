// SPDX-License-Identifier: MIT
// Reading the constraint arguments (constraint_args.hpp): per-sequence lists and values checked
// against the batch, each sequence's ids, bad words and penalised tokens held where its
// LogitConstraints' spans view them.
#include "constraint_args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <string_view>
#include <utility>

#include "args.hpp"

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

/// Tokens of a per-sequence list entry (None: none) as a 1-D int32 array.
Array entry_tokens(const std::vector<py::object>& entries, std::int64_t b, std::string_view name) {
  if (entries.empty() || entries[static_cast<std::size_t>(b)].is_none()) {
    return token_arg(py::list(), name, 1);
  }
  return token_arg(entries[static_cast<std::size_t>(b)], fmt::format("{}[{}]", name, b), 1);
}

/// (token, count in the output, in the prompt) for every token of `prompt` or `output`.
void penalised_tokens(std::span<const Token> prompt, std::span<const Token> output,
                      std::vector<constrained::PenalisedToken>& out) {
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

}  // namespace

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

BatchConstraints::BatchConstraints(const ConstraintInputs& in, std::int64_t batch_,
                                   std::int64_t rows, std::int64_t vocab)
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
  frequency = per_sequence_values(in.frequency_penalty, "frequency_penalty", batch, values_f32_arg);
  presence = per_sequence_values(in.presence_penalty, "presence_penalty", batch, values_f32_arg);
  held.resize(static_cast<std::size_t>(batch));  // never resized again: the spans below view it
  sequences.resize(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto i = static_cast<std::size_t>(b);
    SequenceConstraints& s = held[i];
    constrained::LogitConstraints& c = sequences[i];
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
    constrained::Penalties& p = c.penalties;
    if (repetition) p.repetition = repetition->span<float>("repetition_penalty")[i];
    if (frequency) p.frequency = frequency->span<float>("frequency_penalty")[i];
    if (presence) p.presence = presence->span<float>("presence_penalty")[i];
    if (p.any()) {
      penalised_tokens(prompt_ids.span<Token>("prompt_token_ids"), out_span, s.penalised);
      p.tokens = s.penalised;
    }
  }
}

}  // namespace specdec::python
