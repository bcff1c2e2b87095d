// SPDX-License-Identifier: MIT
// The one exception type of the library: it names the argument and the bad value.
#pragma once

// fmt 9 does not compile under nvcc in C++20 (it turns its constexpr off for __NVCC__ but keeps
// constexpr callers), so CUDA sources get the exception and names without the formatting helper.
#if !defined(__CUDACC__)
#include <fmt/format.h>
#endif

#include <cstdint>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace specdec {

/// Thrown by every public entry point that is handed invalid input.
/// `what()` reads "<argument>: <problem>", e.g. "target[3]: nan is not a probability"; the two
/// parts are also kept apart, so a caller can rename the argument without parsing the message.
class Error : public std::invalid_argument {
 public:
  Error(std::string argument, std::string problem)
      : std::invalid_argument(argument + ": " + problem),
        argument_(std::move(argument)),
        problem_(std::move(problem)) {}

  /// The name of the argument (or field) that was rejected, e.g. "target[3]".
  [[nodiscard]] const std::string& argument() const noexcept { return argument_; }
  /// What is wrong with it, e.g. "nan is not a probability".
  [[nodiscard]] const std::string& problem() const noexcept { return problem_; }

 private:
  std::string argument_;
  std::string problem_;
};

/// The name of a checked argument with up to two indices ("rows", "rows[3]", "rows[3][7]"),
/// spelled out only when a check fails: validating every row of a batch allocates nothing.
/// Holds a view of `base`, which must outlive it.
class ArgName {
 public:
  ArgName(const char* base) : base_(base) {}         // NOLINT: implicit by design
  ArgName(std::string_view base) : base_(base) {}    // NOLINT
  ArgName(const std::string& base) : base_(base) {}  // NOLINT
  ArgName(std::string_view base, std::int64_t index) : base_(base), indices_{index, 0}, count_(1) {}

  /// The same name with one more index (at most two in all).
  [[nodiscard]] ArgName operator[](std::int64_t index) const {
    ArgName out = *this;
    if (out.count_ < 2) out.indices_[out.count_++] = index;
    return out;
  }
  [[nodiscard]] std::string str() const {
    std::string out(base_);
    // Plain concatenation: fmt's compile-time format check fails under nvcc, which includes this.
    for (int i = 0; i < count_; ++i) out += '[' + std::to_string(indices_[i]) + ']';
    return out;
  }

 private:
  std::string_view base_;
  std::int64_t indices_[2] = {0, 0};
  int count_ = 0;
};

namespace detail {

#if !defined(__CUDACC__)
template <class... Args>
[[noreturn]] void fail(const ArgName& argument, fmt::format_string<Args...> problem,
                       Args&&... args) {
  throw Error(argument.str(), fmt::format(problem, std::forward<Args>(args)...));
}
#endif


/// The one rule for naming an item of a batch: an error raised for item `sequence` (a sequence, a
/// tree, a row of beams) is rethrown with the item's index as the first index of the argument:
/// "target_rows[2]" of sequence 5 becomes "target_rows[5][2]"; a name without an index gets a
/// suffix: "vocab" becomes "vocab (sequence 5)".
[[noreturn]] inline void rethrow_for_sequence(const Error& e, std::int64_t sequence) {
  const std::string& argument = e.argument();
  const auto bracket = argument.find('[');
  if (bracket == std::string::npos) {
    throw Error(argument + " (sequence " + std::to_string(sequence) + ")", e.problem());
  }
  throw Error(argument.substr(0, bracket) + '[' + std::to_string(sequence) + ']' +
                  argument.substr(bracket),
              e.problem());
}

}  // namespace detail
}  // namespace specdec
