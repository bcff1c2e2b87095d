// SPDX-License-Identifier: MIT
// The constraints of LogitConstraints applied densely to a row of logits, as an engine writes the
// row (vLLM's order: penalties on every token, then every mask), for the constrained tests to
// compare the verifiers with.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/verify/constrained_logits.hpp"

namespace specdec::test {

/// Row `logits` transformed by `c` for a row whose draft prefix is `prefix`; `mask_row` is its
/// packed bitmask row (ceil(V / 32) words), or nullptr for none (c.bitmask is not read).
inline std::vector<float> transform_row_reference(const constrained::LogitConstraints& c,
                                                  const std::int32_t* mask_row,
                                                  std::span<const float> logits,
                                                  const std::vector<Token>& prefix) {
  const std::size_t v = logits.size();
  const auto& p = c.penalties;
  std::vector<std::int32_t> count(v, 0);
  std::vector<bool> prompt(v, false), ok(v, c.allowed.empty());
  for (const auto& e : p.tokens) {
    count[static_cast<std::size_t>(e.token)] += e.count;
    prompt[static_cast<std::size_t>(e.token)] = e.in_prompt;
  }
  for (const Token t : prefix) ++count[static_cast<std::size_t>(t)];
  for (const Token t : c.allowed) ok[static_cast<std::size_t>(t)] = true;
  for (std::size_t t = 0; t < v && mask_row != nullptr; ++t) {
    ok[t] = ok[t] && ((static_cast<std::uint32_t>(mask_row[t / 32]) >> (t % 32)) & 1u) != 0;
  }
  if (c.output_length + static_cast<std::int64_t>(prefix.size()) < c.min_tokens) {
    for (const Token t : c.stop_tokens) ok[static_cast<std::size_t>(t)] = false;
  }
  // A banned word's last token, where the history (output, then draft prefix) ends with the rest.
  std::vector<Token> history(c.output_tail.begin(), c.output_tail.end());
  history.insert(history.end(), prefix.begin(), prefix.end());
  for (std::size_t w = 0; w + 1 < c.bad_word_offsets.size(); ++w) {
    const std::vector<Token> word(c.bad_words.begin() + c.bad_word_offsets[w],
                                  c.bad_words.begin() + c.bad_word_offsets[w + 1]);
    const std::size_t rest = word.size() - 1;
    if (rest <= history.size() && std::equal(word.begin(), word.end() - 1,
                                             history.end() - static_cast<std::ptrdiff_t>(rest))) {
      ok[static_cast<std::size_t>(word.back())] = false;
    }
  }
  std::vector<float> out(v);
  for (std::size_t t = 0; t < v; ++t) {
    float x = logits[t];
    if (p.any()) {
      if (prompt[t] || count[t] > 0) x = x > 0.0f ? x / p.repetition : x * p.repetition;
      x -= p.frequency * static_cast<float>(count[t]);
      x -= count[t] > 0 ? p.presence : 0.0f;
    }
    out[t] = ok[t] ? x : -std::numeric_limits<float>::infinity();
  }
  return out;
}

}  // namespace specdec::test
