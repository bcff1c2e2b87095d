// SPDX-License-Identifier: MIT
// Global<T>: how a kernel reaches global memory. On the device a load or store is a plain (or one
// 16-byte vector) access; under the host emulation (backend/cuda/emulation) every access is also
// recorded in a traffic ledger (bytes per named region, reads of never-written bytes, 32-byte
// sectors per warp-wide access). The pointer is never handed to kernel code, so a raw dereference
// of global memory does not compile and no access escapes the ledger.
// IWYU pragma: private
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "specdec/config.hpp"

#if !defined(__CUDACC__) && defined(SPECDEC_CUDA_EMULATION)
#define SPECDEC_GLOBAL_RECORD(kind, address, bytes, unique) \
  specdec::emulation::record_##kind(address, bytes, unique)
#else
#define SPECDEC_GLOBAL_RECORD(kind, address, bytes, unique) ((void)0)
#endif

namespace specdec::backend::cuda_impl::detail {

/// N values of T loaded by one 16-byte access.
template <class T, int N>
struct alignas(16) Vec {
  static_assert(N * sizeof(T) == 16, "a vector access moves 16 bytes");
  T v[N];
};

template <class T>
class Global;

/// Whether T has no padding bytes, so that a device store of it writes every byte it occupies.
/// Structs of floats are not covered by has_unique_object_representations (a float has two
/// zeros): specialise for them, next to a static_assert that their fields fill them.
template <class T>
inline constexpr bool kDense =
    std::has_unique_object_representations_v<T> || std::is_floating_point_v<T>;

/// The element i of a writable Global: reads load it, assignments store it.
template <class T>
class GlobalRef {
 public:
  SPECDEC_HOST_DEVICE GlobalRef(const Global<T>& g, std::int64_t i) : g_(g), i_(i) {}
  SPECDEC_HOST_DEVICE operator T() const { return g_.load(i_); }
  SPECDEC_HOST_DEVICE const GlobalRef& operator=(
      T v) const {  // by value: no host constant odr-used
    g_.store(i_, v);
    return *this;
  }
  SPECDEC_HOST_DEVICE const GlobalRef& operator=(const GlobalRef& other) const {
    return *this = static_cast<T>(other);
  }
  SPECDEC_HOST_DEVICE const GlobalRef& operator+=(T v) const {
    return *this = static_cast<T>(*this) + v;
  }
  SPECDEC_HOST_DEVICE const GlobalRef& operator*=(T v) const {
    return *this = static_cast<T>(*this) * v;
  }

 private:
  Global<T> g_;
  std::int64_t i_;
};

/// A view of global memory holding T (const T: read-only). Built on the host from a device
/// pointer; kernel code moves it with + and reads / writes elements through it only.
template <class T>
class Global {
 public:
  using Value = std::remove_const_t<T>;

  Global() = default;
  SPECDEC_HOST_DEVICE Global(T* pointer) : p_(pointer) {}  // NOLINT: kernel arguments convert
  SPECDEC_HOST_DEVICE Global(std::nullptr_t) {}            // NOLINT
  /// A writable view is also a read-only one.
  template <class U>
  requires(std::is_same_v<const U, T> && !std::is_same_v<U, T>)
      SPECDEC_HOST_DEVICE Global(const Global<U>& other)
      : p_(other.p_) {}  // NOLINT

  SPECDEC_HOST_DEVICE Global operator+(std::int64_t offset) const { return Global(p_ + offset); }
  SPECDEC_HOST_DEVICE bool operator==(std::nullptr_t) const { return p_ == nullptr; }
  /// Whether element i starts a 16-byte aligned vector (load_vec may read there).
  SPECDEC_HOST_DEVICE bool vector_aligned(std::int64_t i) const {
    return reinterpret_cast<std::uintptr_t>(p_ + i) % 16 == 0;
  }

  SPECDEC_HOST_DEVICE Value load(std::int64_t i) const {
    SPECDEC_GLOBAL_RECORD(load, p_ + i, sizeof(T), kUnique);
    return p_[i];
  }
  /// 16 bytes at i (i * sizeof(T) a multiple of 16 from a 16-byte aligned base).
  template <int N>
  SPECDEC_HOST_DEVICE Vec<Value, N> load_vec(std::int64_t i) const {
    SPECDEC_GLOBAL_RECORD(load, p_ + i, 16, kUnique);
    return *reinterpret_cast<const Vec<Value, N>*>(p_ + i);
  }
  SPECDEC_HOST_DEVICE void store(std::int64_t i, Value v) const requires(!std::is_const_v<T>) {
    SPECDEC_GLOBAL_RECORD(store, p_ + i, sizeof(T), kUnique);
    p_[i] = v;
  }

  /// Element i: a value when read-only, a GlobalRef when writable.
  SPECDEC_HOST_DEVICE auto operator[](std::int64_t i) const {
    if constexpr (std::is_const_v<T>) {
      return load(i);
    } else {
      return GlobalRef<T>(*this, i);
    }
  }

  /// atomicAdd on element i; returns the old value.
  SPECDEC_HOST_DEVICE Value atomic_add(std::int64_t i, Value v) const
      requires(!std::is_const_v<T>) {
    SPECDEC_GLOBAL_RECORD(load, p_ + i, sizeof(T), kUnique);
    SPECDEC_GLOBAL_RECORD(store, p_ + i, sizeof(T), kUnique);
    return atomicAdd(p_ + i, v);
  }

 private:
  template <class U>
  friend class Global;
  // A type with padding bytes: a device copy of it moves bytes no store ever wrote.
  static constexpr bool kUnique = kDense<Value>;
  T* p_ = nullptr;
};

}  // namespace specdec::backend::cuda_impl::detail
