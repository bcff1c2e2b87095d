// SPDX-License-Identifier: MIT
// The names of a small enum's values (names[i] for values[i]): printing and parsing them, with
// errors that name the argument and list the names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "specdec/core/error.hpp"

namespace specdec::detail {

/// The name of `value`. Throws specdec::Error(argument, "<int> is not <what>") for a value
/// outside `values`.
template <class E, std::size_t N>
std::string_view name_of(const E (&values)[N], const std::string_view (&names)[N], E value,
                         std::string_view argument, std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (values[i] == value) return names[i];
  }
  fail(argument, "{} is not {}", static_cast<int>(value), what);
}

/// The value called `name`. Throws specdec::Error(argument, "'<name>' is not <what> (<the names,
/// comma-separated>)") for any other string.
template <class E, std::size_t N>
E value_named(const E (&values)[N], const std::string_view (&names)[N], std::string_view name,
              std::string_view argument, std::string_view what) {
  std::string all;
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return values[i];
    all += i == 0 ? "" : ", ";
    all += names[i];
  }
  fail(argument, "'{}' is not {} ({})", name, what, all);
}

}  // namespace specdec::detail
