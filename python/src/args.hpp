// SPDX-License-Identifier: MIT
// Arguments that are not arrays but are read the same way by every entry point: rules, random
// streams, warps and draft trees, each refused with a specdec::Error naming the argument.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "arrays.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/tree/tree.hpp"
#include "specdec/verify/verify.hpp"

namespace specdec::python {

namespace py = pybind11;

/// The Python type's name of `obj`, for messages.
std::string type_name(py::handle obj);

/// Any of the rule classes as a Rule.
Rule rule_arg(py::handle obj);

/// RandomStream's bytes as int32 words: seed (low, high), sequence, position, node, domain.
inline constexpr std::int64_t kStreamWords = 6;
static_assert(sizeof(RandomStream) == kStreamWords * sizeof(std::int32_t));

/// A sequence of RandomStream, one per sequence of a batch (`name`: the argument's name), or a
/// stream tensor: an int32 array [B, 6] of their bytes (specdec.stream_tensor), copied.
std::vector<RandomStream> streams_arg(py::handle obj, std::string_view name = "streams");

/// True when `obj` is a stream tensor (an array, not a sequence of RandomStream).
bool is_stream_tensor(py::handle obj);

/// A stream tensor checked as int32 [B, 6], where it lives (host or device).
Array stream_tensor_arg(py::handle obj, std::string_view name = "streams");

/// A Warp, or a sequence of them (one per sequence).
std::vector<Warp> warps_arg(py::handle obj);

/// A sequence of DraftTree (copies: the batch functions take a span of trees).
std::vector<DraftTree> trees_arg(py::handle obj);

/// One DraftTree, the argument `tree`.
const DraftTree& tree_arg(py::handle obj);

}  // namespace specdec::python
