// SPDX-License-Identifier: MIT
// Backend policies: which implementation a batched entry point runs on (no CUDA headers here).
//
// A backend is a small value type with a ready-made object (`backend::cpu`, `backend::cuda`):
//   specdec::warp_logits_batch(specdec::backend::cpu, logits, warps, warped, ws);
//   specdec::warp_logits_batch(specdec::backend::cuda.on(stream), logits, warps, warped, dws);
// Each operation has one generic entry point that forwards to `detail::<Op>Impl<Backend>`, with one
// specialisation per backend in backend/<name>/<op>.hpp. The primary templates derive from
// detail::NoBackendImpl, so a backend with no specialisation fails to compile there, the
// instantiation naming the operation's Impl.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

namespace specdec::backend {

/// The host backend: rows are processed in parallel on a shared thread pool.
/// `threads` = 0 uses every hardware thread; results never depend on the thread count.
struct Cpu {
  int threads = 0;

  /// The same backend limited to `n` threads (0 = hardware).
  constexpr Cpu with_threads(int n) const { return Cpu{n}; }
};
inline constexpr Cpu cpu{};

/// Caller-owned device memory used as scratch by a device backend: `bytes` bytes at `data`,
/// sized with `workspace_size(backend, shape)` and reused across calls; it needs no
/// initialisation.
///
/// `counters`, optional: device words that were zero when first given (zero them once, e.g. a
/// cudaMemset at allocation) and that nothing but specdec calls writes since. A call whose
/// kernels elect the last block of a row with a counter counts there and leaves every word at
/// zero, so it skips the zeroing of its own counters in `data`: one stream operation fewer per
/// call (docs/backends.md). `workspace_counters(backend, shape)` words are needed; calls of any
/// entry point and shape may share the same words, one call at a time (stream order).
struct DeviceWorkspace {
  void* data = nullptr;
  std::size_t bytes = 0;
  std::span<unsigned int> counters = {};
};

template <class T>
struct IsBackend : std::false_type {};
template <>
struct IsBackend<Cpu> : std::true_type {};

/// A type usable as the first argument of a batched entry point.
template <class B>
concept BackendPolicy = IsBackend<std::remove_cvref_t<B>>::value;

}  // namespace specdec::backend

namespace specdec::detail {

/// false, but only once T is known: lets a primary template's static_assert fire on use only.
template <class... T>
inline constexpr bool dependent_false = false;

/// The primary template of every `detail::<Op>Impl<Backend>`: `template <class Backend> struct
/// <Op>Impl : NoBackendImpl<Backend> {};`. Using an operation on a backend without its
/// specialisation fails here; the error's instantiation context names the <Op>Impl.
template <class Backend>
struct NoBackendImpl {
  static_assert(dependent_false<Backend>,
                "this batched operation has no implementation for this backend: include the "
                "backend's header of it (specdec/backend/cpu/<op>.hpp or "
                "specdec/backend/cuda/<op>.hpp; the <Op>Impl is named above)");
};

}  // namespace specdec::detail
