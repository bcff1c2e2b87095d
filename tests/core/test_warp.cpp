// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "specdec/core/warp.hpp"
#include "specdec/toy/distributions.hpp"
#include "support/warp_edge_cases.hpp"

using namespace specdec;
using Catch::Detail::Approx;

namespace {
std::vector<float> warp(const Warp& w, const std::vector<float>& logits) {
  Workspace ws;
  std::vector<float> out(logits.size());
  warp_logits<float>(w, logits, out, ws);
  return out;
}
std::vector<float> logs(const std::vector<float>& p) {
  std::vector<float> l;
  for (float x : p) l.push_back(std::log(x));
  return l;
}
}  // namespace

TEST_CASE("temperature 0 is greedy with ties to the lowest id", "[core][warp]") {
  CHECK(warp({.temperature = 0.0f}, {1.0f, 3.0f, 3.0f, 2.0f}) ==
        std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f});
}

TEST_CASE("temperature divides the logits", "[core][warp]") {
  const auto out = warp({.temperature = 2.0f}, {0.0f, 2.0f});
  CHECK(out[1] == Approx(std::exp(1.0) / (1.0 + std::exp(1.0))));
}

TEST_CASE("top-k keeps exactly k tokens with ties to the lowest id", "[core][warp]") {
  const auto out = warp({.top_k = 2}, {1.0f, 3.0f, 2.0f, 3.0f, 0.0f});
  CHECK(out[0] == 0.0f);
  CHECK(out[2] == 0.0f);
  CHECK(out[4] == 0.0f);
  CHECK(out[1] == Approx(0.5f));
  CHECK(out[3] == Approx(0.5f));
  const auto ties = warp({.top_k = 1}, {2.0f, 2.0f, 2.0f});
  CHECK(ties == std::vector<float>{1.0f, 0.0f, 0.0f});
}

TEST_CASE("top-p keeps the smallest set reaching the mass", "[core][warp]") {
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f};
  // Sorted: 0.4 (1), 0.3 (3), 0.2 (2), 0.1 (0). P = 0.7 is reached by {1, 3}.
  auto out = warp({.top_p = 0.7f}, logs(p));
  CHECK(out[1] == Approx(0.4f / 0.7f));
  CHECK(out[3] == Approx(0.3f / 0.7f));
  CHECK(out[0] == 0.0f);
  CHECK(out[2] == 0.0f);
  // Just above 0.7 needs the third token too.
  out = warp({.top_p = 0.75f}, logs(p));
  CHECK(out[2] == Approx(0.2f / 0.9f));
  CHECK(out[0] == 0.0f);
  // A tiny P keeps the single most likely token.
  out = warp({.top_p = 0.01f}, logs(p));
  CHECK(out == std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f});
}

TEST_CASE("top-p over a large vocabulary selects without sorting everything", "[core][warp]") {
  // Dirichlet rows at V = 5000 need many growth rounds of the selected prefix.
  const auto pair = toy::make_categorical_pair(5000, 3, 0.3);
  Workspace ws;
  std::vector<float> out(5000);
  warp_probabilities<float>({.top_p = 0.9f}, pair.target, out, ws);
  // Reference: full sort.
  std::vector<int> order(5000);
  for (int i = 0; i < 5000; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return pair.target[a] > pair.target[b] || (pair.target[a] == pair.target[b] && a < b);
  });
  double mass = 0.0;
  std::size_t cut = 0;
  while (mass < 0.9) mass += pair.target[static_cast<std::size_t>(order[cut++])];
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto t = static_cast<std::size_t>(order[i]);
    if (i < cut) {
      CHECK(out[t] == Approx(pair.target[t] / mass).epsilon(1e-4));
    } else {
      CHECK(out[t] == 0.0f);
    }
  }
}

TEST_CASE("min-p drops tokens below a fraction of the maximum", "[core][warp]") {
  const std::vector<float> p = {0.5f, 0.3f, 0.15f, 0.05f};
  const auto out = warp({.min_p = 0.2f}, logs(p));  // threshold 0.1
  CHECK(out[3] == 0.0f);
  CHECK(out[0] == Approx(0.5f / 0.95f));
}

TEST_CASE("warps compose in the documented order", "[core][warp]") {
  // top-k = 3 first: {0.4, 0.3, 0.2} renormalised to {4/9, 3/9, 2/9}; then top-p 0.7 keeps {4/9,
  // 3/9}.
  const std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f};
  const auto out = warp({.top_k = 3, .top_p = 0.7f}, logs(p));
  CHECK(out[1] == Approx(4.0f / 7.0f));
  CHECK(out[3] == Approx(3.0f / 7.0f));
  CHECK(out[2] == 0.0f);
}

TEST_CASE("warping probabilities equals warping their logs", "[core][warp]") {
  const auto pair = toy::make_categorical_pair(50, 9);
  Workspace ws;
  for (const Warp w : {Warp{}, Warp{.temperature = 0.7f}, Warp{.top_k = 5},
                       Warp{.temperature = 1.3f, .top_p = 0.8f}, Warp{.min_p = 0.1f}}) {
    std::vector<float> a(50), b(50);
    warp_probabilities<float>(w, pair.target, a, ws);
    warp_logits<float>(w, logs(pair.target), b, ws);
    for (int i = 0; i < 50; ++i) CHECK(a[i] == Approx(b[i]).margin(1e-6));
  }
}

TEST_CASE("warp rejects invalid parameters naming the field", "[core][warp]") {
  const std::vector<float> logits = {0.0f, 1.0f};
  std::vector<float> out(2);
  Workspace ws;
  CHECK_THROWS_WITH(warp_logits<float>({.temperature = -1.0f}, logits, out, ws),
                    Catch::Contains("temperature"));
  CHECK_THROWS_WITH(warp_logits<float>({.top_k = 3}, logits, out, ws), Catch::Contains("top_k"));
  CHECK_THROWS_WITH(warp_logits<float>({.top_p = 0.0f}, logits, out, ws), Catch::Contains("top_p"));
  CHECK_THROWS_WITH(warp_logits<float>({.min_p = 1.5f}, logits, out, ws), Catch::Contains("min_p"));
  const std::vector<float> nan = {0.0f, std::nanf("")};
  CHECK_THROWS_WITH(warp_logits<float>({}, nan, out, ws), Catch::Contains("logits[1]"));
  std::vector<float> short_out(1);
  CHECK_THROWS_WITH(warp_logits<float>({}, logits, short_out, ws), Catch::Contains("warped"));
}

TEST_CASE("a reused workspace stops allocating after the first warp", "[core][warp]") {
  const auto pair = toy::make_categorical_pair(1000, 4);
  Workspace ws;
  std::vector<float> out(1000);
  warp_probabilities<float>({.top_p = 0.5f}, pair.target, out, ws);
  const auto allocations = ws.allocations();
  for (int i = 0; i < 10; ++i) warp_probabilities<float>({.top_p = 0.5f}, pair.draft, out, ws);
  CHECK(ws.allocations() == allocations);
}

TEST_CASE("tokens cut by top-k get probability exactly zero", "[core][warp]") {
  const auto out = warp({.top_k = 1}, {-200.0f, 5.0f, -300.0f, 4.9f});
  CHECK(out == std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f});
}

TEST_CASE("top-k and top-p agree with a full sort on rows with many ties", "[core][warp]") {
  // Values drawn from a handful of levels: many exact ties inside one radix bucket.
  toy::ToyRandom rng(12);
  std::vector<float> logits(3000);
  for (auto& x : logits) x = static_cast<float>(rng.below(7)) * 0.5f - 1.0f;
  std::vector<int> order(logits.size());
  for (int i = 0; i < static_cast<int>(order.size()); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (const int k : {1, 17, 400, 2999}) {
    const auto out = warp({.top_k = k}, logits);
    for (std::size_t r = 0; r < order.size(); ++r) {
      CHECK((out[static_cast<std::size_t>(order[r])] > 0.0f) == (static_cast<int>(r) < k));
    }
  }
  std::vector<float> p(logits.size());
  softmax(logits, p);
  for (const float top_p : {0.05f, 0.5f, 0.93f}) {
    const auto out = warp({.top_p = top_p}, logits);
    double mass = 0.0;
    std::size_t cut = 0;
    while (mass < top_p) mass += p[static_cast<std::size_t>(order[cut++])];
    for (std::size_t r = 0; r < order.size(); ++r) {
      CHECK((out[static_cast<std::size_t>(order[r])] > 0.0f) == (r < cut));
    }
  }
}

TEST_CASE("top-k keeps exactly k tokens when -0 and +0 tie at the cut", "[core][warp]") {
  // -0 == +0: the two zeros are one value, so top-k 2 keeps 5 and the lowest-id zero only.
  const auto out = warp({.top_k = 2}, {-0.0f, 5.0f, 0.0f, -0.0f, -1.0f});
  CHECK(test::kept_ids(out.data(), 5) == std::vector<std::int64_t>{0, 1});
}

TEST_CASE("top-k and top-p keep the documented tokens on signed zeros, -inf, denormals and ties",
          "[core][warp]") {
  for (const auto& c : test::warp_edge_cases()) {
    CAPTURE(c.name);
    const auto out = warp(c.warp, c.logits);
    CHECK(test::kept_ids(out.data(), static_cast<std::int64_t>(out.size())) == c.kept);
  }
}

TEST_CASE("top-p on probabilities stops exactly at a boundary the mass reaches",
          "[core][warp][top_p]") {
  // Dyadic probabilities: every running sum is exact, so the nucleus is decided by the rule
  // (the smallest set whose mass reaches top_p, ties to the lowest id), not by rounding.
  const auto warp_probs = [](float top_p, const std::vector<float>& row) {
    Workspace ws;
    std::vector<float> out(row.size());
    warp_probabilities<float>({.top_p = top_p}, row, out, ws);
    return out;
  };
  const std::vector<float> small = {0.125f, 0.5f, 0.125f, 0.25f};
  CHECK(warp_probs(0.5f, small) == std::vector<float>{0.0f, 1.0f, 0.0f, 0.0f});
  auto out = warp_probs(0.75f, small);  // 0.5 + 0.25 reaches 0.75 exactly: two tokens
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == Approx(2.0 / 3.0));
  CHECK(out[2] == 0.0f);
  CHECK(out[3] == Approx(1.0 / 3.0));
  out = warp_probs(0.875f, small);  // one more 0.125: the tie goes to the lower id
  CHECK(out[0] == Approx(1.0 / 7.0));
  CHECK(out[2] == 0.0f);
  // The same boundary on a row long enough for the bucketed selection: 0.5, 0.25 and 4094
  // multiples of 2^-14 that add up to 0.25, so the row sums to exactly 1.
  std::vector<float> large(4096, 0x1p-14f);
  large[7] = 0.5f;
  large[100] = 0.25f;
  large[200] = 3 * 0x1p-14f;
  out = warp_probs(0.75f, large);
  CHECK(out[7] == Approx(2.0 / 3.0));
  CHECK(out[100] == Approx(1.0 / 3.0));
  CHECK(std::count(out.begin(), out.end(), 0.0f) == 4094);
  out = warp_probs(0.5f, large);
  CHECK(out[7] == 1.0f);
  CHECK(std::count(out.begin(), out.end(), 0.0f) == 4095);
}

TEST_CASE("top-p renormalises by the kept mass summed in double", "[core][warp][top_p]") {
  // Summed in float, the kept mass of ~200k small entries is off by ~1e-5 and so is the row.
  for (const std::int64_t vocab : {std::int64_t{50}, std::int64_t{200000}}) {
    const auto pair = toy::make_categorical_pair(vocab, 5, 1.0);
    Workspace ws;
    std::vector<float> out(static_cast<std::size_t>(vocab));
    warp_probabilities<float>({.top_p = 0.99f}, pair.target, out, ws);
    double total = 0.0;
    for (float v : out) total += v;
    INFO("V = " << vocab);
    CHECK(std::abs(total - 1.0) < 1e-6);
  }
}
