// SPDX-License-Identifier: MIT
// Bad input: every public verification entry throws specdec::Error naming the field.
#include <limits>

#include "helpers.hpp"

using namespace specdec;
using Catch::Contains;

namespace {
const std::vector<float> kTarget = {.2f, .3f, .5f};
const std::vector<float> kDraft = {.5f, .3f, .2f};
const std::vector<Token> kOne = {0};
const RandomStream kStream{1};
}  // namespace

TEST_CASE("node rules reject bad rows", "[verify][bad]") {
  Workspace ws;
  const std::vector<float> nan_row = {std::numeric_limits<float>::quiet_NaN(), .5f, .5f};
  const std::vector<float> negative = {-.1f, .6f, .5f};
  const std::vector<float> unnormalised = {.2f, .3f, .6f};
  const std::vector<float> short_row = {.5f, .5f};
  CHECK_THROWS_WITH(verify_rejection(nan_row, kDraft, 0, kStream, ws), Contains("target[0]"));
  CHECK_THROWS_WITH(verify_rejection(kTarget, negative, 0, kStream, ws), Contains("draft[0]"));
  CHECK_THROWS_WITH(verify_multi_round(unnormalised, kDraft, kOne, kStream, ws),
                    Contains("target: sums to"));
  CHECK_THROWS_WITH(verify_recursive(kTarget, short_row, kOne, kStream, ws),
                    Contains("draft: has 2 elements"));
  CHECK_THROWS_WITH(verify_spectr(kTarget, nan_row, kOne, 0.0, kStream, ws), Contains("draft[0]"));
  CHECK_THROWS_WITH(verify_lossy(negative, kDraft, 0, 0.1f, 1.0f, kStream, ws),
                    Contains("target[0]"));
  CHECK_THROWS_WITH(verify_typical(nan_row, kOne, 0.3f, 0.09f, kStream), Contains("target[0]"));
  CHECK_THROWS_WITH(verify_greedy(unnormalised, kOne), Contains("target"));
  CHECK_THROWS_WITH(
      verify_cascade(kTarget, unnormalised, kTarget, kDraft, 0, Cascade{Deferral::kChow, 0.1f},
                     kStream, ws),
      Contains("raw_draft"));
  CHECK_THROWS_AS(verify_node(MultiRound{}, nan_row, kDraft, kOne, kStream, ws), Error);
}

TEST_CASE("node rules reject bad candidates", "[verify][bad]") {
  Workspace ws;
  const std::vector<Token> out_of_range = {1, 9};
  const std::vector<Token> none = {};
  const std::vector<Token> repeated = {1, 1};
  const std::vector<float> zero_draft = {.5f, .5f, 0.f};
  CHECK_THROWS_WITH(verify_multi_round(kTarget, kDraft, out_of_range, kStream, ws),
                    Contains("candidates[1]: token 9 is outside the vocabulary [0, 3)"));
  CHECK_THROWS_WITH(verify_rejection(kTarget, kDraft, -1, kStream, ws), Contains("candidate:"));
  CHECK_THROWS_WITH(verify_multi_round(kTarget, kDraft, none, kStream, ws), Contains("candidates"));
  CHECK_THROWS_WITH(verify_recursive(kTarget, kDraft, repeated, kStream, ws),
                    Contains("candidates[1]"));
  const std::vector<Token> two = {2};
  CHECK_THROWS_WITH(verify_rejection(kTarget, zero_draft, 2, kStream, ws),
                    Contains("candidate: token 2 has draft probability 0"));
  CHECK_THROWS_WITH(verify_node(Rejection{}, kTarget, kDraft, repeated, kStream, ws),
                    Contains("candidates"));
  CHECK_THROWS_WITH(verify_typical(kTarget, out_of_range, 0.3f, 0.09f, kStream),
                    Contains("candidates[1]"));
}

TEST_CASE("lossy sampling rejects bad alpha and beta", "[verify][bad]") {
  Workspace ws;
  CHECK_THROWS_WITH(verify_lossy(kTarget, kDraft, 0, 1.0f, 1.0f, kStream, ws), Contains("alpha"));
  CHECK_THROWS_WITH(verify_lossy(kTarget, kDraft, 0, -0.1f, 1.0f, kStream, ws), Contains("alpha"));
  CHECK_THROWS_WITH(verify_lossy(kTarget, kDraft, 0, 0.2f, 0.5f, kStream, ws), Contains("beta"));
  CHECK_THROWS_WITH(verify_lossy(kTarget, kDraft, 0, 0.2f, std::nanf(""), kStream, ws),
                    Contains("beta"));
  // beta so large that [target / beta - draft]+ is empty while rejection is possible.
  CHECK_THROWS_WITH(verify_lossy(kTarget, kDraft, 0, 0.2f, 100.0f, kStream, ws), Contains("beta"));
  CHECK_THROWS_WITH(verify_node(Lossy{1.5f}, kTarget, kDraft, kOne, kStream, ws),
                    Contains("alpha"));
  CHECK_THROWS_WITH(lossy_tuned_beta<float>(kTarget, kDraft, 1.0), Contains("alpha"));
  CHECK_THROWS_WITH(verify_lossy_greedy(kTarget, 0, 1.0f), Contains("alpha"));
}

TEST_CASE("SpecTr rejects a gamma whose residual would be negative", "[verify][bad][spectr]") {
  Workspace ws;
  const std::vector<float> target = {.25f, .75f}, draft = {.5f, .5f};
  const std::vector<Token> two = {0, 1};
  CHECK_THROWS_WITH(verify_spectr(target, draft, two, 1.0, kStream, ws),
                    Contains("gamma: 1 makes the K-SEQ residual negative"));
  CHECK_THROWS_WITH(verify_spectr(target, draft, two, 3.0, kStream, ws),
                    Contains("gamma: 3 is outside [1, K = 2]"));
  CHECK_THROWS_WITH(verify_node(SpecTr{0.5}, target, draft, two, kStream, ws), Contains("gamma"));
  CHECK_NOTHROW(verify_spectr(target, draft, two, 2.0, kStream, ws));
  CHECK_THROWS_WITH(spectr_gamma<float>(target, draft, 0), Contains("count"));
}

TEST_CASE("cascade and typical rules reject bad parameters", "[verify][bad]") {
  Workspace ws;
  CHECK_THROWS_WITH(verify_node(Cascade{Deferral::kChow, 1.5f}, kTarget, kDraft, kOne, kStream, ws),
                    Contains("alpha"));
  CHECK_THROWS_WITH(
      verify_node(Cascade{Deferral::kTokenV2, -2.0f}, kTarget, kDraft, kOne, kStream, ws),
      Contains("alpha"));
  CHECK_THROWS_WITH(
      verify_node(Cascade{Deferral::kOpt, std::nanf("")}, kTarget, kDraft, kOne, kStream, ws),
      Contains("alpha"));
  CHECK_THROWS_WITH(verify_node(Typical{1.5f, 0.09f}, kTarget, kDraft, kOne, kStream, ws),
                    Contains("epsilon"));
  CHECK_THROWS_WITH(verify_node(Typical{0.3f, -1.0f}, kTarget, kDraft, kOne, kStream, ws),
                    Contains("delta"));
}

TEST_CASE("chain and block verification reject bad shapes", "[verify][bad]") {
  Workspace ws;
  std::vector<float> target_rows = kTarget, draft_rows;
  target_rows.insert(target_rows.end(), kTarget.begin(), kTarget.end());
  draft_rows = kDraft;
  std::vector<Token> out(2), short_out(1);
  const std::vector<Token> bad_token = {5};
  CHECK_THROWS_WITH(
      verify_chain<float>(Rejection{}, kTarget, draft_rows, kOne, 3, kStream, out, ws),
      Contains("target_rows: has 3 elements, expected 6"));
  CHECK_THROWS_WITH(
      verify_chain<float>(Rejection{}, target_rows, draft_rows, kOne, 3, kStream, short_out, ws),
      Contains("out"));
  CHECK_THROWS_WITH(
      verify_chain<float>(Rejection{}, target_rows, draft_rows, bad_token, 3, kStream, out, ws),
      Contains("draft_tokens[0]"));
  CHECK_THROWS_WITH(verify_block<float>(target_rows, kTarget, kOne, 0, kStream, out, ws),
                    Contains("vocab"));
  std::vector<float> bad_rows = target_rows;
  bad_rows[4] = 2.0f;
  CHECK_THROWS_WITH(verify_block<float>(bad_rows, draft_rows, kOne, 3, kStream, out, ws),
                    Contains("target_rows[1]"));
}

TEST_CASE("tree verification rejects malformed trees", "[verify][bad][tree]") {
  Workspace ws;
  std::vector<float> rows;
  for (int i = 0; i < 3; ++i) rows.insert(rows.end(), kTarget.begin(), kTarget.end());
  std::vector<std::int32_t> accepted(2);
  const std::vector<Token> tokens = {0, 1};
  const std::vector<std::int32_t> forward = {-1, 1};
  const std::vector<std::int32_t> siblings = {-1, -1};
  const std::vector<Token> twins = {1, 1};
  CHECK_THROWS_WITH(
      verify_tree<float>(MultiRound{}, {tokens, forward}, rows, rows, 3, kStream, accepted, ws),
      Contains("parents[1]"));
  CHECK_THROWS_WITH(
      verify_tree<float>(Recursive{}, {twins, siblings}, rows, rows, 3, kStream, accepted, ws),
      Contains("tokens[1]"));
  CHECK_THROWS_WITH(
      verify_tree<float>(Rejection{}, {tokens, siblings}, rows, rows, 3, kStream, accepted, ws),
      Contains("children"));
  std::vector<std::int32_t> no_room;
  const std::vector<std::int32_t> chain = {-1, 0};
  CHECK_THROWS_WITH(
      verify_tree<float>(MultiRound{}, {tokens, chain}, rows, rows, 3, kStream, no_room, ws),
      Contains("accepted_nodes"));
}

TEST_CASE("exact enumeration rejects bad requests", "[verify][bad]") {
  std::vector<double> out(3);
  std::vector<double> small(2);
  CHECK_THROWS_WITH(exact_node_distribution(Rejection{}, kTarget, kDraft, 2, out),
                    Contains("count"));
  CHECK_THROWS_WITH(exact_node_distribution(MultiRound{}, kTarget, kDraft, 1, small),
                    Contains("out"));
  const std::vector<float> big(64, 1.0f / 64);
  std::vector<double> big_out(64);
  CHECK_THROWS_WITH(exact_node_distribution(MultiRound{}, big, big, 6, big_out), Contains("count"));
}

TEST_CASE("verify_greedy and verify_node(Greedy) agree on an empty candidate list",
          "[verify][errors]") {
  const std::vector<float> target = {0.2f, 0.5f, 0.3f};
  Workspace ws;
  const std::vector<Token> none;
  CHECK_THROWS_WITH(verify_greedy(target, none), "candidates: has 0 candidates, this rule takes 1 to 1048576");
  CHECK_THROWS_WITH(verify_node(Greedy{}, target, target, none, RandomStream{}, ws),
                    "candidates: has 0 candidates, this rule takes 1 to 1048576");
  const std::vector<Token> one = {1};
  const auto direct = verify_greedy(target, one);
  const auto through_rule = verify_node(Greedy{}, target, target, one, RandomStream{}, ws);
  CHECK(direct.accepted == through_rule.accepted);
  CHECK(direct.token == through_rule.token);
}

TEST_CASE("chain verification checks the rows it reaches and never reads those after a rejection",
          "[verify][bad]") {
  // Position 0 rejects for sure: its target row puts no mass on the drafted token 0.
  Workspace ws;
  const std::vector<float> reject = {0.0f, 0.5f, 0.5f}, draft = {1.0f, 0.0f, 0.0f};
  const std::vector<Token> tokens = {0, 0};
  std::vector<float> target_rows = reject, draft_rows = draft;
  const std::vector<float> bad = {NAN, 0.5f, 0.5f};
  target_rows.insert(target_rows.end(), bad.begin(), bad.end());  // row 1: never read
  target_rows.insert(target_rows.end(), bad.begin(), bad.end());  // row 2: never read
  draft_rows.insert(draft_rows.end(), bad.begin(), bad.end());    // draft row 1: never read
  std::vector<Token> out(3);
  const auto verdict =
      verify_chain<float>(Rejection{}, target_rows, draft_rows, tokens, 3, kStream, out, ws);
  CHECK(verdict.accepted == 0);
  CHECK(out[0] != 0);
  // The same bad row where the walk reads it is reported, by name.
  std::vector<float> first_bad = bad;
  first_bad.insert(first_bad.end(), target_rows.begin() + 3, target_rows.end());
  CHECK_THROWS_WITH(
      verify_chain<float>(Rejection{}, first_bad, draft_rows, tokens, 3, kStream, out, ws),
      Contains("target_rows[0]"));
  // Token ids are checked up front, wherever they are.
  const std::vector<Token> late_bad_token = {0, 7};
  CHECK_THROWS_WITH(
      verify_chain<float>(Rejection{}, target_rows, draft_rows, late_bad_token, 3, kStream, out, ws),
      Contains("draft_tokens[1]"));
}
