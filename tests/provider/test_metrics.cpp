// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <vector>

#include "specdec/decode/metrics.hpp"
#include "specdec/decode/sequence.hpp"

using namespace specdec;
using Catch::Contains;
using Catch::Detail::Approx;

namespace {

// Four target calls, hand-checked below:
//   tree tokens 4 4 4 2 (total 14), depths 3 3 3 2, accepted 2 0 3 1, emitted 3 1 4 2 (10).
std::vector<StepRecord> four_steps() {
  return {{.tree_tokens = 4, .tree_depth = 3, .accepted_depth = 2, .emitted = 3, .draft_calls = 3},
          {.tree_tokens = 4, .tree_depth = 3, .accepted_depth = 0, .emitted = 1, .draft_calls = 3},
          {.tree_tokens = 4, .tree_depth = 3, .accepted_depth = 3, .emitted = 4, .draft_calls = 3},
          {.tree_tokens = 2, .tree_depth = 2, .accepted_depth = 1, .emitted = 2, .draft_calls = 2}};
}

}  // namespace

TEST_CASE("block efficiency and target budget are per target call", "[metrics]") {
  DecodeMetrics m;
  for (const auto& s : four_steps()) m.record_step(s);
  CHECK(m.target_calls == 4);
  CHECK(m.tokens_generated == 10);
  CHECK(m.target_tree_tokens == 14);
  CHECK(m.draft_calls == 11);
  CHECK(m.block_efficiency() == Approx(2.5));
  CHECK(m.mean_target_budget() == Approx(3.5));
  CHECK(m.mean_draft_calls() == Approx(2.75));
}

TEST_CASE("MBSU divides block efficiency by L times r plus one", "[metrics]") {
  DecodeMetrics m;
  for (const auto& s : four_steps()) m.record_step(s);
  CHECK(m.mbsu(3, 0.1) == Approx(2.5 / 1.3));
  CHECK(m.mbsu(3, 0.0) == Approx(2.5));
  CHECK(m.mbsu(5, 0.2) == Approx(1.25));
  CHECK(DecodeMetrics{}.mbsu(2, 0.5) == 0.0);
}

TEST_CASE("acceptance per level counts attempts only where earlier levels passed", "[metrics]") {
  DecodeMetrics m;
  for (const auto& s : four_steps()) m.record_step(s);
  // Depth 1: attempted by all 4, accepted by steps 1 3 4. Depth 2: attempted by 1 3 4 (accepted
  // >= 1), accepted by 1 3. Depth 3: attempted by 1 3 (step 4's tree stops at 2), accepted by 3.
  CHECK(m.attempted_per_level == std::vector<std::int64_t>{4, 3, 2});
  CHECK(m.accepted_per_level == std::vector<std::int64_t>{3, 2, 1});
  CHECK(m.acceptance_rate(1) == Approx(0.75));
  CHECK(m.acceptance_rate(2) == Approx(2.0 / 3.0));
  CHECK(m.acceptance_rate(3) == Approx(0.5));
  CHECK(m.acceptance_rate(7) == 0.0);
  CHECK(m.levels() == 3);
}

TEST_CASE("autoregressive steps give block efficiency one", "[metrics]") {
  DecodeMetrics m;
  for (int i = 0; i < 5; ++i) m.record_step({.emitted = 1});
  CHECK(m.block_efficiency() == Approx(1.0));
  CHECK(m.mean_target_budget() == 0.0);
  CHECK(m.levels() == 0);
  CHECK(m.mbsu(0, 0.3) == Approx(1.0));
}

TEST_CASE("merge equals recording everything in one run", "[metrics]") {
  const auto steps = four_steps();
  DecodeMetrics all, first, second;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    all.record_step(steps[i]);
    (i == 3 ? first : second).record_step(steps[i]);  // `first` has a shallower tree only
  }
  first.sequences = 1;
  first.wall_seconds = 0.25;
  second.sequences = 2;
  second.wall_seconds = 0.5;
  first.merge(second);
  CHECK(first.sequences == 3);
  CHECK(first.wall_seconds == Approx(0.75));
  CHECK(first.tokens_generated == all.tokens_generated);
  CHECK(first.target_calls == all.target_calls);
  CHECK(first.draft_calls == all.draft_calls);
  CHECK(first.target_tree_tokens == all.target_tree_tokens);
  CHECK(first.attempted_per_level == all.attempted_per_level);
  CHECK(first.accepted_per_level == all.accepted_per_level);
}

TEST_CASE("record_step and mbsu reject bad input", "[metrics][errors]") {
  DecodeMetrics m;
  CHECK_THROWS_WITH(m.record_step({.tree_depth = 2, .accepted_depth = 3}),
                    Contains("step.accepted_depth"));
  CHECK_THROWS_WITH(m.record_step({.tree_tokens = -1}), Contains("step.tree_tokens"));
  CHECK_THROWS_WITH(m.record_step({.emitted = -2}), Contains("step.emitted"));
  CHECK(m.target_calls == 0);
  CHECK_THROWS_WITH(m.mbsu(-1, 0.1), Contains("depth"));
  CHECK_THROWS_WITH(m.mbsu(2, -0.1), Contains("cost_ratio"));
  CHECK_THROWS_WITH(m.acceptance_rate(0), Contains("depth"));
}

TEST_CASE("a results row shows the computed metrics", "[metrics]") {
  DecodeMetrics m;
  for (const auto& s : four_steps()) m.record_step(s);
  const auto row = format_metrics_row("rsd_s", m, 3, 0.1);
  CHECK_THAT(row, Contains("rsd_s") && Contains("3.50") && Contains("2.500") && Contains("1.923") &&
                      Contains("0.750 0.667 0.500"));
  CHECK_THAT(format_metrics_header(), Contains("MBSU") && Contains("eta"));
}

TEST_CASE("sequence streams follow the root position and domain rule", "[sequence]") {
  const std::vector<Token> prompt = {3, 1, 2};
  SequenceState s(prompt, 4, 99, 7);
  CHECK(s.position() == 2);
  CHECK(s.generated_count() == 0);
  const auto draft = s.draft_stream();
  CHECK(draft.seed == 99);
  CHECK(draft.sequence == 7);
  CHECK(draft.position == 2);
  CHECK(draft.node == 0);
  CHECK(draft.domain == Domain::kDraft);
  CHECK(s.verify_stream().domain == Domain::kVerify);
  CHECK(s.sample_stream().domain == Domain::kSample);
  CHECK(s.draft_stream().uniform(0) != s.verify_stream().uniform(0));
  const std::vector<Token> step = {0, 3};
  s.append(step);
  CHECK(s.position() == 4);
  CHECK(s.verify_stream().position == 4);
  CHECK(std::vector<Token>(s.generated().begin(), s.generated().end()) == step);
  // The same (seed, id, position) gives the same draws whatever happened before.
  SequenceState other(std::vector<Token>{0, 0, 0, 0, 0}, 4, 99, 7);
  CHECK(other.verify_stream().uniform(5) == s.verify_stream().uniform(5));
}

TEST_CASE("a sequence rejects an empty or out-of-range prompt", "[sequence][errors]") {
  CHECK_THROWS_WITH(SequenceState({}, 4, 1, 0), Contains("prompt") && Contains("empty"));
  const std::vector<Token> bad = {1, 4};
  CHECK_THROWS_WITH(SequenceState(bad, 4, 1, 0), Contains("prompt[1]"));
}
