// SPDX-License-Identifier: MIT
// The specdec::batch library (the CPU batch entries from logits compiled once) against the
// header-only single-sequence calls: the same tokens and rows, bit for bit, for each logit type.
#include <Eigen/Core>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/compiled_batch.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/target_only_logits.hpp"

#if !defined(SPECDEC_COMPILED_BATCH)
#error "test_compiled_batch links specdec::batch, which defines SPECDEC_COMPILED_BATCH"
#endif

using namespace specdec;

namespace {

/// Two sequences (gamma 3 and 1) of normal logits over `vocab` tokens, drafts near the target.
template <class T>
struct LogitBatch {
  std::vector<std::int32_t> offsets{0, 3, 4};
  std::int64_t vocab = 300;
  std::vector<T> target, draft;
  std::vector<Token> tokens;  // each draft row's argmax: inside any top-p cut
  std::vector<RandomStream> streams{RandomStream{.seed = 7, .sequence = 0},
                                    RandomStream{.seed = 7, .sequence = 1}};

  LogitBatch() {
    toy::ToyRandom rng(11);
    for (std::int64_t i = 0; i < 6 * vocab; ++i)
      target.push_back(static_cast<T>(static_cast<float>(2.0 * rng.normal())));
    for (std::int64_t i = 0; i < 4 * vocab; ++i) {
      const float near = static_cast<float>(target[static_cast<std::size_t>(i)]);
      draft.push_back(static_cast<T>(near + static_cast<float>(0.5 * rng.normal())));
    }
    for (std::int64_t r = 0; r < 4; ++r) {
      const auto row = rows(draft, r, 1);
      tokens.push_back(static_cast<Token>(
          std::max_element(row.begin(), row.end(),
                           [](T a, T b) { return static_cast<float>(a) < static_cast<float>(b); }) -
          row.begin()));
    }
  }
  std::span<const T> rows(const std::vector<T>& all, std::int64_t first, std::int64_t count) const {
    return {all.data() + first * vocab, static_cast<std::size_t>(count * vocab)};
  }
};

}  // namespace

TEMPLATE_TEST_CASE("specdec::batch verifies chains from logits as the single-sequence calls do",
                   "[backend][compiled]", float, Eigen::half, Eigen::bfloat16) {
  const LogitBatch<TestType> c;
  const Warp warp{.temperature = 0.9f, .top_p = 0.95f};
  std::vector<Token> emitted(6, -7), target_only(6, -7);
  std::vector<std::int32_t> accepted(2, -7), accepted_target_only(2, -7);
  ChainBatchLogitsArgs<TestType> args{
      .draft_offsets = c.offsets,
      .target_logits = {c.target.data(), 6, c.vocab},
      .draft_logits = {c.draft.data(), 4, c.vocab},
      .warps = std::span<const Warp>(&warp, 1),
      .draft_tokens = c.tokens,
      .streams = c.streams,
      .emitted = emitted,
      .accepted = accepted};
  Workspace ws;
  verify_chain_batch_logits(backend::cpu, args, ws);
  args.draft_logits = {};
  args.emitted = target_only;
  args.accepted = accepted_target_only;
  verify_chain_batch_target_only_logits(backend::cpu, args, ws);
  for (std::int64_t b = 0; b < 2; ++b) {
    const auto first = c.offsets[static_cast<std::size_t>(b)];
    const auto gamma = c.offsets[static_cast<std::size_t>(b) + 1] - first;
    const auto tokens = std::span<const Token>(c.tokens).subspan(static_cast<std::size_t>(first),
                                                                 static_cast<std::size_t>(gamma));
    std::vector<Token> want(static_cast<std::size_t>(gamma) + 1, -1);
    const ChainVerdict verdict = verify_chain_logits<TestType>(
        warp, c.rows(c.target, first + b, gamma + 1), c.rows(c.draft, first, gamma), tokens,
        c.vocab, c.streams[static_cast<std::size_t>(b)], want, ws);
    CHECK(accepted[static_cast<std::size_t>(b)] == verdict.accepted);
    for (std::int64_t i = 0; i < verdict.emitted; ++i)
      CHECK(emitted[static_cast<std::size_t>(first + b + i)] == want[static_cast<std::size_t>(i)]);
    std::vector<Token> want_target_only(static_cast<std::size_t>(gamma) + 1, -1);
    const ChainVerdict target_verdict = verify_chain_target_only_logits<TestType>(
        warp, c.rows(c.target, first + b, gamma + 1), tokens, c.vocab,
        c.streams[static_cast<std::size_t>(b)], want_target_only, ws);
    CHECK(accepted_target_only[static_cast<std::size_t>(b)] == target_verdict.accepted);
    for (std::int64_t i = 0; i < target_verdict.emitted; ++i) {
      CHECK(target_only[static_cast<std::size_t>(first + b + i)] ==
            want_target_only[static_cast<std::size_t>(i)]);
    }
  }
}

TEMPLATE_TEST_CASE("specdec::batch warps rows as warp_logits does", "[backend][compiled]", float,
                   Eigen::half, Eigen::bfloat16) {
  const LogitBatch<TestType> c;
  const std::vector<Warp> warps{Warp{.temperature = 0.7f, .top_k = 20}, Warp{.temperature = 0.0f}};
  std::vector<float> warped(static_cast<std::size_t>(2 * c.vocab));
  Workspace ws;
  warp_logits_batch(backend::cpu,
                    WarpBatchArgs<TestType>{.logits = {c.target.data(), 2, c.vocab},
                                            .warps = warps,
                                            .warped = {warped.data(), 2, c.vocab}},
                    ws);
  for (std::int64_t r = 0; r < 2; ++r) {
    std::vector<float> want(static_cast<std::size_t>(c.vocab));
    warp_logits<TestType>(warps[static_cast<std::size_t>(r)], c.rows(c.target, r, 1), want, ws);
    CHECK(std::vector<float>(warped.begin() + r * c.vocab, warped.begin() + (r + 1) * c.vocab) ==
          want);
  }
}
