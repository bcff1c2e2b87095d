// SPDX-License-Identifier: MIT
// vLLM's synthetic acceptance (verify/synthetic.hpp): the accepted length follows the preset
// rates whatever the rows say, the correction follows the target without the draft token.
#include <map>

#include "helpers.hpp"
#include "specdec/backend/cpu/lossy_chain_batch.hpp"

using namespace specdec;

namespace synthetic_tests {

constexpr std::int64_t kVocab = 4;
constexpr std::size_t kLength = 3;

/// Rows where the draft token is likely (row 0), forbidden (row 1), a point mass (row 2): the
/// rates must not care.
const std::vector<float> kRows = {0.7f, 0.1f, 0.1f, 0.1f,  //
                                  0.0f, 0.5f, 0.3f, 0.2f,  //
                                  0.0f, 0.0f, 1.0f, 0.0f,  //
                                  0.25f, 0.25f, 0.4f, 0.1f};
const std::vector<Token> kDrafts = {0, 0, 2};
const std::vector<float> kRates = {0.8f, 0.5f, 0.3f};

/// Outcome bin: accepted length n (0..L) times the last emitted token.
std::size_t bin(std::int32_t accepted, Token last) {
  return static_cast<std::size_t>(accepted) * kVocab + static_cast<std::size_t>(last);
}

/// The law the rule claims: P(n) = r_0 ... r_(n-1) (1 - r_n) (r_L = 0), the correction at n < L
/// from row n without the draft token (the row itself when that leaves nothing), the bonus from
/// row L.
std::vector<double> claimed_law() {
  std::vector<double> law((kLength + 1) * kVocab, 0.0);
  double reach = 1.0;
  for (std::size_t n = 0; n <= kLength; ++n) {
    const double stop = n < kLength ? reach * (1.0 - kRates[n]) : reach;
    std::vector<double> row(kRows.begin() + static_cast<std::ptrdiff_t>(n * kVocab),
                            kRows.begin() + static_cast<std::ptrdiff_t>((n + 1) * kVocab));
    if (n < kLength && row[static_cast<std::size_t>(kDrafts[n])] < 1.0) {
      row[static_cast<std::size_t>(kDrafts[n])] = 0.0;
    }
    double mass = 0.0;
    for (double p : row) mass += p;
    for (std::int64_t y = 0; y < kVocab; ++y) {
      law[bin(static_cast<std::int32_t>(n), static_cast<Token>(y))] +=
          stop * row[static_cast<std::size_t>(y)] / mass;
    }
    if (n < kLength) reach *= kRates[n];
  }
  return law;
}

TEST_CASE("synthetic: accepted length and last token follow the claimed law (chi-square)",
          "[synthetic]") {
  const auto law = claimed_law();
  std::vector<std::int64_t> counts(law.size(), 0);
  Workspace ws;
  std::vector<Token> out(kLength + 1);
  const std::uint32_t runs = test::monte_carlo_runs(200000);
  for (std::uint32_t s = 0; s < runs; ++s) {
    const auto v = verify_chain_synthetic<float>(kRows, kDrafts, kVocab, kRates,
                                                 RandomStream{21, s, 0, 0, Domain::kVerify}, out, ws);
    for (std::int32_t i = 0; i < v.accepted; ++i) REQUIRE(out[static_cast<std::size_t>(i)] == kDrafts[static_cast<std::size_t>(i)]);
    ++counts[bin(v.accepted, out[static_cast<std::size_t>(v.accepted)])];
  }
  // A correct rule fails with probability kFalseFailureProbability (1e-6).
  const auto chi = test::chi_square_test(counts, law);
  INFO("chi-square " << chi.statistic << " df " << chi.df);
  REQUIRE(chi.p_value > test::kFalseFailureProbability);
}

TEST_CASE("synthetic: rates of 1 accept every draft, even one the target forbids", "[synthetic]") {
  Workspace ws;
  std::vector<Token> out(kLength + 1);
  const std::vector<float> ones(kLength, 1.0f);
  for (std::uint32_t s = 0; s < 64; ++s) {
    const auto v = verify_chain_synthetic<float>(kRows, kDrafts, kVocab, ones,
                                                 RandomStream{3, s, 0, 0, Domain::kVerify}, out, ws);
    REQUIRE(v.accepted == 3);
    REQUIRE(out[1] == 0);  // p(0) = 0 at position 1
  }
}

TEST_CASE("synthetic: the batch is the single chain bit for bit", "[synthetic]") {
  // Two sequences: the chain above and one of no drafts (only its bonus).
  std::vector<float> rows = kRows;
  rows.insert(rows.end(), kRows.end() - kVocab, kRows.end());
  const std::vector<std::int32_t> offsets = {0, 3, 3};
  const std::vector<RandomStream> streams = {RandomStream{5, 1, 0, 0, Domain::kVerify},
                                             RandomStream{5, 2, 0, 0, Domain::kVerify}};
  std::vector<Token> emitted(5, -7);
  std::vector<std::int32_t> accepted(2, -7);
  Workspace ws;
  verify_chain_batch_synthetic(backend::cpu,
                               ChainBatchArgs{.draft_offsets = offsets,
                                              .target_rows = MatrixView<const float>(rows.data(), 5, kVocab),
                                              .draft_tokens = kDrafts,
                                              .streams = streams,
                                              .emitted = emitted,
                                              .accepted = accepted},
                               kRates, ws);
  std::vector<Token> out(kLength + 1, -1);
  const auto v = verify_chain_synthetic<float>(kRows, kDrafts, kVocab, kRates, streams[0], out, ws);
  REQUIRE(accepted[0] == v.accepted);
  for (std::int32_t i = 0; i <= v.accepted; ++i) REQUIRE(emitted[static_cast<std::size_t>(i)] == out[static_cast<std::size_t>(i)]);
  REQUIRE(accepted[1] == 0);
  REQUIRE(emitted[4] == detail::sample_row(kRows.data() + 3 * kVocab, kVocab,
                                           streams[1].at_position(0).uniform(0)));
}

TEST_CASE("synthetic: bad rates name synthetic_acceptance_rates", "[synthetic]") {
  Workspace ws;
  std::vector<Token> out(kLength + 1);
  const RandomStream s{1, 0, 0, 0, Domain::kVerify};
  const std::vector<float> high = {0.5f, 1.5f, 0.5f}, short_rates = {0.5f};
  REQUIRE_THROWS_WITH(verify_chain_synthetic<float>(kRows, kDrafts, kVocab, high, s, out, ws),
                      Catch::Contains("synthetic_acceptance_rates[1]"));
  REQUIRE_THROWS_WITH(verify_chain_synthetic<float>(kRows, kDrafts, kVocab, short_rates, s, out, ws),
                      Catch::Contains("synthetic_acceptance_rates"));
}

}  // namespace synthetic_tests
