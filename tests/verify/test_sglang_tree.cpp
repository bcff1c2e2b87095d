// SPDX-License-Identifier: MIT
// SGLang's tree verification (verify/sglang_tree.hpp, backend/sglang_tree_batch.hpp): SGLang's
// published vectors, the law of the emitted tokens at thresholds (1, 1) by enumeration of the
// uniforms and by a chi-square test, the batch against the single sequence, and bad input.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "../support/stats.hpp"
#include "specdec/backend/cpu/sglang_tree_batch.hpp"
#include "specdec/verify/sglang_tree.hpp"

using namespace specdec;

namespace sglang_tree_tests {

// ---- SGLang's published case (its tree_speculative_sampling_target_only test): bs = 2, 6 slots,
// V = 20, target = softmax(logits / 0.01) with logits 1 except a 10 per row ------------------

constexpr std::int64_t kBatch = 2, kSlots = 6, kVocab = 20, kSteps = 4;
const std::vector<std::int64_t> kCandidates = {0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12};
const std::vector<std::int64_t> kIndex = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
const std::vector<std::int64_t> kNextToken = {1, 2, -1, 4, 5, -1, 4, 2, 3, -1, 5, -1};
const std::vector<std::int64_t> kNextSibling = {-1, 3, -1, -1, -1, -1, -1, -1, -1, -1, 1, -1};

/// The token of each (sequence, slot) whose logit is 10; every other row peaks at 18.
std::vector<std::int64_t> published_argmax() {
  std::vector<std::int64_t> best(kBatch * kSlots, 18);
  best[0 * kSlots + 0] = 3;
  best[0 * kSlots + 3] = 4;
  best[0 * kSlots + 4] = 5;
  best[1 * kSlots + 0] = 11;
  best[1 * kSlots + 4] = 12;
  return best;
}

std::vector<float> published_target() {
  std::vector<float> rows(kBatch * kSlots * kVocab);
  const auto best = published_argmax();
  for (std::int64_t r = 0; r < kBatch * kSlots; ++r) {
    std::vector<double> z(kVocab);
    double sum = 0.0;
    for (std::int64_t t = 0; t < kVocab; ++t) {
      z[t] = std::exp(((t == best[r] ? 10.0 : 1.0) - 10.0) / 0.01);
      sum += z[t];
    }
    for (std::int64_t t = 0; t < kVocab; ++t) rows[r * kVocab + t] = static_cast<float>(z[t] / sum);
  }
  return rows;
}

struct Published {
  float single, acc;
  std::vector<std::int32_t> predicts, accept_index, accept_num;
};

const std::vector<Published> kPublished = {
    {1.0f,
     1.0f,
     {3, -1, -1, 4, 5, 18, 11, -1, -1, -1, 12, 18},
     {0, 3, 4, 5, 6, 10, 11, -1},
     {3, 2}},
    {0.0f,
     0.0f,
     {1, 2, 18, -1, -1, -1, 11, -1, -1, -1, 12, 18},
     {0, 1, 2, -1, 6, 10, 11, -1},
     {2, 2}},
};

struct BatchOut {
  std::vector<std::int32_t> accept_index = std::vector<std::int32_t>(kBatch * kSteps);
  std::vector<Token> emitted = std::vector<Token>(kBatch * kSteps);
  std::vector<std::int32_t> accept_num = std::vector<std::int32_t>(kBatch);

  /// SGLang's predicts: emitted[b][j] written at accept_index[b][j].
  std::vector<std::int32_t> predicts() const {
    std::vector<std::int32_t> out(kBatch * kSlots, -1);
    for (std::size_t i = 0; i < accept_index.size(); ++i) {
      if (accept_index[i] >= 0) out[static_cast<std::size_t>(accept_index[i])] = emitted[i];
    }
    return out;
  }
};

sglang::TreeBatchArgs published_args(BatchOut& out) {
  return {.candidates = {kCandidates.data(), kBatch, kSlots},
          .retrive_index = {kIndex.data(), kBatch, kSlots},
          .retrive_next_token = {kNextToken.data(), kBatch, kSlots},
          .retrive_next_sibling = {kNextSibling.data(), kBatch, kSlots},
          .predicts_size = kBatch * kSlots,
          .accept_index = {out.accept_index.data(), kBatch, kSteps},
          .emitted = {out.emitted.data(), kBatch, kSteps},
          .accept_token_num = out.accept_num};
}

TEST_CASE("SGLang's published vectors, with its uniforms or specdec's streams",
          "[verify][sglang]") {
  const auto target = published_target();
  const std::vector<float> draft(target.size(), 0.0f);
  const std::vector<RandomStream> streams = {RandomStream(7, 0), RandomStream(7, 1)};
  for (const Published& expected : kPublished) {
    for (const float u : {0.05f, 0.5f, 0.95f}) {
      const std::vector<float> coins(kBatch * kSlots, u), finals(kBatch, 1.0f - u);
      for (const bool own_uniforms : {true, false}) {
        BatchOut out;
        sglang::TreeBatchArgs args = published_args(out);
        args.target_probs = {target.data(), kBatch * kSlots, kVocab};
        args.draft_probs = {draft.data(), kBatch * kSlots, kVocab};
        args.thresholds = {expected.single, expected.acc};
        if (own_uniforms) {
          args.uniform_samples = {coins.data(), kBatch, kSlots};
          args.uniform_samples_for_final_sampling = finals;
        } else {
          args.streams = streams;
        }
        Workspace ws;
        sglang::verify_tree_batch(backend::cpu, args, ws);
        INFO("thresholds " << expected.single << ", uniform " << u << ", own " << own_uniforms);
        CHECK(out.predicts() == expected.predicts);
        CHECK(out.accept_index == expected.accept_index);
        CHECK(out.accept_num == expected.accept_num);
      }
    }
  }
}

TEST_CASE("SGLang's published trees verified greedily give the (1, 1) vectors",
          "[verify][sglang]") {
  const auto argmax = published_argmax();
  BatchOut out;
  sglang::TreeBatchArgs args = published_args(out);
  args.target_predict = argmax;
  Workspace ws;
  sglang::verify_tree_batch(backend::cpu, args, ws);
  CHECK(out.predicts() == kPublished[0].predicts);
  CHECK(out.accept_index == kPublished[0].accept_index);
  CHECK(out.accept_num == kPublished[0].accept_num);
}

// ---- the law at thresholds (1, 1): the emitted tokens are the target's -----------------------

/// A small tree in SGLang's layout, slots out of level order: root slot 0; its children, tried in
/// this order, slot 3 (token 1), slot 1 (token 0) and slot 4 (token -1, a placeholder never
/// tried); slot 2 (token 2) under slot 3. V = 3.
struct SmallTree {
  std::vector<std::int64_t> candidates = {0, 0, 2, 1, -1};
  std::vector<std::int64_t> next_token = {3, -1, -1, 2, -1};
  std::vector<std::int64_t> next_sibling = {-1, 4, -1, 1, -1};
  std::vector<std::int64_t> parent = {-1, 0, 3, 0, 0};  // by slot
  std::vector<float> target = {0.5f,   0.25f,  0.25f,   // after slot 0
                               0.125f, 0.5f,   0.375f,  // after slot 1
                               0.25f,  0.25f,  0.5f,    // after slot 2
                               0.375f, 0.125f, 0.5f,    // after slot 3
                               0.25f,  0.5f,   0.25f};  // after slot 4 (never read)
  static constexpr std::int64_t vocab = 3, slots = 5;
};

/// The law sglang::verify_tree claims at (1, 1) with at most `depth` accepted nodes: from the
/// root, the next token is drawn from the current slot's row; when it is a child's token and the
/// depth allows, the walk goes on at that child. Keyed by the emitted tokens.
void claimed_law(const SmallTree& t, std::int64_t slot, int depth, int max_depth,
                 std::vector<Token>& prefix, double mass,
                 std::map<std::vector<Token>, double>& law) {
  for (Token y = 0; y < t.vocab; ++y) {
    const double p = mass * t.target[static_cast<std::size_t>(slot * t.vocab + y)];
    prefix.push_back(y);
    std::int64_t next = -1;
    for (std::int64_t s = 1; s < t.slots; ++s) {
      if (t.parent[static_cast<std::size_t>(s)] == slot &&
          t.candidates[static_cast<std::size_t>(s)] == y)
        next = s;
    }
    if (next >= 0 && depth < max_depth) {
      claimed_law(t, next, depth + 1, max_depth, prefix, p, law);
    } else {
      law[prefix] += p;
    }
    prefix.pop_back();
  }
}

std::vector<Token> emitted_tokens(const SmallTree& t, const RandomStream& stream,
                                  const std::vector<float>& coins, float final_uniform,
                                  int max_depth, Workspace& ws) {
  std::vector<std::int32_t> slots(static_cast<std::size_t>(max_depth));
  std::vector<Token> emitted(slots.size() + 1);
  const TreeVerdict verdict =
      sglang::verify_tree({.candidates = t.candidates,
                           .retrive_next_token = t.next_token,
                           .retrive_next_sibling = t.next_sibling,
                           .target_probs = {t.target.data(), t.slots, t.vocab},
                           .uniform_samples = coins,
                           .final_uniform = final_uniform,
                           .stream = stream,
                           .accepted_slots = slots,
                           .emitted = emitted},
                          ws);
  emitted.resize(static_cast<std::size_t>(verdict.accepted) + 1);
  return emitted;
}

TEST_CASE("SGLang's walk at (1, 1) emits the target's tokens: enumeration of its uniforms",
          "[verify][sglang]") {
  // Every coin and final uniform on a grid of midpoints: every boundary of an accept/reject test
  // or of a draw from a row or residual of this tree is a multiple of 1/8 (= 12/96), so the grid
  // measures the walk's law exactly.
  const SmallTree t;
  constexpr int kGrid = 96;
  for (const int max_depth : {1, 2}) {
    std::map<std::vector<Token>, double> claimed, measured;
    std::vector<Token> prefix;
    claimed_law(t, 0, 0, max_depth, prefix, 1.0, claimed);
    Workspace ws;
    std::vector<float> coins(t.slots);
    for (int root = 0; root < kGrid; ++root) {
      for (int inner = 0; inner < kGrid; ++inner) {
        for (int last = 0; last < kGrid; ++last) {
          coins[0] = (root + 0.5f) / kGrid;
          coins[3] = (inner + 0.5f) / kGrid;  // the only other slot with children
          measured[emitted_tokens(t, {}, coins, (last + 0.5f) / kGrid, max_depth, ws)] +=
              1.0 / (double(kGrid) * kGrid * kGrid);
        }
      }
    }
    INFO("max depth " << max_depth);
    for (const auto& [tokens, p] : measured) CHECK(claimed.count(tokens) == 1);
    for (const auto& [tokens, p] : claimed) {
      CHECK(std::abs(measured[tokens] - p) <= 1e-9);
    }
  }
}

TEST_CASE("SGLang's walk at (1, 1) with streams passes a chi-square test", "[verify][sglang][mc]") {
  // False-failure probability test::kFalseFailureProbability per depth; fixed seeds.
  const SmallTree t;
  const std::uint32_t runs = test::monte_carlo_runs(200000);
  for (const int max_depth : {1, 2}) {
    std::map<std::vector<Token>, double> claimed;
    std::vector<Token> prefix;
    claimed_law(t, 0, 0, max_depth, prefix, 1.0, claimed);
    std::map<std::vector<Token>, std::int64_t> counts;
    Workspace ws;
    for (std::uint32_t i = 0; i < runs; ++i) {
      const RandomStream stream(2024 + static_cast<std::uint64_t>(max_depth), i);
      ++counts[emitted_tokens(t, stream, {}, 0.5f, max_depth, ws)];
    }
    std::vector<std::int64_t> observed;
    std::vector<double> expected;
    for (const auto& [tokens, p] : claimed) {
      observed.push_back(counts[tokens]);
      expected.push_back(p);
    }
    REQUIRE(counts.size() == claimed.size());
    const auto chi = test::chi_square_test(observed, expected);
    INFO("max depth " << max_depth << " chi2 " << chi.statistic << " df " << chi.df);
    CHECK(chi.p_value > test::kFalseFailureProbability);
  }
}

// ---- forms and bad input ----------------------------------------------------------------------

TEST_CASE("the batch, the checked and the unchecked forms agree bit for bit", "[verify][sglang]") {
  const auto target = published_target();
  const std::vector<RandomStream> streams = {RandomStream(11, 0), RandomStream(11, 1)};
  for (const AcceptanceThresholds thresholds :
       {AcceptanceThresholds{1.0f, 1.0f}, AcceptanceThresholds{0.3f, 0.8f}}) {
    BatchOut out;
    sglang::TreeBatchArgs args = published_args(out);
    args.target_probs = {target.data(), kBatch * kSlots, kVocab};
    args.thresholds = thresholds;
    args.streams = streams;
    Workspace ws;
    sglang::verify_tree_batch(backend::Cpu{2}, args, ws);
    for (std::int64_t b = 0; b < kBatch; ++b) {
      const auto row = [&](const auto& v) {
        return std::span(v).subspan(static_cast<std::size_t>(b * kSlots), kSlots);
      };
      std::vector<std::int32_t> slots(kSteps - 1), unchecked_slots(kSteps - 1);
      std::vector<Token> emitted(kSteps, -1), unchecked_emitted(kSteps, -1);
      sglang::TreeArgs one{.candidates = row(kCandidates),
                           .retrive_next_token = row(kNextToken),
                           .retrive_next_sibling = row(kNextSibling),
                           .target_probs = {target.data() + b * kSlots * kVocab, kSlots, kVocab},
                           .thresholds = thresholds,
                           .stream = streams[static_cast<std::size_t>(b)],
                           .accepted_slots = slots,
                           .emitted = emitted};
      const TreeVerdict checked = sglang::verify_tree(one, ws);
      one.accepted_slots = unchecked_slots;
      one.emitted = unchecked_emitted;
      const TreeVerdict unchecked = detail::verify_sglang_tree_unchecked(one, ws);
      CHECK(checked.accepted == unchecked.accepted);
      CHECK(emitted == unchecked_emitted);
      CHECK(slots == unchecked_slots);
      REQUIRE(out.accept_num[static_cast<std::size_t>(b)] == checked.accepted);
      for (std::int32_t j = 0; j <= checked.accepted; ++j) {
        CHECK(out.emitted[static_cast<std::size_t>(b * kSteps + j)] ==
              emitted[static_cast<std::size_t>(j)]);
      }
      for (std::int32_t j = 0; j < checked.accepted; ++j) {
        CHECK(out.accept_index[static_cast<std::size_t>(b * kSteps + j + 1)] ==
              kIndex[static_cast<std::size_t>(b * kSlots + slots[static_cast<std::size_t>(j)])]);
      }
    }
  }
}

TEST_CASE("bad SGLang input names the argument", "[verify][sglang][errors]") {
  const auto target = published_target();
  const std::vector<float> finals(kBatch, 0.5f);
  const auto refused = [&](auto change) {
    BatchOut out;
    std::vector<std::int64_t> next_token = kNextToken, index = kIndex;
    std::vector<float> rows = target, coins(kBatch * kSlots, 0.5f);
    sglang::TreeBatchArgs args = published_args(out);
    args.retrive_next_token = {next_token.data(), kBatch, kSlots};
    args.retrive_index = {index.data(), kBatch, kSlots};
    args.target_probs = {rows.data(), kBatch * kSlots, kVocab};
    args.uniform_samples = {coins.data(), kBatch, kSlots};
    args.uniform_samples_for_final_sampling = finals;
    change(args, next_token, index, rows, coins);
    Workspace ws;
    try {
      sglang::verify_tree_batch(backend::cpu, args, ws);
    } catch (const Error& e) {
      return e.argument();
    }
    return std::string("(accepted)");
  };
  using I = std::vector<std::int64_t>;
  using F = std::vector<float>;
  CHECK(refused([](auto&, I& next, I&, F&, F&) { next[2] = 0; }) == "retrive_next_token[0][2]");
  CHECK(refused([](auto&, I& next, I&, F&, F&) { next[kSlots + 4] = 1; }) ==
        "retrive_next_token[1][4]");
  CHECK(refused([](auto&, I&, I& index, F&, F&) { index[kSlots + 5] = 12; }) ==
        "retrive_index[1][5]");
  CHECK(refused([](auto&, I&, I&, F&, F& coins) { coins[0] = 1.5f; }) == "uniform_samples[0][0]");
  CHECK(refused([](auto&, I&, I&, F& rows, F&) { rows[0] = NAN; }) == "target_probs[0][0]");
  CHECK(refused([](auto& args, I&, I&, F&, F&) { args.thresholds.single = 1.5f; }) ==
        "threshold_single");
  CHECK(refused([](auto& args, I&, I&, F&, F&) { args.uniform_samples_for_final_sampling = {}; }) ==
        "uniform_samples_for_final_sampling");
  CHECK(refused([](auto& args, I&, I&, F&, F&) { args.accept_token_num = {}; }) ==
        "accept_token_num");
  CHECK(refused([](auto&, I&, I&, F&, F&) {}) == "(accepted)");
}

}  // namespace sglang_tree_tests
