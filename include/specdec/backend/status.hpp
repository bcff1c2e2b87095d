// SPDX-License-Identifier: MIT
// Per-sequence status codes of a batch verification: what a backend reports in place of throwing,
// so that errors found by device kernels reach the caller, and the CPU backend can report the
// same way.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "specdec/core/error.hpp"

namespace specdec {

/// Why a sequence of a batch was not verified (its outputs are then accepted = -1 and -1 tokens).
/// The values are stable: they are what the status buffers hold.
enum class SequenceStatus : std::int32_t {
  kOk = 0,
  kTokenOutsideVocab = 1,     ///< a draft (or tree) token outside [0, V)
  kZeroDraftProbability = 2,  ///< a tested draft token has probability 0 in its draft row
  kBadWarp = 3,               ///< the sequence's warp has a bad field (or one the path refuses)
  kTooManyChildren = 4,       ///< a tree node with more than 256 children
  kBadRow = 5,                ///< a row with NaN or +inf, no finite logit, or not a distribution
  kBadTree = 6,               ///< parents not in level order, or repeated RRS siblings
  kResidualOverflow = 7,      ///< a tree node whose residual walk exceeded the kernel's steps
  kChainTooLong = 8,          ///< a chain longer than its rule's parameters (synthetic rates)
};

/// The words of a status buffer of a batch of B sequences: B + 1 int32, status[b] the
/// SequenceStatus of sequence b and status[B] the "any error" word, the number of sequences whose
/// status is not kOk (0: every sequence verified).
inline constexpr std::size_t status_words(std::int64_t batch) {
  return static_cast<std::size_t>(batch < 0 ? 0 : batch) + 1;
}

/// A one-line description of a status code ("draft token outside the vocabulary").
inline constexpr std::string_view describe(SequenceStatus status) {
  switch (status) {
    case SequenceStatus::kOk: return "ok";
    case SequenceStatus::kTokenOutsideVocab: return "a token is outside the vocabulary";
    case SequenceStatus::kZeroDraftProbability: return "a draft token has draft probability 0";
    case SequenceStatus::kBadWarp: return "its warp is invalid";
    case SequenceStatus::kTooManyChildren: return "a tree node has more than 256 children";
    case SequenceStatus::kBadRow:
      return "a row is invalid (NaN, +inf, no finite entry, not a distribution)";
    case SequenceStatus::kBadTree: return "the tree is malformed (parents, repeated siblings)";
    case SequenceStatus::kResidualOverflow: return "a node's residual walk took too many steps";
    case SequenceStatus::kChainTooLong: return "the chain is longer than the rule's rates";
  }
  return "unknown status code";
}

/// Throws specdec::Error naming the first sequence whose status is not kOk, e.g.
/// "status[3]: a token is outside the vocabulary (code 1; 2 sequences failed)"; returns when
/// every sequence verified. `status` is a host copy of a status buffer (B + 1 words).
inline void throw_if_failed(std::span<const std::int32_t> status) {
  // Plain concatenation, not fmt: CUDA sources include this, and nvcc cannot run fmt's
  // compile-time format check.
  if (status.empty()) throw Error("status", "is empty, expected B + 1 words");
  const std::size_t batch = status.size() - 1;
  if (status[batch] == 0) return;
  const std::string failed = std::to_string(status[batch]) + " sequence(s) failed";
  for (std::size_t b = 0; b < batch; ++b) {
    if (status[b] == 0) continue;
    throw Error(ArgName("status", static_cast<std::int64_t>(b)).str(),
                "sequence " + std::to_string(b) + ": " +
                    std::string(describe(static_cast<SequenceStatus>(status[b]))) + " (code " +
                    std::to_string(status[b]) + "; " + failed + ")");
  }
  throw Error("status", failed + " but no sequence has a code");
}

namespace detail {

/// The status code of an error the CPU backend raised for one sequence: the same cause a kernel
/// reports for the same input. Read from the checks' fixed wording, in one place.
inline SequenceStatus status_of(const Error& e) {
  const std::string_view problem = e.problem(), argument = e.argument();
  const auto has = [](std::string_view text, std::string_view part) {
    return text.find(part) != std::string_view::npos;
  };
  if (has(problem, "outside the vocabulary")) return SequenceStatus::kTokenOutsideVocab;
  if (has(problem, "draft probability 0")) return SequenceStatus::kZeroDraftProbability;
  if (has(problem, "children, the rule takes at most")) return SequenceStatus::kTooManyChildren;
  if (has(problem, "draft positions")) return SequenceStatus::kChainTooLong;
  if (has(problem, "level order") || has(problem, "repeats its sibling")) {
    return SequenceStatus::kBadTree;
  }
  for (const std::string_view field : {"warps", "temperature", "top_k", "top_p", "min_p"}) {
    if (argument.starts_with(field)) return SequenceStatus::kBadWarp;
  }
  return SequenceStatus::kBadRow;
}

}  // namespace detail
}  // namespace specdec
