// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>

namespace specdec {

/// A vocabulary index. Signed so that -1 can mark "no token" (padding, no parent).
using Token = std::int32_t;

/// Marks the absence of a token or node (a root's parent, a padded slot).
inline constexpr Token kNoToken = -1;

}  // namespace specdec
