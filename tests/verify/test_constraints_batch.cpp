// SPDX-License-Identifier: MIT
// The CPU batch of constrained chains from logits (backend/cpu/constrained_batch.hpp): each
// sequence equal to the single-sequence call on its rows and constraints, bit for bit, with
// ragged drafts, per-sequence and shared constraints, with and without draft rows, on one and
// two threads; bad constraints named for their sequence, or failing it alone with a status.
#include <limits>

#include "helpers.hpp"
#include "specdec/backend/cpu/constrained_batch.hpp"
#include "specdec/toy/random.hpp"

using namespace specdec;
using Catch::Contains;

namespace {

constexpr std::int64_t kVocab = 300;
constexpr std::size_t kV = 300;
constexpr std::int64_t kWords = (kVocab + 31) / 32;

// A ragged batch with logits, drafted tokens (from the warped draft rows), a batch bitmask and
// one request per sequence, each with different transforms.
struct Batch {
  std::vector<std::int64_t> gammas;
  std::vector<std::int32_t> offsets;
  std::vector<float> target, draft;
  std::vector<Token> tokens;
  std::vector<Warp> warps;
  std::vector<RandomStream> streams;
  std::vector<std::int32_t> bitmask;
  std::vector<constrained::LogitConstraints> sequences;
  // Storage the constraints point into.
  std::vector<constrained::PenalisedToken> penalised = {
      {3, 2, false}, {17, 0, true}, {250, 1, false}};
  std::vector<Token> allowed, stops = {0, 299}, words = {5, 9, 11, 12, 13}, tail = {4, 5};
  std::vector<std::int32_t> word_offsets = {0, 2, 3, 5};

  std::int64_t batch() const { return std::ssize(gammas); }
  std::int64_t drafts() const { return offsets.back(); }
};

Batch make_batch(const std::vector<std::int64_t>& gammas, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  Batch c;
  c.gammas = gammas;
  c.offsets.push_back(0);
  for (const auto g : gammas) c.offsets.push_back(c.offsets.back() + static_cast<std::int32_t>(g));
  const auto b_count = static_cast<std::size_t>(c.batch());
  const auto rows = static_cast<std::size_t>(c.drafts()) + b_count;
  c.target.resize(rows * kV);
  for (float& x : c.target) x = static_cast<float>(2.0 * rng.normal());
  const std::vector<Warp> warps = {Warp{}, Warp{.temperature = 0.7f}, Warp{.top_k = 20},
                                   Warp{.top_p = 0.8f}, Warp{.min_p = 0.05f}};
  for (std::size_t b = 0; b < b_count; ++b) c.warps.push_back(warps[b % warps.size()]);
  for (std::size_t b = 0; b < b_count; ++b)
    c.streams.push_back(RandomStream{seed, static_cast<std::uint32_t>(b), 3});
  // Draft rows near the target's; tokens drawn from their warps.
  Workspace ws;
  std::vector<float> row(kV);
  for (std::size_t b = 0; b < b_count; ++b) {
    for (std::int32_t i = c.offsets[b]; i < c.offsets[b + 1]; ++i) {
      const auto* t = c.target.data() + (static_cast<std::size_t>(i) + b) * kV;
      for (std::size_t k = 0; k < kV; ++k) {
        c.draft.push_back(t[k] + static_cast<float>(0.7 * rng.normal()));
      }
      warp_logits<float>(c.warps[b], std::span<const float>(c.draft).last(kV), row, ws);
      c.tokens.push_back(detail::sample_row(row.data(), kVocab, rng.uniform()));
    }
  }
  // The batch mask: about 70% allowed per row (token 1 always), bits past V set.
  c.bitmask.assign(rows * static_cast<std::size_t>(kWords), 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t t = 0; t < kV; ++t) {
      if (t == 1 || rng.uniform() < 0.7f) {
        auto& w = c.bitmask[r * static_cast<std::size_t>(kWords) + t / 32];
        w = static_cast<std::int32_t>(static_cast<std::uint32_t>(w) | (1u << (t % 32)));
      }
    }
    c.bitmask[(r + 1) * static_cast<std::size_t>(kWords) - 1] |= ~0 << (kV % 32);
  }
  for (Token t = 1; t < kVocab; t += 2) c.allowed.push_back(t);
  // Per sequence (cycling): penalties; banned words; min_tokens; allowed ids; everything.
  for (std::size_t b = 0; b < b_count; ++b) {
    constrained::LogitConstraints q;
    const auto kind = b % 5;
    if (kind == 0 || kind == 4) {
      q.penalties = {
          .repetition = 1.3f, .frequency = 0.4f, .presence = 0.6f, .tokens = c.penalised};
    }
    if (kind == 1 || kind == 4) {
      q.bad_words = c.words;
      q.bad_word_offsets = c.word_offsets;
      q.output_tail = c.tail;
    }
    if (kind == 2 || kind == 4) {
      q.stop_tokens = c.stops;
      q.min_tokens = 4;
      q.output_length = 1;
    }
    if (kind == 3) q.allowed = c.allowed;
    c.sequences.push_back(q);
  }
  return c;
}

struct Outputs {
  std::vector<Token> emitted;
  std::vector<std::int32_t> accepted, status;
};

Outputs run_batch(const Batch& c, const constrained::ChainBatchConstraints& constraints,
                  bool target_only, int threads, bool with_status = false) {
  Outputs o;
  o.emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), 99);
  o.accepted.assign(static_cast<std::size_t>(c.batch()), 99);
  if (with_status) o.status.assign(status_words(c.batch()), 99);
  const backend::Cpu cpu{threads};
  Workspace ws(constrained::chain_batch_workspace_size(
      cpu, {.batch = c.batch(),
            .max_gamma = *std::max_element(c.gammas.begin(), c.gammas.end()),
            .vocab = kVocab}));
  const ChainBatchLogitsArgs<float> args{
      .draft_offsets = c.offsets,
      .target_logits = MatrixView<const float>(c.target.data(), c.drafts() + c.batch(), kVocab),
      .draft_logits = target_only ? MatrixView<const float>{}
                                  : MatrixView<const float>(c.draft.data(), c.drafts(), kVocab),
      .warps = c.warps,
      .draft_tokens = c.tokens,
      .streams = c.streams,
      .emitted = o.emitted,
      .accepted = o.accepted,
      .status = o.status};
  if (target_only) {
    constrained::verify_chain_batch_target_only_logits(cpu, args, constraints, ws);
  } else {
    constrained::verify_chain_batch_logits(cpu, args, constraints, ws);
  }
  return o;
}

// Sequence b through the single-sequence entry: its emitted tokens padded with -1 to gamma + 1.
std::pair<std::int32_t, std::vector<Token>> run_one(const Batch& c,
                                                    const constrained::LogitConstraints& base,
                                                    bool masked, std::size_t b, bool target_only) {
  const auto first = static_cast<std::size_t>(c.offsets[b]);
  const auto g = static_cast<std::size_t>(c.gammas[b]);
  const auto first_row = first + b;
  constrained::LogitConstraints q = base;
  if (masked) {
    q.bitmask = std::span<const std::int32_t>(c.bitmask).subspan(
        first_row * static_cast<std::size_t>(kWords), (g + 1) * static_cast<std::size_t>(kWords));
  }
  const std::span<const float> target(c.target.data() + first_row * kV, (g + 1) * kV);
  const std::span<const float> draft(c.draft.data() + first * kV, g * kV);
  const std::span<const Token> tokens(c.tokens.data() + first, g);
  std::vector<Token> out(g + 1, kNoToken);
  Workspace ws;
  const auto v = target_only ? constrained::verify_chain_target_only_logits(
                                   c.warps[b], target, tokens, kVocab, q, c.streams[b], out, ws)
                             : constrained::verify_chain_logits(c.warps[b], target, draft, tokens,
                                                                kVocab, q, c.streams[b], out, ws);
  std::fill(out.begin() + v.emitted, out.end(), kNoToken);
  return {v.accepted, out};
}

}  // namespace

TEST_CASE("the constrained chain batch equals the single-sequence calls",
          "[verify][logits][constraints][batched]") {
  std::int32_t rejected = 0, full = 0;
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const auto c = make_batch({3, 0, 5, 2, 4, 1, 5, 3}, seed);
    for (const bool masked : {false, true}) {
      for (const bool shared : {false, true}) {
        const constrained::ChainBatchConstraints constraints{
            .bitmask =
                masked ? std::span<const std::int32_t>(c.bitmask) : std::span<const std::int32_t>{},
            .sequences = shared ? std::span(c.sequences).subspan(4, 1) : std::span(c.sequences)};
        for (const bool target_only : {false, true}) {
          for (const int threads : {1, 2}) {
            INFO("seed " << seed << " masked " << masked << " shared " << shared << " target-only "
                         << target_only << " threads " << threads);
            const auto o = run_batch(c, constraints, target_only, threads);
            for (std::size_t b = 0; b < c.gammas.size(); ++b) {
              INFO("sequence " << b);
              const auto& q = shared ? c.sequences[4] : c.sequences[b];
              const auto [accepted, tokens] = run_one(c, q, masked, b, target_only);
              REQUIRE(o.accepted[b] == accepted);
              const auto first =
                  static_cast<std::ptrdiff_t>(c.offsets[b] + static_cast<std::int32_t>(b));
              CHECK(std::vector<Token>(o.emitted.begin() + first,
                                       o.emitted.begin() + first + std::ssize(tokens)) == tokens);
              rejected += accepted < c.gammas[b] ? 1 : 0;
              full += accepted == c.gammas[b] ? 1 : 0;
            }
          }
        }
      }
    }
  }
  CHECK(rejected > 50);
  CHECK(full > 50);
}

TEST_CASE("the constrained chain batch names bad constraints by sequence",
          "[verify][logits][constraints][batched]") {
  auto c = make_batch({2, 1, 3}, 9);
  const auto run = [&](const constrained::ChainBatchConstraints& k, bool with_status = false) {
    return run_batch(c, k, false, 2, with_status);
  };
  const std::span<const constrained::LogitConstraints> all(c.sequences);
  CHECK_THROWS_WITH(run({.sequences = all.first(2)}), Contains("constraints.sequences"));
  CHECK_THROWS_WITH(
      run({.bitmask = std::span<const std::int32_t>(c.bitmask).first(5), .sequences = all}),
      Contains("constraints.bitmask"));
  auto own = c.sequences;
  own[1].bitmask =
      std::span<const std::int32_t>(c.bitmask).first(static_cast<std::size_t>(2 * kWords));
  CHECK_THROWS_WITH(run({.sequences = own}), Contains("constraints.sequences[1]"));
  // Sequence 2's penalties list a token outside the vocabulary.
  const std::vector<constrained::PenalisedToken> outside = {{kVocab, 1, false}};
  auto bad = c.sequences;
  bad[2].penalties = {.repetition = 1.2f, .tokens = outside};
  CHECK_THROWS_WITH(run({.sequences = bad}), Contains("penalties.tokens[2][0]"));
  // Sequence 1's root row allows nothing: named with its row; with a status it fails alone.
  auto empty = c.bitmask;
  std::fill_n(empty.begin() + 3 * kWords, kWords, 0);  // row 3 = sequence 1's row 0
  CHECK_THROWS_WITH(run({.bitmask = empty, .sequences = all}), Contains("bitmask[1][0]"));
  const auto o = run({.bitmask = empty, .sequences = all}, true);
  CHECK(o.status[1] == static_cast<std::int32_t>(SequenceStatus::kBadRow));
  CHECK(o.status[0] == static_cast<std::int32_t>(SequenceStatus::kOk));
  CHECK(o.status[2] == static_cast<std::int32_t>(SequenceStatus::kOk));
  CHECK(o.status[3] == 1);
  CHECK(o.accepted[1] == -1);
  CHECK(o.accepted[0] >= 0);
}

namespace {

// A batch of ragged trees over the batch's rows: node i of tree b has a random parent in level
// order (the root, or an earlier node) and a token drawn from its parent's warped draft row,
// siblings distinct.
struct TreeBatch {
  Batch rows;  // logits, bitmask and constraints over N + B rows (its chain fields unused)
  std::vector<std::int32_t> node_offsets;
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
};

TreeBatch make_tree_batch(const std::vector<std::int64_t>& sizes, std::uint64_t seed) {
  TreeBatch t;
  // Chains of the same sizes give N + B target rows; the draft rows are made N + B below.
  t.rows = make_batch(sizes, seed);
  toy::ToyRandom rng(seed + 100);
  t.node_offsets = t.rows.offsets;
  auto& draft = t.rows.draft;
  draft = t.rows.target;
  for (float& x : draft) x += static_cast<float>(0.7 * rng.normal());
  Workspace ws;
  std::vector<float> row(kV);
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    const auto first_row = static_cast<std::size_t>(t.node_offsets[b]) + b;
    for (std::int32_t i = 0; i < static_cast<std::int32_t>(sizes[b]); ++i) {
      // Parents non-decreasing (level order): from the previous node's parent to node i - 1.
      const std::int32_t previous = i == 0 ? -1 : t.parents.back();
      const auto parent =
          previous + static_cast<std::int32_t>(rng.uniform() * static_cast<float>(i - previous));
      warp_logits<float>(t.rows.warps[b],
                         std::span<const float>(draft).subspan(
                             (first_row + static_cast<std::size_t>(parent + 1)) * kV, kV),
                         row, ws);
      // Siblings distinct: a drawn sibling's token leaves the row.
      const auto first = static_cast<std::size_t>(t.node_offsets[b]);
      for (std::size_t j = first; j < t.tokens.size(); ++j) {
        if (t.parents[j] == parent) row[static_cast<std::size_t>(t.tokens[j])] = 0.0f;
      }
      t.tokens.push_back(detail::sample_row(row.data(), kVocab, rng.uniform()));
      t.parents.push_back(parent);
    }
  }
  return t;
}

}  // namespace

TEST_CASE("the constrained tree batch equals the single-tree calls",
          "[verify][logits][constraints][batched]") {
  std::int32_t rejected = 0, bonus = 0;
  const std::vector<Rule> rules = {Recursive{}, MultiRound{}, SpecTr{}};
  for (const std::uint64_t seed : {4u, 5u}) {
    const auto t = make_tree_batch({5, 0, 7, 3, 6, 1, 4, 2}, seed);
    const auto& c = t.rows;
    const auto batch = static_cast<std::size_t>(c.batch());
    const auto nodes = t.tokens.size();
    for (const bool masked : {false, true}) {
      const constrained::ChainBatchConstraints constraints{
          .bitmask =
              masked ? std::span<const std::int32_t>(c.bitmask) : std::span<const std::int32_t>{},
          .sequences = c.sequences};
      for (std::size_t r = 0; r <= rules.size(); ++r) {
        const bool target_only = r == rules.size();
        for (const int threads : {1, 2}) {
          INFO("seed " << seed << " masked " << masked << " rule " << r << " threads " << threads);
          std::vector<std::int32_t> accepted_nodes(nodes, -7), accepted(batch), status;
          std::vector<Token> final_tokens(batch);
          std::vector<std::uint8_t> bonuses(batch);
          const backend::Cpu cpu{threads};
          Workspace ws(constrained::tree_batch_workspace_size(
              cpu, {.batch = c.batch(), .max_nodes = 7, .vocab = kVocab}));
          const TreeBatchArgs args{
              .node_offsets = t.node_offsets,
              .trees = {t.tokens, t.parents},
              .target_rows = MatrixView<const float>(
                  c.target.data(), static_cast<std::int64_t>(nodes + batch), kVocab),
              .draft_rows = target_only ? MatrixView<const float>{}
                                        : MatrixView<const float>(
                                              c.draft.data(),
                                              static_cast<std::int64_t>(nodes + batch), kVocab),
              .streams = c.streams,
              .accepted_nodes = accepted_nodes,
              .accepted = accepted,
              .final_tokens = final_tokens,
              .bonus = bonuses};
          if (target_only) {
            constrained::verify_tree_batch_target_only_logits(cpu, args, c.warps, constraints, ws);
          } else {
            constrained::verify_tree_batch_logits(cpu, rules[r], args, c.warps, constraints, ws);
          }
          for (std::size_t b = 0; b < batch; ++b) {
            INFO("tree " << b);
            const auto first = static_cast<std::size_t>(t.node_offsets[b]);
            const auto n = static_cast<std::size_t>(c.gammas[b]);
            const auto first_row = first + b;
            constrained::LogitConstraints q = c.sequences[b];
            if (masked) {
              q.bitmask = std::span<const std::int32_t>(c.bitmask).subspan(
                  first_row * static_cast<std::size_t>(kWords),
                  (n + 1) * static_cast<std::size_t>(kWords));
            }
            const TreeView tree{std::span(t.tokens).subspan(first, n),
                                std::span(t.parents).subspan(first, n)};
            const std::span<const float> target(c.target.data() + first_row * kV, (n + 1) * kV);
            const std::span<const float> draft(c.draft.data() + first_row * kV, (n + 1) * kV);
            std::vector<std::int32_t> one(n);
            Workspace single;
            const auto v =
                target_only
                    ? constrained::verify_tree_target_only_logits(c.warps[b], tree, target, kVocab,
                                                                  q, c.streams[b], one, single)
                    : constrained::verify_tree_logits(rules[r], c.warps[b], tree, {target, draft},
                                                      kVocab, q, c.streams[b], one, single);
            REQUIRE(accepted[b] == v.accepted);
            CHECK(final_tokens[b] == v.token);
            CHECK(bonuses[b] == (v.bonus ? 1 : 0));
            const auto kept = static_cast<std::ptrdiff_t>(v.accepted);
            CHECK(std::vector<std::int32_t>(
                      accepted_nodes.begin() + static_cast<std::ptrdiff_t>(first),
                      accepted_nodes.begin() + static_cast<std::ptrdiff_t>(first) + kept) ==
                  std::vector<std::int32_t>(one.begin(), one.begin() + kept));
            rejected += v.bonus ? 0 : 1;
            bonus += v.bonus ? 1 : 0;
          }
        }
      }
    }
  }
  CHECK(rejected > 20);
  CHECK(bonus > 10);
}

TEST_CASE("the constrained tree batch names bad constraints by tree",
          "[verify][logits][constraints][batched]") {
  const auto t = make_tree_batch({3, 2, 4}, 6);
  auto sequences = t.rows.sequences;
  const std::vector<constrained::PenalisedToken> outside = {{kVocab, 1, false}};
  sequences[2].penalties = {.repetition = 1.2f, .tokens = outside};
  const auto nodes = static_cast<std::int64_t>(t.tokens.size());
  std::vector<std::int32_t> accepted_nodes(t.tokens.size()), accepted(3), status(4);
  std::vector<Token> final_tokens(3);
  const auto run = [&](std::span<std::int32_t> words) {
    const backend::Cpu cpu{2};
    Workspace ws;
    constrained::verify_tree_batch_logits(
        cpu, Recursive{},
        {.node_offsets = t.node_offsets,
         .trees = {t.tokens, t.parents},
         .target_rows = MatrixView<const float>(t.rows.target.data(), nodes + 3, kVocab),
         .draft_rows = MatrixView<const float>(t.rows.draft.data(), nodes + 3, kVocab),
         .streams = t.rows.streams,
         .accepted_nodes = accepted_nodes,
         .accepted = accepted,
         .final_tokens = final_tokens,
         .status = words},
        t.rows.warps, {.sequences = sequences}, ws);
  };
  CHECK_THROWS_WITH(run({}), Contains("penalties.tokens[2][0]"));
  run(status);
  CHECK(status[2] == static_cast<std::int32_t>(SequenceStatus::kTokenOutsideVocab));
  CHECK(status[0] == static_cast<std::int32_t>(SequenceStatus::kOk));
  CHECK(status[3] == 1);
  CHECK(accepted[2] == -1);
  CHECK(accepted[0] >= 0);
}
