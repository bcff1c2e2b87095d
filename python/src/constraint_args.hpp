// SPDX-License-Identifier: MIT
// The constraint arguments of the constrained batch bindings (bind_constraints.cpp) in the
// engines' forms, xgrammar's int32 bitmask and vLLM's per-sequence sampling parameters, read
// into the ChainBatchConstraints the CPU batches take.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "specdec/backend/cpu/constrained_batch.hpp"

namespace specdec::python {

namespace py = pybind11;

/// The C++ names of a sequence's constraints as the Python arguments that hold them.
std::string python_name(const std::string& argument);

/// The constraints of one sequence and the memory they view.
struct SequenceConstraints {
  Array allowed, stop;
  std::vector<Array> words;
  std::vector<Token> bad_words;
  std::vector<std::int32_t> bad_word_offsets;
  std::vector<Token> tail;
  std::vector<constrained::PenalisedToken> penalised;
};

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
  std::vector<constrained::LogitConstraints> sequences;

  BatchConstraints(const ConstraintInputs& in, std::int64_t batch_, std::int64_t rows,
                   std::int64_t vocab);

  [[nodiscard]] constrained::ChainBatchConstraints view() const {
    return {.bitmask =
                bitmask ? bitmask->span<std::int32_t>("bitmask") : std::span<const std::int32_t>{},
            .sequences = sequences};
  }
};

}  // namespace specdec::python
