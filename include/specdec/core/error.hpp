// SPDX-License-Identifier: MIT
// The one exception type of the library: it names the argument and the bad value.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace specdec {

/// Thrown by every public entry point that is handed invalid input.
/// `what()` reads "<argument>: <problem>", e.g. "target[3]: nan is not a probability".
class Error : public std::invalid_argument {
 public:
  Error(std::string argument, const std::string& problem)
      : std::invalid_argument(argument + ": " + problem), argument_(std::move(argument)) {}

  /// The name of the argument (or field) that was rejected.
  [[nodiscard]] const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
};

namespace detail {

template <class... Args>
[[noreturn]] void fail(std::string_view argument, fmt::format_string<Args...> problem,
                       Args&&... args) {
  throw Error(std::string(argument), fmt::format(problem, std::forward<Args>(args)...));
}

}  // namespace detail
}  // namespace specdec
