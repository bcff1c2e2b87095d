// SPDX-License-Identifier: MIT
// What the tests of the drafting strategies share: the law of the first three tokens a Decoder
// emits, checked against the warped Markov target, and the argument an Error names.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "decode/toy_tables.hpp"
#include "specdec/core/error.hpp"
#include "specdec/decode/decoder.hpp"
#include "support/stats.hpp"

namespace specdec::test {

/// The prompt every law test starts from; its last token roots the first step.
inline const std::vector<Token> kLawPrompt{0, 2};

/// The histogram of the first three tokens of `runs` sequences decoded from `prompt` (sequence id
/// = run index; the index is (t0 * 4 + t1) * 4 + t2); every run must give three tokens.
template <class D>
std::vector<std::int64_t> first_token_counts(D& decoder, std::uint32_t runs,
                                             const std::vector<Token>& prompt) {
  std::vector<std::int64_t> counts(64, 0);
  std::uint32_t short_runs = 0;
  for (std::uint32_t s = 0; s < runs; ++s) {
    decoder.reset(prompt, s);
    while (!decoder.finished()) decoder.step();
    const auto t = decoder.generated();
    if (t.size() != 3) {
      ++short_runs;
      continue;
    }
    ++counts[static_cast<std::size_t>((t[0] * 4 + t[1]) * 4 + t[2])];
  }
  REQUIRE(short_runs == 0);
  return counts;
}

/// Decodes `runs` sequences of three tokens from `prompt` (sequence id = run index) with a Decoder
/// whose LoopOptions have max_new_tokens = 3, and checks the histogram of the tokens against the
/// warped target's law (chi-square; false-failure probability kFalseFailureProbability).
template <class D>
void check_first_tokens_follow_target(D& decoder, std::uint32_t runs,
                                      const std::vector<Token>& prompt = kLawPrompt) {
  REQUIRE(decoder.loop_options().max_new_tokens == 3);
  const auto counts = first_token_counts(decoder, runs, prompt);
  const auto expected = target_sequence_distribution(prompt.back(), decoder.loop_options().warp);
  const auto chi = chi_square_test(counts, expected);
  INFO("chi2 " << chi.statistic << " df " << chi.df << " p " << chi.p_value);
  CHECK(chi.p_value > kFalseFailureProbability);
}

/// The argument of the specdec::Error `f` throws ("" if it throws none).
template <class F>
std::string error_argument(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.argument());
  }
  return "";
}

}  // namespace specdec::test
