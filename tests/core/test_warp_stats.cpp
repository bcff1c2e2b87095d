// SPDX-License-Identifier: MIT
// The statistics path (core/warp/logit_stats.hpp) against the materialised rows: every entry recomputed
// from its logit has the bits of the written row, the rows keep the support of the warp's row
// algorithm (warp_scaled_logits_in_place), and a chain step from logits makes the same decisions
// and emits the same tokens as warping every row and calling verify_chain.
#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/core/warp/logit_stats.hpp"
#include "specdec/core/rough_bounds.hpp"
#include "specdec/core/top_p.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/warp/row_writer.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/chain_logits.hpp"

using namespace specdec;

namespace {

const std::vector<Warp> kWarps = {
    {},
    {.temperature = 0.0f},
    {.temperature = 0.8f},
    {.temperature = 0.8f, .top_p = 0.9f},
    {.top_p = 0.3f},
    {.temperature = 0.8f, .top_k = 50},
    {.top_k = 1},
    {.top_k = 7, .top_p = 0.8f},
    {.min_p = 0.05f},
    {.temperature = 1.3f, .top_p = 0.95f, .min_p = 0.1f},
    {.temperature = 0.5f, .top_k = 40, .top_p = 0.95f, .min_p = 0.1f},
};

// Logits ~ normal(0, scale); with `ties`, rounded to a coarse grid so many entries tie at any cut.
template <class T>
std::vector<T> make_logits(std::int64_t n, std::uint64_t seed, bool ties) {
  toy::ToyRandom rng(seed);
  std::vector<T> out(static_cast<std::size_t>(n));
  for (auto& x : out) {
    float v = static_cast<float>(3.0 * rng.normal());
    if (ties) v = std::round(v * 2.0f) / 2.0f;
    x = static_cast<T>(v);
  }
  return out;
}

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// The row as the former materialised path computes it (Eigen softmax, in-place truncations).
template <class T>
std::vector<float> reference_row(const Warp& w, const std::vector<T>& logits) {
  const auto n = static_cast<std::int64_t>(logits.size());
  std::vector<float> out(logits.size());
  std::vector<std::int32_t> idx(detail::warp_scratch_words(n));
  if (w.is_greedy()) {
    detail::one_hot(out.data(), n, detail::row_argmax(logits.data(), n));
    return out;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(logits[i]) * (1.0f / w.temperature);
  }
  detail::warp_scaled_logits_in_place(w, out.data(), n, idx.data());
  return out;
}

/// A row of logits both ways: the row warp_logits writes, and the statistics warp_stats gives
/// (a valid row), with the scratch they were computed in.
struct WarpedRow {
  std::vector<float> row;
  std::vector<std::int32_t> scratch;
  detail::WarpStats stats;
};

template <class T>
WarpedRow warped_row(const Warp& w, const std::vector<T>& logits) {
  const auto n = static_cast<std::int64_t>(logits.size());
  Workspace ws;
  WarpedRow out{std::vector<float>(logits.size()),
                std::vector<std::int32_t>(detail::warp_stats_scratch_size(n) / sizeof(std::int32_t)),
                detail::WarpStats::uncut()};
  warp_logits<T>(w, logits, out.row, ws);
  bool invalid = true;
  out.stats = detail::warp_stats(w, logits.data(), n, detail::warp_scratch(out.scratch.data(), n),
                                 invalid);
  REQUIRE_FALSE(invalid);
  return out;
}

template <class T>
void check_row(const Warp& w, const std::vector<T>& logits) {
  const auto n = static_cast<std::int64_t>(logits.size());
  const auto [row, scratch, stats] = warped_row(w, logits);
  const auto reference = reference_row(w, logits);
  int differ = 0, support = 0, far = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const float p = detail::warped_probability(stats, static_cast<float>(logits[k]), i);
    differ += bits(p) != bits(row[k]) ? 1 : 0;
    support += (row[k] > 0.0f) != (reference[k] > 0.0f) ? 1 : 0;
    // The former row summed in float (Eigen's order): a few 1e-6 of relative error.
    far += std::abs(row[k] - reference[k]) <= 1e-5f * reference[k] + 1e-12f ? 0 : 1;
  }
  CAPTURE(w.temperature, w.top_k, w.top_p, w.min_p, n);
  CHECK(differ == 0);
  CHECK(support == 0);
  CHECK(far == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("an entry recomputed from the statistics has the bits of the written row",
                   "[core][warp][stats]", float, Eigen::half, Eigen::bfloat16) {
  for (const std::int64_t n : {5, 64, 300, 5000}) {
    for (const bool ties : {false, true}) {
      for (const Warp& w : kWarps) {
        if (w.top_k > n) continue;
        check_row<TestType>(w, make_logits<TestType>(n, static_cast<std::uint64_t>(n + ties), ties));
      }
    }
  }
}

namespace {

// The nucleus of the statistics against the row algorithm's keep_top_p run on the softmax row
// the same statistics give: the support and every kept value agree bit for bit.
void check_nucleus(const Warp& w, const std::vector<float>& logits) {
  const auto n = static_cast<std::int64_t>(logits.size());
  auto [row, scratch, stats] = warped_row(w, logits);
  std::vector<float> expected(logits.size());
  for (std::int64_t i = 0; i < n; ++i) {
    expected[static_cast<std::size_t>(i)] =
        detail::softmax_probability(stats, logits[static_cast<std::size_t>(i)], i);
  }
  const auto cut_scratch = detail::warp_scratch(scratch.data(), n);
  detail::keep_top_p(expected.data(), n, w.top_p, cut_scratch.bucket, cut_scratch.work_values);
  int differ = 0, kept = 0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    differ += bits(row[i]) != bits(expected[i]) ? 1 : 0;
    kept += row[i] > 0.0f ? 1 : 0;
  }
  CAPTURE(w.temperature, w.top_p, n, kept);
  CHECK(differ == 0);
  CHECK(kept > 0);
}

}  // namespace

TEST_CASE("the nucleus of a large row is selected by mass as keep_top_p cuts it",
          "[core][warp][stats]") {
  // Rows long enough for the pruned candidates to be selected by sampled brackets (no ordering):
  // the cut, its ties and the kept mass match keep_top_p at every top-p.
  const float top_ps[] = {0.05f, 0.3f, 0.9f, 0.95f, 0.999f};
  for (const std::int64_t n : {2000, 40000, 128256}) {
    for (const bool ties : {false, true}) {
      for (const float top_p : top_ps) {
        for (const float temperature : {0.5f, 0.8f, 1.5f}) {
          check_nucleus({.temperature = temperature, .top_p = top_p},
                        make_logits<float>(n, static_cast<std::uint64_t>(n + 7 * ties), ties));
        }
      }
    }
  }
  // One leader and a flat rest: the nucleus is the leader or the leader plus the lowest ids.
  std::vector<float> flat(50000, 0.0f);
  flat[777] = 6.0f;
  check_nucleus({.top_p = 0.5f}, flat);
  check_nucleus({.top_p = 0.9f}, flat);
}

TEST_CASE("the statistics keep ties at the top-p and top-k cuts to the lowest id",
          "[core][warp][stats]") {
  // 200 equal leaders: top-p 0.5 keeps exactly the first 100, top-k 30 the first 30.
  std::vector<float> logits(1000, -5.0f);
  for (int i = 0; i < 200; ++i) logits[static_cast<std::size_t>(3 * i + 1)] = 4.0f;
  Workspace ws;
  std::vector<float> row(logits.size());
  warp_logits<float>({.top_p = 0.5f}, logits, row, ws);
  int kept = 0, last = -1;
  for (int i = 0; i < 1000; ++i) {
    if (row[static_cast<std::size_t>(i)] > 0.0f) {
      ++kept;
      last = i;
    }
  }
  const float leader_mass = 200.0f / (200.0f + 800.0f * std::exp(-9.0f));
  CHECK(kept == static_cast<int>(std::ceil(0.5f / (leader_mass / 200.0f) - 1e-4f)));
  CHECK(last == 3 * (kept - 1) + 1);
  warp_logits<float>({.top_k = 30}, logits, row, ws);
  kept = 0;
  for (int i = 0; i < 1000; ++i) kept += row[static_cast<std::size_t>(i)] > 0.0f ? 1 : 0;
  CHECK(kept == 30);
  CHECK(row[3 * 29 + 1] > 0.0f);
  CHECK(row[3 * 30 + 1] == 0.0f);
}

namespace {

template <class T>
void check_chain(const Warp& w, std::int64_t vocab, std::uint64_t seed, int mode) {
  constexpr std::int64_t gamma = 4;
  const auto v = static_cast<std::size_t>(vocab);
  toy::ToyRandom rng(seed);
  // mode 0: draft = target + noise; 1: draft = target (all accepted); 2: first token banned.
  auto target = make_logits<T>((gamma + 1) * vocab, seed, seed % 2 == 0);
  std::vector<T> draft(static_cast<std::size_t>(gamma * vocab));
  for (std::size_t i = 0; i < draft.size(); ++i) {
    const float noise = mode == 1 ? 0.0f : static_cast<float>(0.7 * rng.normal());
    draft[i] = static_cast<T>(static_cast<float>(target[i]) + noise);
  }
  Workspace ws;
  std::vector<float> target_rows(target.size()), draft_rows(draft.size());
  for (std::size_t r = 0; r <= static_cast<std::size_t>(gamma); ++r) {
    if (r < static_cast<std::size_t>(gamma)) {
      warp_logits<T>(w, std::span<const T>(draft).subspan(r * v, v),
                     std::span<float>(draft_rows).subspan(r * v, v), ws);
    }
  }
  std::vector<Token> tokens(static_cast<std::size_t>(gamma));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const double u = rng.uniform();
    double run = 0.0;
    for (std::size_t x = 0; x < v; ++x) {
      if (draft_rows[i * v + x] > 0.0f) tokens[i] = static_cast<Token>(x);
      run += draft_rows[i * v + x];
      if (run > u) break;
    }
  }
  if (mode == 2) target[static_cast<std::size_t>(tokens[0])] = static_cast<T>(-INFINITY);
  for (std::size_t r = 0; r <= static_cast<std::size_t>(gamma); ++r) {
    warp_logits<T>(w, std::span<const T>(target).subspan(r * v, v),
                   std::span<float>(target_rows).subspan(r * v, v), ws);
  }
  const RandomStream stream{.seed = seed, .sequence = 3, .position = 17};
  std::vector<Token> expected(static_cast<std::size_t>(gamma + 1), kNoToken);
  const auto want = verify_chain<float>(Rejection{}, target_rows, draft_rows, tokens, vocab, stream,
                                        expected, ws);
  std::vector<Token> got(static_cast<std::size_t>(gamma + 1), kNoToken);
  std::vector<std::int32_t> accepted(1, -1);
  const std::int32_t offsets[2] = {0, gamma};
  verify_chain_batch_logits(backend::cpu,
                            ChainBatchLogitsArgs<T>{
                                .draft_offsets = offsets,
                                .target_logits = MatrixView<const T>(target.data(), gamma + 1, vocab),
                                .draft_logits = MatrixView<const T>(draft.data(), gamma, vocab),
                                .warps = std::span<const Warp>(&w, 1),
                                .draft_tokens = tokens,
                                .streams = std::span<const RandomStream>(&stream, 1),
                                .emitted = got,
                                .accepted = accepted},
                            ws);
  CAPTURE(w.temperature, w.top_k, w.top_p, w.min_p, vocab, seed, mode);
  REQUIRE(accepted[0] == want.accepted);
  for (std::int32_t i = want.emitted; i <= gamma; ++i) expected[static_cast<std::size_t>(i)] = kNoToken;
  CHECK(got == expected);
  if (mode == 1) CHECK(want.accepted == gamma);
  if (mode == 2) CHECK(want.accepted == 0);
}

}  // namespace

TEMPLATE_TEST_CASE("a chain step from logits decides as the materialised rows do",
                   "[core][warp][stats][chain]", float, Eigen::half, Eigen::bfloat16) {
  int total = 0;
  for (const Warp& w : kWarps) {
    for (const std::int64_t vocab : {40, 300, 3000}) {
      if (w.top_k > vocab) continue;
      for (std::uint64_t seed = 1; seed <= 6; ++seed) {
        for (int mode = 0; mode < 3; ++mode) {
          if (mode == 2 && w.is_greedy()) continue;
          check_chain<TestType>(w, vocab, seed, mode);
          ++total;
        }
      }
    }
  }
  CHECK(total > 500);
}

TEST_CASE("a chain step from logits over a large vocabulary decides as the materialised rows do",
          "[core][warp][stats][chain]") {
  // Rows of 8192 entries or more take the sampled nucleus gate; the bonus token of a cut row is
  // drawn from the warp's candidates.
  // The sanitizer build checks memory on the smaller vocabulary only (the same paths, 1/13 of the
  // work).
#if defined(SPECDEC_SANITIZED_BUILD)
  const std::vector<std::int64_t> vocabs = {10000};
#else
  const std::vector<std::int64_t> vocabs = {10000, 128256};
#endif
  int total = 0;
  for (const Warp& w : kWarps) {
    if (w.is_greedy()) continue;
    for (const std::int64_t vocab : vocabs) {
      for (std::uint64_t seed = 1; seed <= 2; ++seed) {
        for (int mode = 0; mode < 3; ++mode) {
          check_chain<float>(w, vocab, seed, mode);
          ++total;
        }
      }
    }
  }
  CHECK(total == 60 * static_cast<int>(vocabs.size()));
}

TEST_CASE("a token drawn from a cut row's candidates is the one sample_row draws from the row",
          "[core][warp][stats][sampling]") {
  toy::ToyRandom rng(5);
  int compared = 0;
  for (const std::int64_t n : {1, 5, 8, 1000, 1024, 1031, 4096, 20000}) {
    for (const double density : {0.0, 0.01, 0.3, 1.0}) {
      std::vector<float> row(static_cast<std::size_t>(n), 0.0f);
      std::vector<std::int32_t> ids;
      std::vector<float> values;
      for (std::int64_t i = 0; i < n; ++i) {
        if (!(rng.uniform() < density)) continue;
        // Unnormalised weights over a wide range, with ties, and some kept zeros.
        float v = static_cast<float>(std::exp(6.0 * rng.uniform()) - 1.0);
        if (rng.uniform() < 0.2) v = 2.0f;
        if (rng.uniform() < 0.05) v = 0.0f;
        row[static_cast<std::size_t>(i)] = v;
        ids.push_back(static_cast<std::int32_t>(i));
        values.push_back(v);
      }
      const auto m = static_cast<std::int64_t>(ids.size());
      std::vector<float> us = {1e-7f, 0.5f, 1.0f - 0x1p-24f};
      for (int k = 0; k < 200; ++k) us.push_back(static_cast<float>(rng.uniform()));
      for (const float u : us) {
        CHECK(detail::SparseRow{ids.data(), values.data(), m, n}.sample(u) ==
              detail::sample_row(row.data(), n, u));
        ++compared;
      }
    }
  }
  CHECK(compared == 8 * 4 * 203);
}

TEST_CASE("the selective gather keeps the entries the plain gather keeps", "[core][warp][stats]") {
  toy::ToyRandom rng(11);
  int compared = 0;
  for (const std::int64_t n : {0, 1, 63, 64, 65, 1000, 4099}) {
    // Dense words take the loop past four entries in 64; sparse ones the branch-free part.
    for (const double kept : {0.0, 0.005, 0.05, 0.5, 1.0}) {
      std::vector<float> row(static_cast<std::size_t>(n));
      for (auto& x : row) x = rng.uniform() < kept ? 1.0f + static_cast<float>(rng.uniform()) : -1.0f;
      if (n > 3) row[2] = -INFINITY;
      std::vector<std::int32_t> ids(static_cast<std::size_t>(n) + 16), want_ids = ids;
      std::vector<float> values(static_cast<std::size_t>(n) + 16), want_values = values;
      const auto m = detail::gather_at_least<true>(row.data(), n, 1.0f, ids.data(), values.data());
      const auto want =
          detail::gather_at_least<false>(row.data(), n, 1.0f, want_ids.data(), want_values.data());
      REQUIRE(m == want);
      for (std::int64_t j = 0; j < m; ++j) {
        CHECK(ids[static_cast<std::size_t>(j)] == want_ids[static_cast<std::size_t>(j)]);
        CHECK(values[static_cast<std::size_t>(j)] == want_values[static_cast<std::size_t>(j)]);
      }
      ++compared;
    }
  }
  CHECK(compared == 35);
}

namespace {

// Entries to bound in a row: the largest few, some at random, and those around the nucleus cut.
std::vector<std::int64_t> probe_entries(const std::vector<float>& row, const detail::WarpStats& s,
                                        toy::ToyRandom& rng) {
  const auto n = static_cast<std::int64_t>(row.size());
  std::vector<std::int64_t> order(row.size());
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    const float x = row[static_cast<std::size_t>(a)], y = row[static_cast<std::size_t>(b)];
    return x > y || (x == y && a < b);
  });
  std::vector<std::int64_t> probes(order.begin(), order.begin() + std::min<std::int64_t>(n, 8));
  const auto cut = std::find(order.begin(), order.end(), s.top_p_last) - order.begin();
  for (std::int64_t k = std::max<std::int64_t>(0, cut - 6); k < std::min(n, cut + 6); ++k) {
    probes.push_back(order[static_cast<std::size_t>(k)]);
  }
  for (int k = 0; k < 16; ++k) probes.push_back(static_cast<std::int64_t>(rng.uniform() * static_cast<double>(n)));
  return probes;
}

}  // namespace

TEST_CASE("bounds from one rough read of the row hold the warped probability of the exact row",
          "[core][warp][stats]") {
  // The chain step from logits accepts from a rough read of each row when the acceptance holds
  // for every probability the bounds allow: each bound that claims an entry (for the nucleus, with
  // top-p) must hold the probability the exact statistics give it.
  toy::ToyRandom rng(21);
  int claimed = 0, checked = 0;
  for (const std::int64_t n : {100, 3000, 40000}) {
    for (const double scale : {1.0, 3.0, 8.0}) {
      for (const bool ties : {false, true}) {
        std::vector<float> logits(static_cast<std::size_t>(n));
        for (auto& x : logits) {
          x = static_cast<float>(scale * rng.normal());
          if (ties) x = std::round(x * 4.0f) / 4.0f;
        }
        logits[1] = -INFINITY;
        for (const float temperature : {0.05f, 0.5f, 1.0f, 1.7f}) {
          for (const float top_p : {0.3f, 0.9f, 0.95f, 0.999f, 1.0f}) {
            const Warp w{.temperature = temperature, .top_p = top_p};
            REQUIRE(detail::roughly_bounded(w, n));
            std::vector<std::int32_t> scratch(detail::warp_scratch_words(n));
            const auto ws = detail::warp_scratch(scratch.data(), n);
            bool invalid = true;
            const auto stats = detail::warp_stats(w, logits.data(), n, ws, invalid);
            REQUIRE_FALSE(invalid);
            std::vector<detail::TileSum> tiles(static_cast<std::size_t>(detail::tile_count(n)));
            for (const std::int64_t x : probe_entries(logits, stats, rng)) {
              const float logit = logits[static_cast<std::size_t>(x)];
              const auto row = detail::rough_row(w, logits.data(), n, logit, tiles.data());
              REQUIRE_FALSE(row.invalid);
              REQUIRE(row.max == stats.max);
              // The rough sum is within kRoughSum of the exact one (1 / inv_sum, to its rounding).
              CHECK(std::abs(row.sum * static_cast<double>(stats.inv_sum) - 1.0) <
                    detail::kRoughSum / 4);
              const auto bounds = detail::warped_probability_bounds(row, top_p, logit);
              const float p = detail::warped_probability(stats, logit, x);
              ++checked;
              if (!(bounds.lo > 0.0f)) continue;
              ++claimed;
              CAPTURE(n, scale, ties, temperature, top_p, x, bounds.lo, p, bounds.hi);
              CHECK(p > 0.0f);
              CHECK(bounds.lo <= p);
              CHECK(p <= bounds.hi);
            }
          }
        }
      }
    }
  }
  // Most entries of the nucleus are claimed, so the bounds are put to the test.
  CHECK(checked > 9000);
  CHECK(claimed > checked / 4);
}

TEST_CASE("the exponentials are accurate over the whole range of softmax exponents",
          "[core][warp][stats]") {
  // exp_flush defines every softmax term: within 2e-7 of e^x wherever the result is normal, and
  // exactly 0 from -88 down (exp_in_range, the same without the clamp, already at -88). rough_exp2
  // bounds sums only: within 1.2e-4 of exp_flush's term (plus 2^-125) for the same difference of
  // logits. Every 4099th float of [-100, 0] (about 270,000 of them).
  double worst_exact = 0.0, worst_rough = 0.0;
  int underflows = 0;
  for (std::uint32_t bits = 0x80000000u; bits <= 0xc2c80000u; bits += 4099) {
    const float d = std::bit_cast<float>(bits);
    const float exact = detail::exp_flush(d);
    const double reference = std::exp(static_cast<double>(d));
    if (d <= -88.0f) {
      underflows += exact == 0.0f ? 1 : 0;
      continue;
    }
    if (reference >= 0x1p-126) {
      worst_exact = std::max(worst_exact, std::abs(exact - reference) / reference);
    }
    for (const float inv_t : {1.0f, 1.25f, 0.37f, 20.0f}) {
      const float term = detail::exp_flush(detail::scaled_exponent(d, 0.0f, inv_t));
      // The rough pass clamps the difference at the floor where the tile's range reaches it.
      const float scale = inv_t * 1.44269504088896341f, floor = -126.0f / scale;
      const float rough = detail::rough_exp2(d > floor ? d : floor, scale);
      REQUIRE(rough >= 0.0f);
      const double excess = std::abs(static_cast<double>(rough) - term) - 0x1p-125;
      if (excess > 0.0) worst_rough = std::max(worst_rough, excess / term);
    }
  }
  CAPTURE(worst_exact, worst_rough);
  CHECK(worst_exact < 2e-7);
  CHECK(worst_rough < 1.2e-4);
  CHECK(underflows > 0);
  CHECK(detail::exp_flush(0.0f) == 1.0f);
  CHECK(detail::exp_flush(-INFINITY) == 0.0f);
  CHECK(detail::exp_in_range(-88.0f) == 0.0f);
}

TEST_CASE("exp_flush is nondecreasing within the margin that lets a pass skip a cut tile",
          "[core][warp][stats]") {
  // cuts_all_up_to bounds an entry by a larger logit's term times kMonotoneMargin; over every
  // float of [-88, 0] exp_flush never falls below an earlier (smaller) argument's term by more
  // than 1 + 2^-23.6, and falls at all only in [-1/4, -1/64] (2927 one-ulp steps back, 2695 of
  // them in [-1/4, -1/8]). Here: every float of [-1/4, -1/8], and every 257th of [-88, 0].
  const auto worst_drop = [](float from, float to, std::uint32_t stride) {
    double worst = 1.0, running = 0.0;
    for (std::uint32_t b = std::bit_cast<std::uint32_t>(from); b > 0x80000000u; b -= stride) {
      const float x = std::bit_cast<float>(b);
      if (x > to) break;
      const double e = detail::exp_flush(x);
      if (e > 0.0 && running > 0.0) worst = std::max(worst, running / e);
      running = std::max(running, e);
      if (b < 0x80000000u + stride) break;
    }
    return worst;
  };
  const double steps_back = worst_drop(-0.25f, -0.125f, 1);
  CHECK(steps_back > 1.0);  // they are there to be bounded
  const double worst = std::max(steps_back, worst_drop(-88.0f, 0.0f, 257));
  CAPTURE(worst);
  CHECK(worst < 1.0 + 0x1p-19);
  CHECK(worst < static_cast<double>(detail::kMonotoneMargin));
  // A tile whose largest logit's probability is under the top-p cut is cut whole; one at the
  // row maximum is not.
  detail::WarpStats s = detail::WarpStats::uncut();
  s.max = 3.0f;
  s.inv_sum = 0.25f;
  s.top_p_value = 0.1f;
  s.top_p_last = 7;
  CHECK(detail::cuts_all_up_to(s, 3.0f + std::log(0.3f)));
  CHECK_FALSE(detail::cuts_all_up_to(s, 3.0f + std::log(0.5f)));
  CHECK_FALSE(detail::cuts_all_up_to(s, 3.0f));
  s.top_p_last = -1;  // no cut: nothing is skipped
  CHECK_FALSE(detail::cuts_all_up_to(s, -50.0f));
}

TEST_CASE("the tile rule over a row's candidates has the bits of the dense row's tile rule",
          "[core][warp][stats]") {
  // sparse_row_sum (a top-k row's softmax sum, on both backends) against tile_pass over the row
  // whose other entries are -inf: the same max and sum, bit for bit, with candidates alone in
  // their tile, sharing a lane, filling a tile, and at the row's end.
  toy::ToyRandom rng(31);
  int compared = 0;
  for (const std::int64_t n : {1, 17, 1024, 3000, 40000}) {
    for (const double density : {0.001, 0.02, 0.3, 1.0}) {
      std::vector<float> logits(static_cast<std::size_t>(n));
      for (auto& x : logits) x = static_cast<float>(4.0 * rng.normal());
      std::vector<std::int32_t> ids;
      std::vector<float> dense(logits.size(), -INFINITY);
      for (std::int64_t i = 0; i < n; ++i) {
        if (!(rng.uniform() < density) && !(i == n - 1)) continue;
        ids.push_back(static_cast<std::int32_t>(i));
        dense[static_cast<std::size_t>(i)] = logits[static_cast<std::size_t>(i)];
      }
      for (const float inv_t : {1.0f, 1.25f, 8.0f}) {
        std::vector<detail::TileSum> tiles(static_cast<std::size_t>(detail::tile_count(n)));
        const auto logit = [&](std::int64_t j) {
          return logits[static_cast<std::size_t>(ids[static_cast<std::size_t>(j)])];
        };
        const auto sparse = detail::sparse_row_sum(
            ids.data(), static_cast<std::int64_t>(ids.size()), inv_t, tiles.data(), logit);
        REQUIRE(detail::tile_pass(dense.data(), n, inv_t, tiles.data()));
        const auto full = detail::combine_tiles(tiles.data(), detail::tile_count(n), inv_t);
        CAPTURE(n, density, inv_t, ids.size());
        CHECK(bits(sparse.max) == bits(full.max));
        CHECK(std::bit_cast<std::uint64_t>(sparse.sum) == std::bit_cast<std::uint64_t>(full.sum));
        ++compared;
      }
    }
  }
  CHECK(compared == 5 * 4 * 3);
}

TEST_CASE("the masked rough pass sums what the rough pass over the masked row sums",
          "[core][warp][stats]") {
  // masked_rough_tile_pass against rough_tile_pass over the row written with -inf outside the
  // mask. Tiles the mask forbids whole (not read), allows whole (summed in place), and mixed
  // tiles with NaN behind the mask or a logit far above the kept ones (both written to the
  // buffer first) give the same bits; mixed tiles summed through the mask in place give sums
  // within twice the rough terms' error of the pass over the masked row, with and without the
  // mass above a threshold, and a row's short last tile.
  toy::ToyRandom rng(37);
  int compared = 0;
  for (const std::int64_t n : {1000, 5000, 40000}) {
    const std::int64_t words = (n + 31) / 32;
    std::vector<float> logits(static_cast<std::size_t>(n));
    for (auto& x : logits) x = static_cast<float>(4.0 * rng.normal());
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<std::uint32_t> mask(static_cast<std::size_t>(words));
      for (std::int64_t k = 0; k < words; ++k) {
        const std::int64_t tile = 32 * k / detail::kSumTile;
        // Pattern 0: tiles alternately forbidden, allowed and mixed; 1: random bits; 2: all
        // forbidden but one mixed tile.
        const std::uint32_t random = static_cast<std::uint32_t>(rng.uniform() * 4294967296.0);
        mask[static_cast<std::size_t>(k)] = pattern == 1   ? random
                                            : pattern == 2 ? (tile == 1 ? random : 0u)
                                            : tile % 3 == 0 ? 0u
                                            : tile % 3 == 1 ? ~0u
                                                            : random;
      }
      for (const float behind : {NAN, 300.0f, 0.0f}) {  // 0: the logits themselves stay there
        std::vector<float> row = logits, masked(logits.size());
        for (std::int64_t i = 0; i < n; ++i) {
          const bool kept = ((mask[static_cast<std::size_t>(i / 32)] >> (i % 32)) & 1u) != 0u;
          if (!kept && behind != 0.0f) row[static_cast<std::size_t>(i)] = behind;
        }
        detail::write_masked_row(row.data(), mask.data(), n, masked.data());
        const bool same_bits = behind != 0.0f;
        for (const float inv_t : {1.0f, 8.0f}) {
          const auto count = detail::tile_count(n);
          const auto tiles = static_cast<std::size_t>(count);
          std::vector<detail::TileSum> a(tiles), b(tiles), c(tiles), d(tiles);
          const bool valid =
              detail::masked_rough_tile_pass(row.data(), mask.data(), n, inv_t, a.data());
          CHECK(valid);
          REQUIRE(detail::rough_tile_pass(masked.data(), n, inv_t, b.data()));
          detail::masked_rough_tile_pass<true>(row.data(), mask.data(), n, inv_t, c.data(), 0.5f);
          detail::rough_tile_pass<true>(masked.data(), n, inv_t, d.data(), 0.5f);
          CAPTURE(n, pattern, behind, inv_t);
          for (std::size_t t = 0; t < tiles; ++t) {
            const std::int64_t first = static_cast<std::int64_t>(t) * detail::kSumTile / 32;
            const std::int64_t last = std::min<std::int64_t>(words, first + detail::kSumTile / 32);
            std::uint32_t any = 0, all = ~0u;
            for (std::int64_t k = first; k < last; ++k) {
              any |= mask[static_cast<std::size_t>(k)];
              all &= mask[static_cast<std::size_t>(k)];
            }
            if (same_bits || any == 0u || all == ~0u) {
              CHECK(bits(a[t].max) == bits(b[t].max));
              CHECK(bits(a[t].sum) == bits(b[t].sum));
              CHECK(bits(c[t].above) == bits(d[t].above));
            } else {  // its sums relative to the tile's largest logit, kept or not
              CHECK(a[t].max >= b[t].max);
              const double scale = std::exp(static_cast<double>(a[t].max - b[t].max) * inv_t);
              CHECK(a[t].sum * scale == Approx(b[t].sum).epsilon(2.5e-4));
              CHECK(c[t].above * scale == Approx(d[t].above).epsilon(2.5e-4).margin(1e-30));
            }
          }
          const auto ra = detail::combine_tiles(a.data(), count, inv_t);
          const auto rb = detail::combine_tiles(b.data(), count, inv_t);
          if (rb.max > -INFINITY) {
            const double scale = std::exp(static_cast<double>(ra.max - rb.max) * inv_t);
            CHECK(ra.sum * scale == Approx(rb.sum).epsilon(2.5e-4));
          } else {  // a row the mask forbids whole
            CHECK(bits(ra.max) == bits(rb.max));
          }
          ++compared;
        }
      }
    }
  }
  CHECK(compared == 3 * 3 * 3 * 2);
}

TEST_CASE("top-k of a long row keeps the k largest, ties to the lowest id", "[core][warp][stats]") {
  // Long rows are gathered behind a gate from a sample of the row; the cut must be the one an
  // ordering of the whole row gives, with ties at the k-th value (a coarse grid makes many).
  toy::ToyRandom rng(17);
  for (const std::int64_t n : {20000, 128256}) {
    for (const bool ties : {false, true}) {
      std::vector<float> logits(static_cast<std::size_t>(n));
      for (auto& x : logits) {
        x = static_cast<float>(3.0 * rng.normal());
        if (ties) x = std::round(x);
      }
      std::vector<std::int32_t> order(logits.size());
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
      std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        const float x = logits[static_cast<std::size_t>(a)], y = logits[static_cast<std::size_t>(b)];
        return x > y || (x == y && a < b);
      });
      for (const std::int32_t k : {1, 7, 50, 78}) {
        const Warp w{.temperature = 0.9f, .top_k = k};
        std::vector<std::int32_t> scratch(detail::warp_scratch_words(n));
        bool invalid = true;
        const auto stats = detail::warp_stats(w, logits.data(), n,
                                              detail::warp_scratch(scratch.data(), n), invalid);
        REQUIRE_FALSE(invalid);
        CAPTURE(n, ties, k);
        CHECK(stats.top_k_last == order[static_cast<std::size_t>(k - 1)]);
        CHECK(stats.top_k_value == logits[static_cast<std::size_t>(order[static_cast<std::size_t>(k - 1)])]);
      }
    }
  }
  // One read both gathers and checks: a NaN or +inf anywhere (here off the sample) is found.
  for (const float bad : {NAN, INFINITY}) {
    std::vector<float> logits(128256, 0.5f);
    logits[77777] = bad;
    for (const Warp& w : {Warp{.top_k = 5}, Warp{.temperature = 0.7f, .top_p = 0.9f}, Warp{}}) {
      std::vector<std::int32_t> scratch(detail::warp_scratch_words(128256));
      bool invalid = false;
      detail::warp_stats(w, logits.data(), 128256, detail::warp_scratch(scratch.data(), 128256),
                         invalid);
      CHECK(invalid);
    }
  }
}

TEST_CASE("a token drawn from a row computed a block at a time is the one sample_row draws",
          "[core][warp][stats][sampling]") {
  toy::ToyRandom rng(8);
  int compared = 0;
  for (const std::int64_t n : {1, 1000, 1024, 1031, 4096, 20000}) {
    for (const double density : {0.0, 0.001, 0.3, 1.0}) {
      std::vector<float> row(static_cast<std::size_t>(n), 0.0f);
      for (auto& v : row) {
        if (rng.uniform() < density) v = static_cast<float>(std::exp(8.0 * rng.uniform()) - 1.0);
      }
      int fills = 0;
      const auto fill = [&](std::int64_t b, std::int64_t e, float* out) {
        ++fills;
        std::copy(row.begin() + b, row.begin() + e, out);
      };
      std::vector<float> buffer(4096), sums(static_cast<std::size_t>(n / 1024 + 1));
      const detail::FilledRow filled{fill, n, buffer.data(), sums.data()};
      const double total = filled.sum();
      CHECK(total == detail::blocked_sum([&](std::int64_t i) { return row[static_cast<std::size_t>(i)]; }, 0, n));
      std::vector<float> us = {1e-7f, 0.5f, 1.0f - 0x1p-24f};
      for (int k = 0; k < 100; ++k) us.push_back(static_cast<float>(rng.uniform()));
      for (const float u : us) {
        fills = 0;
        CHECK(filled.sample(u, total) == detail::sample_row(row.data(), n, u));
        // The block holding the threshold is computed again (and, when rounding leaves its scan
        // short, the next one or the last positive one).
        CHECK(fills <= 2);
        ++compared;
      }
    }
  }
  CHECK(compared == 6 * 4 * 103);
}

namespace {

// Rows whose probabilities are exact binary fractions, so every prefix mass is exact and top_p
// can be set to one: the nucleus is the shortest prefix reaching it (a prefix exactly at top_p
// is the nucleus; one entry more is not). Softmax terms 2^-k from logits z with exp_flush(z) ==
// 2^-k exactly: the statistics path's own exponential, searched near -k ln 2.
float logit_of_power(int k) {
  const float target = std::ldexp(1.0f, -k);
  float z = static_cast<float>(-k * std::numbers::ln2);
  for (int step = 0; step < 1000 && detail::exp_flush(z) != target; ++step) {
    z = std::nextafter(z, detail::exp_flush(z) > target ? -INFINITY : 0.0f);
  }
  return z;
}

// A row of n >= 8207 entries, the rest -inf (probability 0): a chain of distinct terms 1, 1/2, ..., 2^-10 and
// 8196 light entries of 2^-12, so the terms sum to exactly 4, scattered over the row at random
// ids. The row's probabilities are the terms / 4.
struct ExactRow {
  std::vector<float> logits;         // temperature 1: softmax(logits) is the row
  std::vector<float> probabilities;  // the same row written as probabilities
  std::vector<std::int64_t> chain;   // ids of the chain, by decreasing probability
  std::vector<std::int64_t> lights;  // ids of the light entries, ascending
};

ExactRow exact_row(std::int64_t n, std::uint64_t seed) {
  ExactRow row;
  row.logits.assign(static_cast<std::size_t>(n), -INFINITY);
  row.probabilities.assign(static_cast<std::size_t>(n), 0.0f);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = i;
  toy::ToyRandom rng(seed);
  for (std::size_t i = ids.size() - 1; i > 0; --i) {  // Fisher-Yates
    const auto j = static_cast<std::size_t>(rng.uniform_double() * static_cast<double>(i + 1));
    std::swap(ids[i], ids[std::min(j, i)]);
  }
  float logit_of[13];
  for (int k = 0; k <= 12; ++k) logit_of[k] = logit_of_power(k);
  const auto place = [&](std::int64_t id, int k) {
    row.logits[static_cast<std::size_t>(id)] = logit_of[k];
    row.probabilities[static_cast<std::size_t>(id)] = std::ldexp(1.0f, -k - 2);
  };
  for (int k = 0; k <= 10; ++k) {
    row.chain.push_back(ids[static_cast<std::size_t>(k)]);
    place(ids[static_cast<std::size_t>(k)], k);
  }
  for (std::size_t j = 11; j < 11 + 8196; ++j) {
    row.lights.push_back(ids[j]);
    place(ids[j], 12);
  }
  std::sort(row.lights.begin(), row.lights.end());
  return row;
}

// The ids a warped row keeps.
std::vector<std::int64_t> kept_ids(const std::vector<float>& warped) {
  std::vector<std::int64_t> kept;
  for (std::size_t i = 0; i < warped.size(); ++i) {
    if (warped[i] > 0.0f) kept.push_back(static_cast<std::int64_t>(i));
  }
  return kept;
}

}  // namespace

TEST_CASE("top-p at a prefix's exact mass keeps that prefix and no more, on both warp paths",
          "[core][warp][stats][nucleus]") {
  const std::int64_t n = 20000;  // 20 tiles of the sum
  const ExactRow row = exact_row(n, 25);
  for (int k = 0; k <= 12; k += 12) {
    INFO("exp_flush(logit_of_power(" << k << ")) == 2^-" << k);
    REQUIRE(detail::exp_flush(logit_of_power(k)) == std::ldexp(1.0f, -k));
  }
  // Prefixes: chain entries only (1 to 11 of them), and the whole chain plus some lights (which
  // tie, so they enter by id).
  struct Prefix {
    int chain;
    int lights;
  };
  const Prefix prefixes[] = {{1, 0}, {3, 0}, {7, 0}, {11, 0}, {11, 1}, {11, 100}, {11, 4000}};
  Workspace ws;
  for (const Prefix& prefix : prefixes) {
    double mass = 0.0;
    std::vector<std::int64_t> expected;
    for (int j = 0; j < prefix.chain; ++j) {
      expected.push_back(row.chain[static_cast<std::size_t>(j)]);
      mass += std::ldexp(1.0, -j - 2);
    }
    for (int j = 0; j < prefix.lights; ++j) {
      expected.push_back(row.lights[static_cast<std::size_t>(j)]);
      mass += std::ldexp(1.0, -14);
    }
    std::sort(expected.begin(), expected.end());
    const auto top_p = static_cast<float>(mass);
    REQUIRE(static_cast<double>(top_p) == mass);  // the prefix's mass is exactly top_p
    const Warp w{.top_p = top_p};
    CAPTURE(prefix.chain, prefix.lights, top_p);
    std::vector<float> from_logits(static_cast<std::size_t>(n)), from_probabilities(from_logits);
    warp_logits<float>(w, row.logits, from_logits, ws);
    warp_probabilities<float>(w, row.probabilities, from_probabilities, ws);
    CHECK(kept_ids(from_logits) == expected);
    CHECK(kept_ids(from_probabilities) == expected);
    // The kept mass is top_p itself: every kept entry is p / top_p.
    const float inv = static_cast<float>(1.0 / mass);
    const std::int64_t first = expected.front();
    CHECK(from_logits[static_cast<std::size_t>(first)] ==
          row.probabilities[static_cast<std::size_t>(first)] * inv);
    CHECK(from_probabilities[static_cast<std::size_t>(first)] ==
          row.probabilities[static_cast<std::size_t>(first)] * inv);
  }
}

TEST_CASE("the one nucleus selection cuts candidates and positions at a prefix's exact mass",
          "[core][warp][stats][nucleus]") {
  // select_nucleus directly, over the row's positive entries as (ids, values) and over the dense
  // row as positions: both give the same cut, the last entry of the prefix.
  const ExactRow row = exact_row(12000, 26);
  std::vector<std::int32_t> ids;
  std::vector<float> values;
  for (std::size_t i = 0; i < row.probabilities.size(); ++i) {
    if (row.probabilities[i] > 0.0f) {
      ids.push_back(static_cast<std::int32_t>(i));
      values.push_back(row.probabilities[i]);
    }
  }
  const auto m = static_cast<std::int64_t>(ids.size());
  const auto n = static_cast<std::int64_t>(row.probabilities.size());
  std::vector<std::int32_t> work_ids(static_cast<std::size_t>(n + detail::kScratchSlack));
  std::vector<float> work_values(work_ids.size());
  for (const int lights : {0, 1, 37, 4096}) {
    // The whole chain, (2 - 2^-10) / 4, and the first `lights` lights.
    const float top_p = 0.5f - std::ldexp(1.0f, -12) + static_cast<float>(lights) * std::ldexp(1.0f, -14);
    CAPTURE(lights, top_p);
    const std::int64_t last =
        lights == 0 ? row.chain.back() : row.lights[static_cast<std::size_t>(lights - 1)];
    detail::RowCut on_ids, on_positions;
    double mass_on_ids = 0.0, mass_on_positions = 0.0;
    REQUIRE(detail::select_nucleus(ids.data(), values.data(), m, top_p, work_ids.data(),
                                   work_values.data(), on_ids, mass_on_ids));
    REQUIRE(detail::select_nucleus(nullptr, row.probabilities.data(), n, top_p, work_ids.data(),
                                   work_values.data(), on_positions, mass_on_positions));
    CHECK(mass_on_ids == static_cast<double>(top_p));
    CHECK(mass_on_positions == static_cast<double>(top_p));
    CHECK(on_ids.last == last);
    CHECK(on_positions.last == last);
    CHECK(on_ids.value == row.probabilities[static_cast<std::size_t>(last)]);
    CHECK(on_positions.value == on_ids.value);
  }
}
