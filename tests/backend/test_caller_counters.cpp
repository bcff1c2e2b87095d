// SPDX-License-Identifier: MIT
// The caller's zeroed counters (DeviceWorkspace::counters): a CUDA call given them skips its
// memset, gives the tokens it gives without them, and leaves every word at zero, so calls of
// other entry points and shapes can share them (run on the host through the emulated runtime).
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/backend/cuda/draft_batch.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/core/error.hpp"
#include "specdec/toy/random.hpp"

using namespace specdec;
namespace emu = specdec::emulation;

namespace caller_counters {

constexpr std::int64_t kCountedVocab = 6000;
constexpr std::int64_t kCountedGamma = 3;
constexpr std::int64_t kCountedBatch = 2;

std::vector<float> normal_rows(std::int64_t rows, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<float> out(static_cast<std::size_t>(rows * kCountedVocab));
  for (float& v : out) v = static_cast<float>(3.0 * rng.normal());
  return out;
}

/// Scratch is filled with 0xa5 bytes unless said otherwise: a workspace needs no initialisation.
/// Zeroed counters shared by every call of a case; `words` of them.
struct Counters {
  std::vector<unsigned int> words;
  explicit Counters(std::size_t n) : words(n, 0u) {}
  bool all_zero() const {
    return std::all_of(words.begin(), words.end(), [](unsigned int w) { return w == 0u; });
  }
};

/// A chain step from logits (every draft token its row's argmax): its tokens,
/// accepted counts and status words, then the bytes its kernels read (in thousands: a re-read
/// row shows).
std::vector<Token> chain_step(const Warp& warp, std::span<unsigned int> counters,
                              unsigned char fill = 0xa5) {
  const std::vector<float> target = normal_rows(kCountedBatch * (kCountedGamma + 1), 1),
                           draft = normal_rows(kCountedBatch * kCountedGamma, 2);
  std::vector<Token> tokens;  // each draft row's argmax: drawable under every warp
  for (std::int64_t r = 0; r < kCountedBatch * kCountedGamma; ++r) {
    const auto row = draft.begin() + r * kCountedVocab;
    tokens.push_back(static_cast<Token>(std::max_element(row, row + kCountedVocab) - row));
  }
  std::vector<std::int32_t> offsets(kCountedBatch + 1);
  uniform_draft_offsets(kCountedGamma, offsets);
  std::vector<RandomStream> streams(kCountedBatch);
  for (std::size_t b = 0; b < streams.size(); ++b)
    streams[b].sequence = static_cast<std::uint32_t>(b);
  std::vector<Token> emitted(kCountedBatch * (kCountedGamma + 1), 99);
  std::vector<std::int32_t> accepted(kCountedBatch, 99);
  std::vector<std::int32_t> status(kCountedBatch + 1, 99);
  const ChainBatchShape shape{.batch = kCountedBatch,
                              .max_gamma = kCountedGamma,
                              .vocab = kCountedVocab,
                              .from_logits = true};
  std::vector<unsigned char> scratch(workspace_size(backend::cuda, shape), fill);
  const std::vector<Warp> warps{warp};
  emu::ledger.reset();
  verify_chain_batch_logits(
      backend::cuda,
      ChainBatchLogitsArgs<float>{
          .draft_offsets = offsets,
          .target_logits = MatrixView<const float>(
              target.data(), kCountedBatch * (kCountedGamma + 1), kCountedVocab),
          .draft_logits =
              MatrixView<const float>(draft.data(), kCountedBatch * kCountedGamma, kCountedVocab),
          .warps = warps,
          .draft_tokens = tokens,
          .streams = streams,
          .emitted = emitted,
          .accepted = accepted,
          .status = status},
      backend::DeviceWorkspace{scratch.data(), scratch.size(), counters});
  emitted.insert(emitted.end(), accepted.begin(), accepted.end());
  emitted.insert(emitted.end(), status.begin(), status.end());
  emitted.push_back(static_cast<Token>(emu::ledger.total().read / 1000));
  return emitted;
}

/// Gumbel-top-k (k 4) of three rows, its tokens.
std::vector<Token> gumbel(std::span<unsigned int> counters) {
  constexpr std::int64_t kRows = 3, kK = 4;
  const std::vector<float> rows = normal_rows(kRows, 3);
  std::vector<RandomStream> streams(kRows);
  for (std::size_t r = 0; r < streams.size(); ++r)
    streams[r].sequence = static_cast<std::uint32_t>(r);
  std::vector<Token> tokens(kRows * kK);
  std::vector<std::int32_t> counts(kRows);
  std::vector<unsigned char> scratch(
      workspace_size(backend::cuda, GumbelTopKBatchShape{kRows, kCountedVocab, kK}), 0xa5);
  gumbel_top_k_batch(
      backend::cuda,
      GumbelTopKBatchArgs<float>{.rows = MatrixView<const float>(rows.data(), kRows, kCountedVocab),
                                 .k = kK,
                                 .streams = streams,
                                 .tokens = MatrixView<Token>(tokens.data(), kRows, kK),
                                 .counts = counts},
      backend::DeviceWorkspace{scratch.data(), scratch.size(), counters});
  return tokens;
}

/// The warp of three rows, its probabilities.
std::vector<float> warp_rows(const Warp& warp, std::span<unsigned int> counters) {
  constexpr std::int64_t kRows = 3;
  const std::vector<float> logits = normal_rows(kRows, 4);
  std::vector<float> warped(logits.size());
  std::vector<unsigned char> scratch(
      workspace_size(backend::cuda, WarpBatchShape{kRows, kCountedVocab}), 0xa5);
  warp_logits_batch(
      backend::cuda,
      WarpBatchArgs<float>{.logits = MatrixView<const float>(logits.data(), kRows, kCountedVocab),
                           .warps = std::span<const Warp>(&warp, 1),
                           .warped = MatrixView<float>(warped.data(), kRows, kCountedVocab)},
      backend::DeviceWorkspace{scratch.data(), scratch.size(), counters});
  return warped;
}

}  // namespace caller_counters

using namespace caller_counters;

TEST_CASE("caller's counters: every call gives its memset form's outputs and leaves them zero",
          "[backend][cuda_kernel][counters]") {
  // Few SMs: several blocks share each row, so every counter elects a last block.
  emu::runtime.sm_count = 4;
  const Warp t{.temperature = 0.8f}, top_p{.temperature = 0.8f, .top_p = 0.9f},
      top_k{.temperature = 0.8f, .top_k = 50}, min_p{.temperature = 0.8f, .min_p = 0.1f};
  const ChainBatchShape chain{.batch = kCountedBatch,
                              .max_gamma = kCountedGamma,
                              .vocab = kCountedVocab,
                              .from_logits = true};
  Counters shared(
      std::max({workspace_counters(backend::cuda, chain),
                workspace_counters(backend::cuda, WarpBatchShape{3, kCountedVocab}),
                workspace_counters(backend::cuda, GumbelTopKBatchShape{3, kCountedVocab, 4})}));
  for (const Warp& w : {t, top_p, top_k, min_p}) {
    INFO("T " << w.temperature << ", top-p " << w.top_p << ", top-k " << w.top_k << ", min-p "
              << w.min_p);
    // Tokens, counts and bytes read, whatever the scratch held before.
    const std::vector<Token> clean = chain_step(w, {}, 0x00);
    CHECK(clean[kCountedBatch * (kCountedGamma + 1)] >= 0);  // sequence 0 verified
    CHECK(chain_step(w, {}) == clean);
    CHECK(chain_step(w, shared.words) == clean);
    CHECK(shared.all_zero());
    CHECK(warp_rows(w, shared.words) == warp_rows(w, {}));
    CHECK(shared.all_zero());
  }
  CHECK(gumbel(shared.words) == gumbel({}));
  CHECK(shared.all_zero());
  emu::runtime.sm_count = 132;
}

TEST_CASE("caller's counters: a call with them makes no memset",
          "[backend][cuda_kernel][counters]") {
  emu::runtime.sm_count = 4;
  const Warp top_p{.temperature = 0.8f, .top_p = 0.9f};
  Counters counters(workspace_counters(backend::cuda, ChainBatchShape{.batch = kCountedBatch,
                                                                      .max_gamma = kCountedGamma,
                                                                      .vocab = kCountedVocab,
                                                                      .from_logits = true}));
  chain_step(top_p, {});
  CHECK(emu::ledger.counts.memsets == 1);
  chain_step(top_p, counters.words);  // its status words too are cleared by its kernels
  CHECK(emu::ledger.counts.memsets == 0);
  emu::ledger.reset();
  gumbel(counters.words);
  CHECK(emu::ledger.counts.memsets == 0);
  emu::runtime.sm_count = 132;
}

TEST_CASE("caller's counters: too few are a specdec::Error naming workspace.counters",
          "[backend][cuda_kernel][counters]") {
  const ChainBatchShape chain{.batch = kCountedBatch,
                              .max_gamma = kCountedGamma,
                              .vocab = kCountedVocab,
                              .from_logits = true};
  Counters few(workspace_counters(backend::cuda, chain) - 1);
  CHECK_THROWS_WITH(chain_step(Warp{.temperature = 1.0f}, few.words),
                    Catch::Contains("workspace.counters") && Catch::Contains("words"));
  Counters one(1);
  CHECK_THROWS_WITH(gumbel(one.words), Catch::Contains("workspace.counters"));
  CHECK_THROWS_WITH(warp_rows(Warp{.temperature = 1.0f}, one.words),
                    Catch::Contains("workspace.counters"));
}
