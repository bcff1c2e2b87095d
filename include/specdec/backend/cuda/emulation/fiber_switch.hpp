// SPDX-License-Identifier: MIT
// The emulation's context switch between fibers. On x86-64 it saves what the calling convention
// says a callee keeps (rbx, rbp, r12-r15, the SSE and x87 control words) on the running stack and
// swaps stack pointers: a few nanoseconds, where glibc's swapcontext also saves the signal mask
// through a system call at every switch (nine tenths of an emulated kernel's time). Elsewhere, and
// where shadow stacks are compiled in, it is ucontext.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) && !(defined(__CET__) && (__CET__ & 2))
#define SPECDEC_FIBER_SWITCH_ASM 1
#else
#include <ucontext.h>
#endif

namespace specdec::emulation {

#if defined(SPECDEC_FIBER_SWITCH_ASM)

/// A suspended fiber: its stack pointer, the saved registers below it.
struct FiberContext {
  void* sp = nullptr;
};

namespace detail {

// Saves the callee-saved registers on the running stack, stores the stack pointer in *from (rdi)
// and resumes the fiber whose stack pointer is `to` (rsi).
[[gnu::naked, gnu::noinline]] inline void fiber_swap(void** /*from*/, void* /*to*/) {
  asm volatile(
      "pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $8, %rsp\n\t"
      "stmxcsr (%rsp)\n\t"
      "fnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\t"
      "fldcw 4(%rsp)\n\t"
      "addq $8, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret\n\t");
}

}  // namespace detail

/// Prepares `context` to run entry() on [stack, stack + size). entry must not return: it ends by
/// switching to another fiber for good.
inline void make_fiber_context(FiberContext& context, char* stack, std::size_t size,
                               void (*entry)()) {
  // The frame fiber_swap pops (control words, r15, r14, r13, r12, rbx, rbp) and the address it
  // returns to, entry, which then finds the stack as a call leaves it: its return address at an
  // address 8 past a multiple of 16.
  const auto top = (reinterpret_cast<std::uintptr_t>(stack) + size) & ~std::uintptr_t{15};
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 88);
  std::uint32_t mxcsr = 0;
  std::uint16_t fpucw = 0;
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
  frame[0] = mxcsr | (std::uint64_t{fpucw} << 32);
  for (int r = 1; r <= 6; ++r) frame[r] = 0;
  frame[7] = reinterpret_cast<std::uint64_t>(entry);
  frame[8] = 0;  // entry's return address: it never returns
  context.sp = frame;
}

/// Suspends the running code into `from` and resumes `to`.
inline void swap_fiber_context(FiberContext& from, const FiberContext& to) {
  detail::fiber_swap(&from.sp, to.sp);
}

#else

struct FiberContext {
  ucontext_t context{};
};

/// Prepares `context` to run entry() on [stack, stack + size). entry must not return: it ends by
/// switching to another fiber for good. Its own frame: getcontext returns twice, which must not
/// meet the caller's loop variables.
[[gnu::noinline]] inline void make_fiber_context(FiberContext& context, char* stack,
                                                 std::size_t size, void (*entry)()) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = size;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
  // The context runs on its registers from now on. Forgetting the stack keeps the address
  // sanitizer's swapcontext from clearing its whole shadow at every switch (the switches are
  // annotated instead).
  context.context.uc_stack.ss_sp = nullptr;
  context.context.uc_stack.ss_size = 0;
}

/// Suspends the running code into `from` and resumes `to`.
inline void swap_fiber_context(FiberContext& from, const FiberContext& to) {
  swapcontext(&from.context, &to.context);
}

#endif

}  // namespace specdec::emulation
