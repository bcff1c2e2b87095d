// SPDX-License-Identifier: MIT
// The loop every CPU batch entry runs: sequences in parallel on the thread pool, each with its
// thread's share of the workspace, and its errors named for its sequence.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/backend/policy.hpp"
#include "specdec/backend/status.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec::detail {

/// One CPU batch loop: `batch` sequences, `scratch_bytes` of workspace for each thread taking part
/// (a multiple of Workspace::round_up keeps every share aligned). `name_sequence`: an error thrown
/// for a sequence is renamed for it ("draft_tokens[1]" -> "draft_tokens[b][1]"); false where the
/// sequence's own code names its arguments already.
struct SequenceLoop {
  std::int64_t batch = 0;
  std::size_t scratch_bytes = 0;
  bool name_sequence = true;
};

/// The workspace bytes a loop of `batch` sequences with `scratch_bytes` per thread takes.
inline std::size_t sequence_loop_bytes(const backend::Cpu& cpu, std::int64_t batch,
                                       std::size_t scratch_bytes) {
  const int threads = backend::default_thread_pool().resolve(batch, cpu.threads);
  return static_cast<std::size_t>(threads) * scratch_bytes;
}

/// The workspace_size of a CPU operation that runs each of `shape.rows` rows through a row
/// function needing `row_bytes(shape.vocab)` bytes of scratch: one such buffer per thread that
/// takes part. Its Impl derives from it.
template <std::size_t (*row_bytes)(std::int64_t)>
struct RowLoopWorkspace {
  template <class Shape>
  static std::size_t workspace_size(const backend::Cpu& cpu, const Shape& shape) {
    return sequence_loop_bytes(cpu, shape.rows, row_bytes(shape.vocab));
  }
};

/// Calls one(b, scratch) for every sequence b of `loop` on the thread pool, scratch being the
/// running thread's `loop.scratch_bytes` of `ws`. Results may depend on b only, never on the
/// thread: the pool hands out sequences in any order.
template <class One>
void for_each_sequence(const backend::Cpu& cpu, Workspace& ws, const SequenceLoop& loop,
                       One&& one) {
  auto& pool = backend::default_thread_pool();
  const int threads = pool.resolve(loop.batch, cpu.threads);
  auto scope = ws.scope();
  const auto bytes = ws.take<std::byte>(loop.scratch_bytes * static_cast<std::size_t>(threads));
  pool.run(loop.batch, threads, [&](std::int64_t b, int slot) {
    std::byte* scratch = bytes.data() + static_cast<std::size_t>(slot) * loop.scratch_bytes;
    if (!loop.name_sequence) return one(b, scratch);
    try {
      one(b, scratch);
    } catch (const Error& e) {
      rethrow_for_sequence(e, b);
    }
  });
}

/// A chain sequence's outputs: its accepted count, and -1 (kNoToken) after its `emitted_count`
/// emitted tokens.
inline void finish_chain(std::int32_t accepted_count, std::int64_t emitted_count,
                         std::span<Token> emitted, std::int32_t& accepted) {
  std::fill(emitted.begin() + emitted_count, emitted.end(), kNoToken);
  accepted = accepted_count;
}

/// Sequence b's verdict: walk(), or, with a status buffer (B + 1 words), `failed` when walk raises
/// an error for the sequence, its cause written to status[b] (kOk when it verified). Without one
/// the error propagates.
template <class Verdict, class Walk>
Verdict verdict_or_status(std::span<std::int32_t> status, std::int64_t b, Verdict failed,
                          Walk&& walk) {
  if (status.empty()) return walk();
  const auto i = static_cast<std::size_t>(b);
  try {
    const Verdict verdict = walk();
    status[i] = static_cast<std::int32_t>(SequenceStatus::kOk);
    return verdict;
  } catch (const Error& e) {
    status[i] = static_cast<std::int32_t>(status_of(e));
    return failed;
  }
}

/// A status buffer's last word, after the loop: how many sequences failed.
inline void count_failures(std::span<std::int32_t> status) {
  if (status.empty()) return;
  const auto last = status.size() - 1;
  status[last] = static_cast<std::int32_t>(
      std::count_if(status.begin(), status.begin() + static_cast<std::ptrdiff_t>(last),
                    [](std::int32_t code) { return code != 0; }));
}

}  // namespace specdec::detail
