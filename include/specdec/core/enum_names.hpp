// SPDX-License-Identifier: MIT
// The names of a small enum's values: printing and parsing them, with errors that name the
// argument and list the names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "specdec/core/error.hpp"

namespace specdec::detail {

/// names[i] names values[i]. Errors name `argument` and say what was expected: `a_value` for a
/// value outside `values` ("a Method"), `a_name` for an unknown name ("a decoding method").
template <class E, std::size_t N>
struct EnumNames {
  const E (&values)[N];
  std::string_view names[N];
  std::string_view argument;
  std::string_view a_value;
  std::string_view a_name;

  /// Throws specdec::Error(argument, "<int> is not <a_value>") for a value outside `values`.
  std::string_view name(E value) const {
    for (std::size_t i = 0; i < N; ++i) {
      if (values[i] == value) return names[i];
    }
    fail(argument, "{} is not {}", static_cast<int>(value), a_value);
  }

  /// Throws specdec::Error(argument, "'<name>' is not <a_name> (<the names, comma-separated>)").
  E parse(std::string_view name) const {
    std::string all;
    for (std::size_t i = 0; i < N; ++i) {
      if (names[i] == name) return values[i];
      all += i == 0 ? "" : ", ";
      all += names[i];
    }
    fail(argument, "'{}' is not {} ({})", name, a_name, all);
  }
};

}  // namespace specdec::detail
