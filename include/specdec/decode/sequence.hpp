// SPDX-License-Identifier: MIT
// Per-sequence decoding state and the one rule that derives every step's random streams.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"

namespace specdec {

/// One sequence being decoded: its tokens so far (prompt + generated), its seed and id.
///
/// **Random streams (the rule every decoding method follows).** A step starts from the root, the
/// last committed token, at absolute position `position()` = tokens.size() - 1. All randomness
/// of that step comes from
///   draft_stream()  = RandomStream{seed, id, position(), node 0, Domain::kDraft}   (drafting)
///   verify_stream() = RandomStream{seed, id, position(), node 0, Domain::kVerify}  (acceptance
///                     tests, corrections and the bonus token)
///   sample_stream() = RandomStream{seed, id, position(), node 0, Domain::kSample}  (plain
///                     autoregressive sampling from the target)
/// and each drafter or verifier derives per-node streams from these (`at_node`) as its own header
/// documents. Every step commits at least one token, so root positions strictly increase and no
/// two steps of a sequence share a stream; the draws depend only on (seed, id, position), never
/// on batch layout, thread count or the method's call order.
struct SequenceState {
  std::uint64_t seed = 0;
  std::uint32_t id = 0;
  std::vector<Token> tokens;
  std::int64_t prompt_length = 0;
  bool finished = false;  // set by the decoding loop at an end token or max_new_tokens

  SequenceState() = default;
  /// Starts a sequence from `prompt` (non-empty, tokens in [0, vocab)). Throws specdec::Error
  /// naming "prompt" otherwise.
  SequenceState(std::span<const Token> prompt, std::int64_t vocab, std::uint64_t seed_,
                std::uint32_t id_)
      : seed(seed_), id(id_) {
    if (prompt.empty()) {
      detail::fail("prompt", "is empty: the root of every step is the last committed token");
    }
    detail::check_tokens<Token>("prompt", prompt, vocab);
    check_position(static_cast<std::int64_t>(prompt.size()) - 1);
    tokens.assign(prompt.begin(), prompt.end());
    prompt_length = static_cast<std::int64_t>(prompt.size());
  }

  /// Committed tokens (prompt + generated).
  std::int64_t length() const { return static_cast<std::int64_t>(tokens.size()); }
  /// Absolute position of the root of the next step (the last committed token).
  std::int64_t position() const { return length() - 1; }
  /// Tokens generated so far (after the prompt).
  std::span<const Token> generated() const {
    return std::span<const Token>(tokens).subspan(static_cast<std::size_t>(prompt_length));
  }
  std::int64_t generated_count() const { return length() - prompt_length; }

  /// Appends committed tokens (already validated by the step that produced them).
  void append(std::span<const Token> new_tokens) {
    check_position(position() + static_cast<std::int64_t>(new_tokens.size()));
    tokens.insert(tokens.end(), new_tokens.begin(), new_tokens.end());
  }
  void append(Token token) { append(std::span<const Token>(&token, 1)); }

  RandomStream stream(Domain domain) const {
    return RandomStream{seed, id, static_cast<std::uint32_t>(position()), 0, domain};
  }
  RandomStream draft_stream() const { return stream(Domain::kDraft); }
  RandomStream verify_stream() const { return stream(Domain::kVerify); }
  RandomStream sample_stream() const { return stream(Domain::kSample); }

 private:
  static void check_position(std::int64_t position) {
    if (position > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max())) {
      detail::fail("position", "{} does not fit the 32-bit position of a RandomStream", position);
    }
  }
};

}  // namespace specdec
