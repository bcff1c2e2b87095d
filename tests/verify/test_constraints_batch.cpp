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
  std::vector<LogitConstraints> sequences;
  // Storage the constraints point into.
  std::vector<PenalisedToken> penalised = {{3, 2, false}, {17, 0, true}, {250, 1, false}};
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
  for (std::size_t b = 0; b < b_count; ++b) c.streams.push_back(RandomStream{seed, static_cast<std::uint32_t>(b), 3});
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
    LogitConstraints q;
    const auto kind = b % 5;
    if (kind == 0 || kind == 4) {
      q.penalties = {.repetition = 1.3f, .frequency = 0.4f, .presence = 0.6f, .tokens = c.penalised};
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

Outputs run_batch(const Batch& c, const ChainBatchConstraints& constraints, bool target_only,
                  int threads, bool with_status = false) {
  Outputs o;
  o.emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), 99);
  o.accepted.assign(static_cast<std::size_t>(c.batch()), 99);
  if (with_status) o.status.assign(status_words(c.batch()), 99);
  const backend::Cpu cpu{threads};
  Workspace ws(constrained_chain_batch_workspace_size(
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
    verify_chain_batch_target_only_logits_constrained(cpu, args, constraints, ws);
  } else {
    verify_chain_batch_logits_constrained(cpu, args, constraints, ws);
  }
  return o;
}

// Sequence b through the single-sequence entry: its emitted tokens padded with -1 to gamma + 1.
std::pair<std::int32_t, std::vector<Token>> run_one(const Batch& c, const LogitConstraints& base,
                                                    bool masked, std::size_t b, bool target_only) {
  const auto first = static_cast<std::size_t>(c.offsets[b]);
  const auto g = static_cast<std::size_t>(c.gammas[b]);
  const auto first_row = first + b;
  LogitConstraints q = base;
  if (masked) {
    q.bitmask = std::span<const std::int32_t>(c.bitmask).subspan(
        first_row * static_cast<std::size_t>(kWords), (g + 1) * static_cast<std::size_t>(kWords));
  }
  const std::span<const float> target(c.target.data() + first_row * kV, (g + 1) * kV);
  const std::span<const float> draft(c.draft.data() + first * kV, g * kV);
  const std::span<const Token> tokens(c.tokens.data() + first, g);
  std::vector<Token> out(g + 1, kNoToken);
  Workspace ws;
  const auto v = target_only
                     ? verify_chain_target_only_logits_constrained(c.warps[b], target, tokens,
                                                                   kVocab, q, c.streams[b], out, ws)
                     : verify_chain_logits_constrained(c.warps[b], target, draft, tokens, kVocab,
                                                       q, c.streams[b], out, ws);
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
        const ChainBatchConstraints constraints{
            .bitmask = masked ? std::span<const std::int32_t>(c.bitmask)
                              : std::span<const std::int32_t>{},
            .sequences = shared ? std::span(c.sequences).subspan(4, 1) : std::span(c.sequences)};
        for (const bool target_only : {false, true}) {
          for (const int threads : {1, 2}) {
            INFO("seed " << seed << " masked " << masked << " shared " << shared
                         << " target-only " << target_only << " threads " << threads);
            const auto o = run_batch(c, constraints, target_only, threads);
            for (std::size_t b = 0; b < c.gammas.size(); ++b) {
              INFO("sequence " << b);
              const auto& q = shared ? c.sequences[4] : c.sequences[b];
              const auto [accepted, tokens] = run_one(c, q, masked, b, target_only);
              REQUIRE(o.accepted[b] == accepted);
              const auto first = static_cast<std::ptrdiff_t>(c.offsets[b] + static_cast<std::int32_t>(b));
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
  const auto run = [&](const ChainBatchConstraints& k, bool with_status = false) {
    return run_batch(c, k, false, 2, with_status);
  };
  const std::span<const LogitConstraints> all(c.sequences);
  CHECK_THROWS_WITH(run({.sequences = all.first(2)}), Contains("constraints.sequences"));
  CHECK_THROWS_WITH(run({.bitmask = std::span<const std::int32_t>(c.bitmask).first(5),
                         .sequences = all}),
                    Contains("constraints.bitmask"));
  auto own = c.sequences;
  own[1].bitmask = std::span<const std::int32_t>(c.bitmask).first(static_cast<std::size_t>(2 * kWords));
  CHECK_THROWS_WITH(run({.sequences = own}), Contains("constraints.sequences[1]"));
  // Sequence 2's penalties list a token outside the vocabulary.
  const std::vector<PenalisedToken> outside = {{kVocab, 1, false}};
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
