// SPDX-License-Identifier: MIT
// Batched Philox draws: one row of uniforms (or Gumbels) per RandomStream, on any backend.
#pragma once

#include "specdec/backend/batch_checks.hpp"
#include "specdec/backend/shapes.hpp"
#include "specdec/core/philox.hpp"

namespace specdec {

/// The views of one fill_random call: out[s][i] = draw first + i of stream s, one row of `out`
/// per stream (`out` lives where the backend computes).
/// `streams` is a Resident array: with on_device(streams, out.rows) a CUDA call makes no host copy,
/// allocation or synchronisation (and needs no workspace), so it can be captured in a CUDA graph
/// and replayed with new contents.
struct FillRandomArgs {
  Resident<const RandomStream> streams{};  // one per row of out
  std::uint32_t first = 0;
  MatrixView<float> out{};
  RandomKind kind = RandomKind::kUniform;
};

namespace detail {

template <class Backend>
struct FillRandomImpl : NoBackendImpl<Backend> {};

/// The checks of a FillRandomArgs: one stream per row of out, and draws within a stream's 2^32.
inline void check_fill_random(const FillRandomArgs& args) {
  if (args.streams.empty()) fail("streams", "is empty");
  const auto streams = args.streams.size();
  if (args.out.rows != static_cast<std::int64_t>(streams))
    fail("out", "has {} rows, expected one per stream ({})", args.out.rows, streams);
  check_resident("streams", args.streams, streams);
  const std::int64_t cols = args.out.cols;
  if (cols < 0 || args.out.stride < cols)
    fail("out", "has {} columns and stride {}", cols, args.out.stride);
  if (static_cast<std::uint64_t>(args.first) + static_cast<std::uint64_t>(cols) > (1ull << 32)) {
    fail("first", "draws {} .. {} run past the 2^32 draws of a stream", args.first,
         static_cast<std::uint64_t>(args.first) + static_cast<std::uint64_t>(cols) - 1);
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
/// `streams` is a Resident array; `out` lives where the backend computes (host or device). On
/// CUDA, a call with host streams cannot be captured in a CUDA graph (specdec::Error naming
/// streams); one with streams on the device can.
/// Throws specdec::Error naming the bad argument.
template <backend::BackendPolicy Backend, class Scratch>
void fill_random(const Backend& backend, const FillRandomArgs& args, Scratch&& workspace) {
  detail::check_fill_random(args);
  detail::FillRandomImpl<Backend>::run(backend, args, std::forward<Scratch>(workspace));
}

/// fill_random with host streams: fill_random(backend, FillRandomArgs{streams, first, out, kind}).
template <backend::BackendPolicy Backend, class Scratch>
void fill_random(const Backend& backend, std::span<const RandomStream> streams, std::uint32_t first,
                 MatrixView<float> out, RandomKind kind, Scratch&& workspace) {
  fill_random(backend, FillRandomArgs{.streams = streams, .first = first, .out = out, .kind = kind},
              std::forward<Scratch>(workspace));
}

}  // namespace specdec
