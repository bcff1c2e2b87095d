// SPDX-License-Identifier: MIT
// Errors of one sequence of a batch, renamed to say which sequence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "specdec/core/error.hpp"

namespace specdec::detail {

/// Rethrows a per-sequence error with the sequence index after the argument's name:
/// "target_rows[2]" of sequence 5 becomes "target_rows[5][2]", "vocab" becomes "vocab (sequence 5)".
[[noreturn]] inline void rethrow_for_sequence(const Error& e, std::int64_t sequence) {
  const std::string& argument = e.argument();
  const std::string& problem = e.problem();
  const auto bracket = argument.find('[');
  if (bracket == std::string::npos) {
    throw Error(fmt::format("{} (sequence {})", argument, sequence), problem);
  }
  throw Error(
      fmt::format("{}[{}]{}", argument.substr(0, bracket), sequence, argument.substr(bracket)),
      problem);
}

}  // namespace specdec::detail
