// SPDX-License-Identifier: MIT
// Counts every heap allocation of the test program that includes this header (once: it replaces
// the global operator new / delete family), so a test can assert that a loop allocates nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> heap_allocations{0};
}  // namespace

// GCC cannot see that this operator new gets its memory from malloc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

// The whole family is replaced, so that no allocation reaches a sanitizer's own operator new and
// comes back through this file's delete (ASan reports that pairing as a mismatch).
namespace {
void* counted_malloc(std::size_t bytes, std::size_t alignment) noexcept {
  heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0) bytes = 1;
  if (alignment <= alignof(std::max_align_t)) return std::malloc(bytes);
  return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
}
void* counted_new(std::size_t bytes, std::size_t alignment = alignof(std::max_align_t)) {
  if (void* p = counted_malloc(bytes, alignment)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t bytes) { return counted_new(bytes); }
void* operator new[](std::size_t bytes) { return counted_new(bytes); }
void* operator new(std::size_t bytes, std::align_val_t a) {
  return counted_new(bytes, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t bytes, std::align_val_t a) {
  return counted_new(bytes, static_cast<std::size_t>(a));
}
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, alignof(std::max_align_t));
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, alignof(std::max_align_t));
}
void* operator new(std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t bytes, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace specdec::test {

/// Heap allocations made by `steps` calls of `step` after `warm_up` calls.
template <class F>
long allocations_after_warm_up(F&& step, int steps = 3, int warm_up = 1) {
  for (int i = 0; i < warm_up; ++i) step();
  const long before = heap_allocations.load();
  for (int i = 0; i < steps; ++i) step();
  return heap_allocations.load() - before;
}

}  // namespace specdec::test
