// SPDX-License-Identifier: MIT
// Greedy matching at the sequence level: every emitted token is an argmax, the bonus token too.
#include "helpers.hpp"

using namespace specdec;

namespace {

// Root -> node 0 (token 1) -> node 1 (token 0), a leaf whose row is not one-hot.
const std::vector<Token> kLeafTokens = {1, 0};
const std::vector<std::int32_t> kLeafParents = {-1, 0};
const std::vector<float> kLeafRows = {0.1f, 0.6f, 0.3f,   // root
                                      0.5f, 0.2f, 0.3f,   // after node 0
                                      0.3f, 0.3f, 0.4f};  // after node 1 (the leaf)
const std::vector<float> kLeafDrafts(9, 1.0f / 3.0f);

}  // namespace

TEST_CASE("greedy chains take the bonus token as the argmax of a row that is not one-hot",
          "[verify][chain][greedy]") {
  // Rows with mass off the argmax: a sampled bonus token would be 0 or 2 for about half the seeds.
  const std::vector<float> row0 = {0.1f, 0.6f, 0.3f}, row1 = {0.5f, 0.2f, 0.3f},
                           bonus = {0.3f, 0.4f, 0.3f};
  std::vector<float> target_rows;
  for (const auto* r : {&row0, &row1, &bonus})
    target_rows.insert(target_rows.end(), r->begin(), r->end());
  const std::vector<float> draft_rows(6, 1.0f / 3.0f);
  const std::vector<Token> tokens = {1, 0};  // the argmax of each position: both accepted
  Workspace ws;
  std::vector<Token> out(3);
  for (std::uint32_t s = 0; s < 64; ++s) {
    const auto v = verify_chain<float>(Greedy{}, target_rows, draft_rows, tokens, 3,
                                       RandomStream{s, 0, 0, 0, Domain::kVerify}, out, ws);
    REQUIRE(v.accepted == 2);
    CHECK(out[2] == 1);
  }
}

TEST_CASE("greedy trees take the bonus token after a leaf as the argmax of its row",
          "[verify][tree][greedy]") {
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  for (std::uint32_t s = 0; s < 64; ++s) {
    const auto v = verify_tree<float>(Greedy{}, {kLeafTokens, kLeafParents}, kLeafRows, kLeafDrafts,
                                      3, RandomStream{s, 0, 0, 0, Domain::kVerify}, accepted, ws);
    REQUIRE(v.accepted == 2);
    CHECK(v.bonus);
    CHECK(v.token == 2);
  }
}

TEST_CASE("lossy greedy chains and trees take the bonus token as the argmax of its row",
          "[verify][chain][tree][lossy][greedy]") {
  // Lossy{greedy} corrects with the argmax; its bonus token must be the argmax too, not a draw.
  const std::vector<float> chain_rows = {0.1f, 0.6f, 0.3f,   // position 0: token 1 accepted
                                         0.3f, 0.4f, 0.3f};  // bonus row, not one-hot
  const std::vector<float> chain_drafts(3, 1.0f / 3.0f);
  const std::vector<Token> chain_tokens = {1};
  const Rule rule = Lossy{.alpha = 0.1f, .greedy = true};
  Workspace ws;
  std::vector<Token> out(2);
  std::vector<std::int32_t> accepted(2);
  for (std::uint32_t s = 0; s < 64; ++s) {
    const RandomStream stream{s, 0, 0, 0, Domain::kVerify};
    const auto c =
        verify_chain<float>(rule, chain_rows, chain_drafts, chain_tokens, 3, stream, out, ws);
    REQUIRE(c.accepted == 1);
    CHECK(out[1] == 1);
    const auto t = verify_tree<float>(rule, {kLeafTokens, kLeafParents}, kLeafRows, kLeafDrafts, 3,
                                      stream, accepted, ws);
    REQUIRE(t.accepted == 2);
    CHECK(t.bonus);
    CHECK(t.token == 2);
  }
}
