// SPDX-License-Identifier: MIT
// The CUDA chain verification kernel's source, run on the host through the library's CUDA
// emulation (one block per sequence, one fiber per CUDA thread), against verify_chain per sequence.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the kernel header then sees its built-ins.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "specdec/backend/cuda/detail/chain_kernels.cuh"
#include "specdec/backend/cuda/detail/row_draw.cuh"
#include "specdec/core/warp.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain.hpp"

using namespace specdec;
namespace kernels = specdec::backend::cuda_impl::detail;

namespace {

struct Chains {
  std::vector<std::int32_t> offsets;  // draft offsets, B + 1
  std::int64_t vocab;
  std::vector<float> target, draft;  // logits or probabilities
  std::vector<Token> tokens;
  std::vector<RandomStream> streams;

  std::int64_t batch() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t drafts() const { return offsets.back(); }
};

std::vector<float> warped_rows(const std::vector<float>& logits, std::int64_t vocab,
                               const Warp& w) {
  std::vector<float> out(logits.size());
  Workspace ws;
  const auto v = static_cast<std::size_t>(vocab);
  for (std::size_t r = 0; r < logits.size() / v; ++r) {
    warp_logits<float>(w, std::span<const float>(logits).subspan(r * v, v),
                       std::span<float>(out).subspan(r * v, v), ws);
  }
  return out;
}

/// Random logits, one sequence per entry of `gammas`; draft tokens drawn from the warped draft
/// rows.
Chains make_ragged(const std::vector<std::int64_t>& gammas, std::int64_t vocab, const Warp& w,
                   std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  Chains c{{0}, vocab, {}, {}, {}, {}};
  for (const std::int64_t gamma : gammas)
    c.offsets.push_back(c.offsets.back() + static_cast<std::int32_t>(gamma));
  for (std::int64_t r = 0; r < c.drafts() * vocab; ++r) {
    c.draft.push_back(static_cast<float>(2.0 * rng.normal()));
  }
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    const std::int64_t first = c.offsets[static_cast<std::size_t>(b)];
    const std::int64_t gamma = c.offsets[static_cast<std::size_t>(b) + 1] - first;
    for (std::int64_t i = 0; i <= gamma; ++i) {
      for (std::int64_t x = 0; x < vocab; ++x) {
        // Near the draft row of the same position (the last one for the bonus row).
        const float base =
            gamma == 0
                ? 0.0f
                : c.draft[static_cast<std::size_t>((first + std::min(i, gamma - 1)) * vocab + x)];
        c.target.push_back(base + static_cast<float>(0.7 * rng.normal()));
      }
    }
    RandomStream s;
    s.seed = seed;
    s.sequence = static_cast<std::uint32_t>(b);
    s.position = 3;
    c.streams.push_back(s);
  }
  const auto draft = warped_rows(c.draft, vocab, w);
  for (std::int64_t r = 0; r < c.drafts(); ++r) {
    c.tokens.push_back(detail::sample_row(draft.data() + r * vocab, vocab, rng.uniform()));
  }
  return c;
}

Chains make(std::int64_t batch, std::int64_t gamma, std::int64_t vocab, const Warp& w,
            std::uint64_t seed) {
  return make_ragged(std::vector<std::int64_t>(static_cast<std::size_t>(batch), gamma), vocab, w,
                     seed);
}

/// verify_chain per sequence; sequence b's gamma_b + 1 tokens at offsets[b] + b, padded with -1.
void oracle(const Chains& c, const std::vector<float>& target, const std::vector<float>& draft,
            std::vector<Token>& emitted, std::vector<std::int32_t>& accepted) {
  const auto v = static_cast<std::size_t>(c.vocab);
  emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), kNoToken);
  accepted.clear();
  Workspace ws;
  for (std::size_t b = 0; b < static_cast<std::size_t>(c.batch()); ++b) {
    const auto first = static_cast<std::size_t>(c.offsets[b]);
    const auto g = static_cast<std::size_t>(c.offsets[b + 1]) - first;
    const auto verdict = verify_chain<float>(
        Rejection{}, std::span<const float>(target).subspan((first + b) * v, (g + 1) * v),
        std::span<const float>(draft).subspan(first * v, g * v),
        std::span<const Token>(c.tokens).subspan(first, g), c.vocab, c.streams[b],
        std::span<Token>(emitted).subspan(first + b, g + 1), ws);
    accepted.push_back(verdict.accepted);
  }
}

template <bool kLogits>
void run(const Chains& c, const std::vector<float>& target, const std::vector<float>& draft,
         const Warp& w, unsigned int threads, std::vector<Token>& emitted,
         std::vector<std::int32_t>& accepted) {
  emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), -7);
  accepted.assign(static_cast<std::size_t>(c.batch()), -7);
  std::vector<float> rows(static_cast<std::size_t>(c.batch() * 2 * c.vocab));
  const backend::cuda_impl::DeviceWarp dw{w.temperature, w.top_k, w.top_p, w.min_p};
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    run_emulated_block(threads, static_cast<unsigned int>(b), [&] {
      kernels::verify_chain_kernel<kLogits, float>({.target = target.data(),
                                                    .target_stride = c.vocab,
                                                    .draft = draft.data(),
                                                    .draft_stride = c.vocab,
                                                    .offsets = c.offsets.data(),
                                                    .tokens = c.tokens.data(),
                                                    .vocab = c.vocab,
                                                    .streams = c.streams.data(),
                                                    .shared_warp = dw,
                                                    .rows_ws = rows.data(),
                                                    .emitted = emitted.data(),
                                                    .accepted = accepted.data()});
    });
  }
}

/// The tokens and accepted counts of the oracle on c's rows warped by w (want) and of the kernel
/// (got) with `threads` threads, from the logits when kLogits, else from the warped rows.
struct Verdicts {
  std::vector<Token> want, got;
  std::vector<std::int32_t> want_acc, got_acc;
};

template <bool kLogits>
Verdicts oracle_and_kernel(const Chains& c, const Warp& w, unsigned int threads) {
  Verdicts v;
  const auto target = warped_rows(c.target, c.vocab, w);
  const auto draft = warped_rows(c.draft, c.vocab, w);
  oracle(c, target, draft, v.want, v.want_acc);
  if constexpr (kLogits) {
    run<true>(c, c.target, c.draft, w, threads, v.got, v.got_acc);
  } else {
    run<false>(c, target, draft, w, threads, v.got, v.got_acc);
  }
  return v;
}

}  // namespace

TEST_CASE("the emulated CUDA chain kernel matches verify_chain on probability rows",
          "[backend][cuda_kernel]") {
  const Warp w{.temperature = 0.9f, .top_p = 0.95f};
  const auto [want, got, want_acc, got_acc] =
      oracle_and_kernel<false>(make(6, 4, 700, w, 5), w, 64);
  CHECK(got_acc == want_acc);
  CHECK(got == want);
  CHECK(std::count(want_acc.begin(), want_acc.end(), 4) > 0);  // a bonus token is drawn
  CHECK(std::count_if(want_acc.begin(), want_acc.end(), [](int a) { return a < 4; }) > 0);
}

TEST_CASE("the emulated CUDA chain kernel warps logits on the fly like warp_logits",
          "[backend][cuda_kernel]") {
  for (const Warp& w : {Warp{}, Warp{.temperature = 0.7f, .top_k = 30}, Warp{.top_p = 0.8f},
                        Warp{.temperature = 0.0f}}) {
    const auto [want, got, want_acc, got_acc] =
        oracle_and_kernel<true>(make(5, 3, 400, w, 8), w, 64);
    CAPTURE(w.temperature, w.top_k, w.top_p);
    CHECK(got_acc == want_acc);
    CHECK(got == want);
  }
}

TEST_CASE("the emulated CUDA chain kernel takes ragged draft counts, zero included",
          "[backend][cuda_kernel]") {
  const Warp w{.temperature = 0.8f, .top_k = 60};
  const auto c = make_ragged({4, 0, 2, 0, 6, 1, 0, 3}, 300, w, 19);
  for (const bool logits : {false, true}) {
    const auto [want, got, want_acc, got_acc] =
        logits ? oracle_and_kernel<true>(c, w, 64) : oracle_and_kernel<false>(c, w, 64);
    CAPTURE(logits);
    CHECK(got_acc == want_acc);
    CHECK(got == want);
    for (const std::size_t b : {1, 3, 6}) CHECK(got_acc[b] == 0);
  }
}

TEST_CASE("the emulated CUDA chain kernel disagrees with the CPU on almost no sequence",
          "[backend][cuda_kernel]") {
  // The kernel sums residuals in another order than the CPU, so a correction token may differ when
  // its threshold falls within rounding of a cumulative sum; over 600 sequences none is expected.
  const Warp w{.temperature = 0.9f};
  const auto [want, got, want_acc, got_acc] =
      oracle_and_kernel<false>(make(600, 4, 1000, w, 77), w, 32);
  int differ = 0;
  for (std::size_t b = 0; b < 600; ++b) {
    differ += got_acc[b] != want_acc[b] ||
              !std::equal(got.begin() + static_cast<std::ptrdiff_t>(b * 5),
                          got.begin() + static_cast<std::ptrdiff_t>(b * 5 + 5),
                          want.begin() + static_cast<std::ptrdiff_t>(b * 5));
  }
  CHECK(differ <= 1);
}

TEST_CASE(
    "a 1024-entry block's sum by a warp and by the whole block is the CPU's block_sum, bit "
    "for bit",
    "[backend][cuda_kernel]") {
  namespace kernels = specdec::backend::cuda_impl::detail;
  static float buf[specdec::detail::kBlockedSumBlock];
  toy::ToyRandom rng(23);
  for (const std::int64_t count : {1024, 924, 15, 8, 7, 1}) {
    // Probabilities of many magnitudes: float sums whose order shows in their last bits.
    std::vector<float> row(static_cast<std::size_t>(count));
    for (float& x : row) x = static_cast<float>(std::pow(rng.uniform(), 6.0) * 1e-3);
    const kernels::TargetRowValue value{row.data()};
    const float cpu = specdec::detail::block_sum(
        [&](std::int64_t i) { return row[static_cast<std::size_t>(i)]; }, 0, count);
    float by_warp = 0.0f, by_block = 0.0f;
    run_emulated_block(kernels::kDrawThreads, 0, [&] {
      const float w = threadIdx.x < 32 ? kernels::warp_block_sum(value, 0, count, buf) : 0.0f;
      if (threadIdx.x == 0) by_warp = w;
      __syncthreads();
      const float b = kernels::block_sum_by_block(value, 0, count, buf);
      if (threadIdx.x == 0) by_block = b;
    });
    CAPTURE(count);
    CHECK(std::memcmp(&by_warp, &cpu, sizeof(float)) == 0);
    CHECK(std::memcmp(&by_block, &cpu, sizeof(float)) == 0);
  }
}
