// SPDX-License-Identifier: MIT
// Batched Philox draws: one row of uniforms (or Gumbels) per RandomStream, on any backend.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>
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

/// The views of one fill_random call: out[s][i] = draw first + i of stream s, one row of `out`
/// per stream (`out` lives where the backend computes).
struct FillRandomArgs {
  std::span<const RandomStream> streams{};  // host memory, one per row of out
  std::uint32_t first = 0;
  MatrixView<float> out{};
  RandomKind kind = RandomKind::kUniform;
  /// The streams in the backend's memory (out.rows entries), read where the backend computes:
  /// `streams` must then be empty. A CUDA call with device_streams makes no host copy,
  /// allocation or synchronisation (and needs no workspace), so it can be captured in a CUDA
  /// graph and replayed with new contents. Not scanned.
  const RandomStream* device_streams = nullptr;
};

namespace detail {

template <class Backend>
struct FillRandomImpl {
  static_assert(dependent_false<Backend>,
                "fill_random: no implementation for this backend; include "
                "specdec/backend/cpu/fill_random.hpp or specdec/backend/cuda/fill_random.hpp");
};

/// The checks of out and first against `streams` streams.
inline void check_fill_random_rows(std::size_t streams, std::uint32_t first, std::int64_t rows,
                                   std::int64_t cols, std::int64_t stride) {
  if (rows != static_cast<std::int64_t>(streams)) {
    fail("out", "has {} rows, expected one per stream ({})", rows, streams);
  }
  if (cols < 0 || stride < cols) fail("out", "has {} columns and stride {}", cols, stride);
  if (static_cast<std::uint64_t>(first) + static_cast<std::uint64_t>(cols) > (1ull << 32)) {
    fail("first", "draws {} .. {} run past the 2^32 draws of a stream", first,
         static_cast<std::uint64_t>(first) + static_cast<std::uint64_t>(cols) - 1);
  }
}

inline void check_fill_random(std::size_t streams, std::uint32_t first, std::int64_t rows,
                              std::int64_t cols, std::int64_t stride) {
  if (streams == 0) fail("streams", "is empty");
  check_fill_random_rows(streams, first, rows, cols, stride);
}

/// The checks of a FillRandomArgs: host streams as above, or device_streams (one per row of out)
/// with `streams` empty.
inline void check_fill_random(const FillRandomArgs& args) {
  if (args.device_streams == nullptr) {
    check_fill_random(args.streams.size(), args.first, args.out.rows, args.out.cols,
                      args.out.stride);
    return;
  }
  if (!args.streams.empty()) {
    fail("device_streams", "is set, so streams must be empty (it has {} entries)",
         args.streams.size());
  }
  if (args.out.rows < 1) fail("out", "has {} rows, expected at least one", args.out.rows);
  check_fill_random_rows(static_cast<std::size_t>(args.out.rows), args.first, args.out.rows,
                         args.out.cols, args.out.stride);
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
/// `streams` is host memory (or FillRandomArgs::device_streams); `out` lives where the backend
/// computes (host or device). On CUDA, a call with host streams cannot be captured in a CUDA
/// graph (specdec::Error naming streams); one with device_streams can.
/// Throws specdec::Error naming the bad argument.
template <backend::BackendPolicy Backend, class Scratch>
void fill_random(const Backend& backend, const FillRandomArgs& args, Scratch&& workspace) {
  detail::check_fill_random(args);
  if constexpr (std::is_same_v<std::remove_cvref_t<Backend>, backend::Cpu>) {
    // The CPU backend's memory is the host's: device streams are a host array.
    const std::span<const RandomStream> streams =
        args.device_streams == nullptr
            ? args.streams
            : std::span<const RandomStream>(args.device_streams,
                                            static_cast<std::size_t>(args.out.rows));
    detail::FillRandomImpl<Backend>::run(backend, streams, args.first, args.out, args.kind,
                                         std::forward<Scratch>(workspace));
  } else {
    detail::FillRandomImpl<Backend>::run(backend, args, std::forward<Scratch>(workspace));
  }
}

/// fill_random with host streams: fill_random(backend, FillRandomArgs{streams, first, out, kind}).
template <backend::BackendPolicy Backend, class Scratch>
void fill_random(const Backend& backend, std::span<const RandomStream> streams, std::uint32_t first,
                 MatrixView<float> out, RandomKind kind, Scratch&& workspace) {
  fill_random(backend, FillRandomArgs{.streams = streams, .first = first, .out = out, .kind = kind},
              std::forward<Scratch>(workspace));
}

}  // namespace specdec
