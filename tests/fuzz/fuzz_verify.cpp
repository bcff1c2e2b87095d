// SPDX-License-Identifier: MIT
// Fuzzes the verification and exact-distribution entry points with arbitrary rows (well-formed
// distributions, or raw floats: NaN, infinities, negatives, subnormals), candidates and rule
// parameters. Bad input must end in specdec::Error; a verdict must name a token of the vocabulary
// and an exact distribution must sum to 1.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_input.hpp"
#include "specdec/verify/verify.hpp"

namespace {

using specdec::fuzz::Reader;

/// `rows` rows of `vocab` entries: normalised byte weights, or raw floats when `raw`.
std::vector<float> read_rows(Reader& in, std::size_t rows, std::size_t vocab, bool raw) {
  std::vector<float> out(rows * vocab);
  for (std::size_t r = 0; r < rows; ++r) {
    double total = 0.0;
    for (std::size_t i = 0; i < vocab; ++i) {
      out[r * vocab + i] = raw ? in.raw_float() : static_cast<float>(in.byte() % 16);
      total += out[r * vocab + i];
    }
    if (!raw && total > 0.0) {
      for (std::size_t i = 0; i < vocab; ++i) {
        out[r * vocab + i] = static_cast<float>(out[r * vocab + i] / total);
      }
    }
  }
  return out;
}

specdec::Rule read_rule(Reader& in) {
  using namespace specdec;
  switch (in.byte() % 8) {
    case 0:
      return Rejection{};
    case 1:
      return MultiRound{};
    case 2:
      return Recursive{};
    case 3:
      return SpecTr{in.byte() % 2 ? 0.0 : static_cast<double>(in.raw_float())};
    case 4:
      return Lossy{in.raw_float(), in.raw_float(), (in.byte() & 1) != 0, (in.byte() & 1) != 0};
    case 5:
      return Cascade{static_cast<Deferral>(in.byte() % (static_cast<int>(Deferral::kTokenV3) + 1)),
                     in.raw_float()};
    case 6:
      return Typical{in.raw_float(), in.raw_float()};
    default:
      return Greedy{};
  }
}

void check_token(specdec::Token token, std::size_t vocab) {
  if (token < 0 || static_cast<std::size_t>(token) >= vocab) finding("fuzz_verify:1");
}

void check_emitted(const std::vector<specdec::Token>& out, std::int32_t emitted,
                   std::size_t vocab) {
  if (emitted < 1 || static_cast<std::size_t>(emitted) > out.size()) finding("fuzz_verify:2");
  for (std::int32_t i = 0; i < emitted; ++i) check_token(out[static_cast<std::size_t>(i)], vocab);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace specdec;
  Reader in(data, size);
  const auto mode = in.byte();
  const bool raw = (mode & 1) != 0;
  const std::size_t vocab = 1 + in.byte() % 12;
  const std::size_t count = 1 + in.byte() % 4;
  const Rule rule = read_rule(in);
  const auto target = read_rows(in, 1, vocab, raw);
  const auto draft = read_rows(in, 1, vocab, raw);
  std::vector<Token> candidates(count);
  for (auto& c : candidates) c = static_cast<Token>(in.byte() % (vocab + 1)) - (mode & 2 ? 1 : 0);
  Workspace ws;
  const RandomStream stream{in.byte(), in.byte(), 0, 0};
  try {
    const auto verdict = verify_node(rule, target, draft, candidates, stream, ws);
    check_token(verdict.token, vocab);
    if (verdict.accepted >= static_cast<std::int32_t>(count)) finding("fuzz_verify:3");
  } catch (const Error&) {
  }
  try {
    std::vector<double> exact(vocab);
    const auto accept =
        exact_node_distribution(rule, target, draft, static_cast<std::int32_t>(count), exact);
    // Rows are float: the tuple probabilities sum to 1 within float rounding, not exactly.
    double total = 0.0;
    for (double p : exact) total += p;
    if (!(std::abs(total - 1.0) < 1e-3) || !(accept >= -1e-5 && accept <= 1.0 + 1e-5)) {
      std::fprintf(stderr, "exact distribution sums to %.17g, acceptance %.17g (rule %zu)\n", total,
                   accept, rule.index());
      finding("fuzz_verify:4");
    }
  } catch (const Error&) {
  }
  // A chain of `count` tokens with its rows, through verify_chain and verify_block.
  const auto target_rows = read_rows(in, count + 1, vocab, raw);
  const auto draft_rows = read_rows(in, count, vocab, raw);
  std::vector<Token> out(count + 1);
  try {
    const auto verdict = verify_chain(rule, target_rows, draft_rows, candidates,
                                      static_cast<std::int64_t>(vocab), stream, out, ws);
    check_emitted(out, verdict.emitted, vocab);
  } catch (const Error&) {
  }
  try {
    const auto verdict = verify_block<float>(target_rows, draft_rows, candidates,
                                             static_cast<std::int64_t>(vocab), stream, out, ws);
    check_emitted(out, verdict.emitted, vocab);
  } catch (const Error&) {
  }
  // A tree of `count` nodes with arbitrary parents.
  std::vector<std::int32_t> parents(count);
  for (std::size_t i = 0; i < count; ++i) {
    parents[i] = static_cast<std::int32_t>(in.byte() % (i + 2)) - 1 - (mode & 4 ? 1 : 0);
  }
  const auto tree_target = read_rows(in, count + 1, vocab, raw);
  const auto tree_draft = read_rows(in, count + 1, vocab, raw);
  std::vector<std::int32_t> accepted(count);
  try {
    const auto verdict = verify_tree(rule, {candidates, parents}, tree_target, tree_draft,
                                     static_cast<std::int64_t>(vocab), stream, accepted, ws);
    check_token(verdict.token, vocab);
    if (verdict.accepted < 0 || verdict.accepted > static_cast<std::int32_t>(count))
      finding("fuzz_verify:5");
  } catch (const Error&) {
  }
  return 0;
}
