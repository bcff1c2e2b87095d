// SPDX-License-Identifier: MIT
// Resident<T>: an array of a batch call's arguments, in host memory or already where the backend
// computes.
#pragma once

#include <concepts>
#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

namespace specdec {

/// An array a batch call reads (offsets, streams, warps): a span over host memory, which is what
/// a span or a vector converts to, or over the backend's memory (`on_device(data, size)`).
/// The host checks a host array's values; of a device array only its size, and the backend reads
/// it in place. A CUDA call whose arrays are all on the device makes no host copy, allocation or
/// synchronisation, so it can be captured in a CUDA graph. The CPU backend's memory is the host's:
/// there a device array is read, and checked, as a host array is.
template <class T>
class Resident {
 public:
  constexpr Resident() = default;

  /// Host memory: anything that converts to std::span<T> (a span, a vector, an array).
  template <class Range>
    requires(!std::same_as<std::remove_cvref_t<Range>, Resident> &&
             std::convertible_to<Range &&, std::span<T>>)
  constexpr Resident(Range&& host)  // NOLINT(google-explicit-constructor): as a span converts
      : span_(std::forward<Range>(host)) {}

  /// `size` elements at `data` in the backend's memory.
  static constexpr Resident device(T* data, std::size_t size) {
    Resident r;
    r.span_ = std::span<T>(data, size);
    r.on_device_ = true;
    return r;
  }

  constexpr bool on_device() const { return on_device_; }
  /// The elements as a span: host memory, or (on the CPU backend only) the device array.
  constexpr std::span<T> span() const { return span_; }

  constexpr T* data() const { return span_.data(); }
  constexpr std::size_t size() const { return span_.size(); }
  constexpr bool empty() const { return span_.empty(); }
  constexpr T& operator[](std::size_t i) const { return span_[i]; }
  constexpr T& back() const { return span_.back(); }
  constexpr auto begin() const { return span_.begin(); }
  constexpr auto end() const { return span_.end(); }

 private:
  std::span<T> span_{};
  bool on_device_ = false;
};

/// `size` elements at `data` in the backend's memory, for a Resident argument:
/// `.streams = on_device(device_streams, batch)`.
template <class T>
constexpr Resident<const T> on_device(const T* data, std::size_t size) {
  return Resident<const T>::device(data, size);
}

}  // namespace specdec
