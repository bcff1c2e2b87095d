// SPDX-License-Identifier: MIT
// Batched Philox draws: one row of uniforms (or Gumbels) per RandomStream, on any backend.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "specdec/backend/policy.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/views.hpp"

namespace specdec {

/// The shape fill_random is sized for: `streams` rows of `count` draws.
struct FillRandomShape {
  std::int64_t streams = 0;
  std::int64_t count = 0;
};

namespace detail {

template <class Backend>
struct FillRandomImpl {
  static_assert(dependent_false<Backend>,
                "fill_random: no implementation for this backend; include "
                "specdec/backend/cpu/fill_random.hpp or specdec/backend/cuda/fill_random.hpp");
};

inline void check_fill_random(std::size_t streams, std::uint32_t first, std::int64_t rows,
                              std::int64_t cols, std::int64_t stride) {
  if (streams == 0) fail("streams", "is empty");
  if (rows != static_cast<std::int64_t>(streams)) {
    fail("out", "has {} rows, expected one per stream ({})", rows, streams);
  }
  if (cols < 0 || stride < cols) fail("out", "has {} columns and stride {}", cols, stride);
  if (static_cast<std::uint64_t>(first) + static_cast<std::uint64_t>(cols) > (1ull << 32)) {
    fail("first", "draws {} .. {} run past the 2^32 draws of a stream", first,
         static_cast<std::uint64_t>(first) + static_cast<std::uint64_t>(cols) - 1);
  }
}

}  // namespace detail

/// Bytes of workspace fill_random needs on `backend` for `shape`.
template <backend::BackendPolicy Backend>
std::size_t workspace_size(const Backend& backend, const FillRandomShape& shape) {
  return detail::FillRandomImpl<Backend>::workspace_size(backend, shape);
}

/// out[s][i] = streams[s].uniform(first + i) (kUniform) or streams[s].gumbel(first + i) (kGumbel)
/// for every stream s and i < out.cols: the draws first .. first + cols - 1 of each stream, the
/// very values every algorithm of the library takes from that stream. Uniforms are bit-identical
/// on every backend; Gumbels agree to the last few ulps of logf.
/// `streams` is host memory; `out` lives where the backend computes (host or device).
/// Throws specdec::Error naming the bad argument.
template <backend::BackendPolicy Backend, class Scratch>
void fill_random(const Backend& backend, std::span<const RandomStream> streams, std::uint32_t first,
                 MatrixView<float> out, RandomKind kind, Scratch&& workspace) {
  detail::check_fill_random(streams.size(), first, out.rows, out.cols, out.stride);
  detail::FillRandomImpl<Backend>::run(backend, streams, first, out, kind,
                                       std::forward<Scratch>(workspace));
}

}  // namespace specdec
