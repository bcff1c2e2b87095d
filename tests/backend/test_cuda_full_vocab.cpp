// SPDX-License-Identifier: MIT
// The CUDA backend on a GPU at real vocabulary sizes (V = 32000 and 128256), where rows are split
// over many blocks: chain verification, warps and Gumbel-top-k against the CPU backend bit for
// bit, and a captured CUDA graph replayed on new inputs against a fresh call. Built only with the
// CUDA backend; skipped where no GPU is present.
#include <cuda_runtime_api.h>

#include <Eigen/Core>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"
#include "specdec/backend/cuda/draft_batch.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/verify/residual_walk.hpp"
#include "specdec/toy/random.hpp"
#include "support/backends.hpp"

using namespace specdec;

namespace {

using test::Buffer;
using test::Scratch;

/// B chains of gamma drafts over V from logits of type T: draft logits of spread `scale`, target
/// logits the draft's plus noise (so some positions reject), draft tokens drawn from the CPU's
/// warped draft rows.
template <class T>
struct FullVocabChain {
  FullVocabChain(std::int64_t batch_, std::int64_t gamma_, std::int64_t vocab_, float scale,
                 const Warp& warp_, std::uint64_t seed)
      : batch(batch_), gamma(gamma_), vocab(vocab_), warp(warp_) {
    toy::ToyRandom rng(seed);
    const auto v = static_cast<std::size_t>(vocab);
    std::vector<float> draft_values(static_cast<std::size_t>(batch * gamma) * v);
    for (auto& x : draft_values) x = static_cast<float>(scale * rng.normal());
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t i = 0; i <= gamma; ++i) {
        const auto from = static_cast<std::size_t>(b * gamma + std::min(i, gamma - 1)) * v;
        for (std::size_t x = 0; x < v; ++x)
          target.push_back(T(draft_values[from + x] + static_cast<float>(0.7 * rng.normal())));
      }
    }
    for (const float x : draft_values) draft.push_back(T(x));
    std::vector<float> warped(draft_values.size());
    Workspace ws;
    const auto rows = batch * gamma;
    warp_logits_batch(backend::cpu, MatrixView<const T>(draft.data(), rows, vocab),
                      std::span<const Warp>(&this->warp, 1),
                      MatrixView<float>(warped.data(), rows, vocab), ws);
    for (std::int64_t r = 0; r < rows; ++r)
      tokens.push_back(detail::sample_row(warped.data() + r * vocab, vocab, rng.uniform()));
    offsets.resize(static_cast<std::size_t>(batch + 1));
    uniform_draft_offsets(gamma, offsets);
    for (std::int64_t b = 0; b < batch; ++b) {
      streams.push_back(RandomStream{.seed = seed,
                                     .sequence = static_cast<std::uint32_t>(b),
                                     .position = 3,
                                     .domain = Domain::kVerify});
    }
  }

  std::int64_t batch, gamma, vocab;
  Warp warp;
  std::vector<T> target, draft;
  std::vector<Token> tokens;
  std::vector<std::int32_t> offsets;
  std::vector<RandomStream> streams;
};

struct FullVocabResult {
  std::vector<Token> emitted;
  std::vector<std::int32_t> accepted;
};

template <class Backend, class T>
FullVocabResult run_full_vocab_chain(const FullVocabChain<T>& c) {
  const Backend backend{};
  Buffer<Backend, T> target(c.target), draft(c.draft);
  Buffer<Backend, Token> tokens(c.tokens);
  Buffer<Backend, Token> emitted(static_cast<std::size_t>(c.batch * (c.gamma + 1)));
  Buffer<Backend, std::int32_t> accepted(static_cast<std::size_t>(c.batch));
  Scratch<Backend> scratch(workspace_size(
      backend, ChainBatchShape{
                   .batch = c.batch, .max_gamma = c.gamma, .vocab = c.vocab, .from_logits = true}));
  verify_chain_batch_logits(
      backend,
      ChainBatchLogitsArgs<T>{
          .draft_offsets = c.offsets,
          .target_logits = MatrixView<const T>(target.data(), c.batch * (c.gamma + 1), c.vocab),
          .draft_logits = MatrixView<const T>(draft.data(), c.batch * c.gamma, c.vocab),
          .warps = std::span<const Warp>(&c.warp, 1),
          .draft_tokens = std::span<const Token>(tokens.data(), c.tokens.size()),
          .streams = c.streams,
          .emitted = std::span<Token>(emitted.data(), static_cast<std::size_t>(c.batch * (c.gamma + 1))),
          .accepted = std::span<std::int32_t>(accepted.data(), static_cast<std::size_t>(c.batch))},
      scratch.get());
  return {emitted.to_host(), accepted.to_host()};
}

const Warp kFullVocabWarps[] = {{.temperature = 0.8f},
                       {.temperature = 0.0f},
                       {.temperature = 0.8f, .top_p = 0.9f},
                       {.temperature = 1.0f, .top_p = 0.5f},
                       {.temperature = 0.8f, .top_k = 50},
                       {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f},
                       {.temperature = 1.0f, .min_p = 0.05f},
                       {.temperature = 0.9f, .top_p = 0.95f, .min_p = 0.02f},
                       {.temperature = 1.0f, .top_k = 2000}};

/// Whether the CUDA backend gives warp's rows bit for bit (the statistics path takes it): all
/// but a top-k above 1024 (the one-block-per-row kernel, equal to float rounding).
bool exact_on_cuda(const Warp& w, std::int64_t vocab) {
  return w.top_k <= 1024 || w.top_k >= vocab;
}

}  // namespace

TEMPLATE_TEST_CASE("CUDA chain from logits at full vocabularies gives the CPU's tokens",
                   "[backend][cuda_full_vocab]", float, Eigen::bfloat16) {
  // Warps the statistics path takes are bit for bit by construction; a top-k above 1024 equal
  // too unless a cut falls within rounding of a boundary, which these random rows do not
  // construct.
  int rejected = 0;
  for (const std::int64_t vocab : {32000, 128256}) {
    for (const std::int64_t batch : {1, 4}) {
      for (const float scale : {2.0f, 6.0f}) {
        for (const Warp& warp : kFullVocabWarps) {
          const FullVocabChain<TestType> c(batch, 5, vocab, scale, warp,
                                           static_cast<std::uint64_t>(vocab + batch));
          const FullVocabResult want = run_full_vocab_chain<backend::Cpu>(c);
          const FullVocabResult got = run_full_vocab_chain<backend::Cuda>(c);
          INFO("V = " << vocab << ", B = " << batch << ", scale " << scale << ", temperature "
                      << warp.temperature << ", top-k " << warp.top_k << ", top-p " << warp.top_p
                      << ", min-p " << warp.min_p);
          CHECK(got.accepted == want.accepted);
          CHECK(got.emitted == want.emitted);
          for (const std::int32_t a : want.accepted) rejected += a < 5 ? 1 : 0;
        }
      }
    }
  }
  CHECK(rejected > 0);  // the residual draws ran, not only bonus draws
}

TEMPLATE_TEST_CASE("CUDA warps at full vocabularies give the CPU's rows",
                   "[backend][cuda_full_vocab]", float, Eigen::bfloat16) {
  const std::int64_t rows = 3;
  for (const std::int64_t vocab : {32000, 128256}) {
    toy::ToyRandom rng(static_cast<std::uint64_t>(vocab));
    std::vector<TestType> logits(static_cast<std::size_t>(rows * vocab));
    for (auto& x : logits) x = TestType(static_cast<float>(3.0 * rng.normal()));
    for (const Warp& warp : kFullVocabWarps) {
      INFO("V = " << vocab << ", temperature " << warp.temperature << ", top-k " << warp.top_k
                  << ", top-p " << warp.top_p << ", min-p " << warp.min_p);
      std::vector<float> want(logits.size());
      Workspace ws;
      warp_logits_batch(backend::cpu, MatrixView<const TestType>(logits.data(), rows, vocab),
                        std::span<const Warp>(&warp, 1),
                        MatrixView<float>(want.data(), rows, vocab), ws);
      Buffer<backend::Cuda, TestType> device(logits);
      Buffer<backend::Cuda, float> warped(logits.size());
      Scratch<backend::Cuda> scratch(
          workspace_size(backend::cuda, WarpBatchShape{.rows = rows, .vocab = vocab}));
      warp_logits_batch(backend::cuda, MatrixView<const TestType>(device.data(), rows, vocab),
                        std::span<const Warp>(&warp, 1),
                        MatrixView<float>(warped.data(), rows, vocab), scratch.get());
      const std::vector<float> got = warped.to_host();
      const bool exact = exact_on_cuda(warp, vocab);
      std::size_t differing = 0, support = 0;
      float largest = 0.0f;
      for (std::size_t i = 0; i < got.size(); ++i) {
        differing += got[i] != want[i] ? 1 : 0;
        support += (got[i] > 0.0f) != (want[i] > 0.0f) ? 1 : 0;
        largest = std::max(largest, std::abs(got[i] - want[i]));
      }
      INFO(differing << " entries differ, by at most " << largest);
      CHECK(support == 0);
      if (exact) CHECK(differing == 0);
      else CHECK(largest <= 1e-6f);
    }
  }
}

TEMPLATE_TEST_CASE("CUDA Gumbel-top-k at full vocabularies gives the CPU's samples, values to "
                   "rounding",
                   "[backend][cuda_full_vocab]", float, Eigen::bfloat16) {
  const std::int64_t rows = 3, k = 8;
  for (const std::int64_t vocab : {32000, 128256}) {
    toy::ToyRandom rng(static_cast<std::uint64_t>(vocab) + 1);
    std::vector<TestType> logits(static_cast<std::size_t>(rows * vocab));
    for (auto& x : logits) x = TestType(static_cast<float>(3.0 * rng.normal()));
    std::vector<RandomStream> streams;
    for (std::int64_t r = 0; r < rows; ++r) {
      streams.push_back(RandomStream{
          .seed = 17, .sequence = static_cast<std::uint32_t>(r), .domain = Domain::kDraft});
    }
    auto run = [&]<class Backend>(const Backend& backend) {
      Buffer<Backend, TestType> device(logits);
      Buffer<Backend, Token> tokens(static_cast<std::size_t>(rows * k));
      Buffer<Backend, float> values(static_cast<std::size_t>(rows * k));
      Buffer<Backend, std::int32_t> counts(static_cast<std::size_t>(rows));
      Scratch<Backend> scratch(
          workspace_size(backend, GumbelTopKBatchShape{.rows = rows, .vocab = vocab, .k = k}));
      gumbel_top_k_batch(
          backend,
          GumbelTopKBatchArgs<TestType>{
              .kind = RowKind::kLogWeights,
              .rows = MatrixView<const TestType>(device.data(), rows, vocab),
              .k = k,
              .streams = streams,
              .tokens = MatrixView<Token>(tokens.data(), rows, k),
              .values = MatrixView<float>(values.data(), rows, k),
              .counts = std::span<std::int32_t>(counts.data(), static_cast<std::size_t>(rows))},
          scratch.get());
      return std::make_tuple(tokens.to_host(), values.to_host(), counts.to_host());
    };
    INFO("V = " << vocab);
    const auto want = run(backend::cpu);
    const auto got = run(backend::cuda);
    CHECK(std::get<0>(got) == std::get<0>(want));
    CHECK(std::get<2>(got) == std::get<2>(want));
    // The perturbed values are bit for bit only where the host code fuses multiply-adds as the
    // device does (docs/backends.md); otherwise they agree to the last bits.
    const auto& values = std::get<1>(got);
    for (std::size_t j = 0; j < values.size(); ++j)
      CHECK(values[j] == Approx(std::get<1>(want)[j]).epsilon(1e-6));
  }
}

TEST_CASE("CUDA chain from logits captured in a graph and replayed on new inputs equals a fresh "
          "call",
          "[backend][cuda_full_vocab][graph]") {
  const std::int64_t batch = 4, gamma = 5, vocab = 32000;
  for (const Warp& warp : {Warp{.temperature = 0.8f}, Warp{.temperature = 0.8f, .top_p = 0.9f}}) {
    const FullVocabChain<float> first(batch, gamma, vocab, 3.0f, warp, 101);
    const FullVocabChain<float> second(batch, gamma, vocab, 3.0f, warp, 202);
    Buffer<backend::Cuda, float> target(first.target), draft(first.draft);
    Buffer<backend::Cuda, Token> tokens(first.tokens);
    Buffer<backend::Cuda, std::int32_t> offsets(first.offsets);
    Buffer<backend::Cuda, RandomStream> streams(first.streams);
    Buffer<backend::Cuda, Token> emitted(static_cast<std::size_t>(batch * (gamma + 1)));
    Buffer<backend::Cuda, std::int32_t> accepted(static_cast<std::size_t>(batch));
    const std::size_t bytes = workspace_size(
        backend::cuda,
        ChainBatchShape{.batch = batch, .max_gamma = gamma, .vocab = vocab, .from_logits = true});
    Scratch<backend::Cuda> scratch(bytes);
    cudaStream_t stream = nullptr;
    REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
    const ChainBatchLogitsArgs<float> args{
        .draft_offsets = on_device(offsets.data(), static_cast<std::size_t>(batch) + 1),
        .target_logits = MatrixView<const float>(target.data(), batch * (gamma + 1), vocab),
        .draft_logits = MatrixView<const float>(draft.data(), batch * gamma, vocab),
        .warps = std::span<const Warp>(&warp, 1),
        .draft_tokens = std::span<const Token>(tokens.data(), first.tokens.size()),
        .streams = on_device(streams.data(), static_cast<std::size_t>(batch)),
        .emitted = std::span<Token>(emitted.data(), static_cast<std::size_t>(batch * (gamma + 1))),
        .accepted = std::span<std::int32_t>(accepted.data(), static_cast<std::size_t>(batch))};
    REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
    verify_chain_batch_logits(backend::cuda.on(stream), args, scratch.get());
    cudaGraph_t graph = nullptr;
    REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
    for (const FullVocabChain<float>* c : {&first, &second, &first}) {
      auto put = [&](auto& buffer, const auto& host) {
        REQUIRE(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(host[0]),
                           cudaMemcpyHostToDevice) == cudaSuccess);
      };
      put(target, c->target);
      put(draft, c->draft);
      put(tokens, c->tokens);
      put(streams, c->streams);
      REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
      REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
      const FullVocabResult want = run_full_vocab_chain<backend::Cuda>(*c);
      CHECK(emitted.to_host() == want.emitted);
      CHECK(accepted.to_host() == want.accepted);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

TEST_CASE("CUDA chain from logits with per-sequence warps in device memory gives the CPU's tokens",
          "[backend][cuda_full_vocab]") {
  // Offsets, streams and warps in device memory (nothing copied from the host), one warp per
  // sequence; a sequence whose warp the statistics path does not take (a top-k above 1024)
  // reports -1.
  const std::int64_t gamma = 5, vocab = 32000;
  const std::vector<Warp> warps{Warp{.temperature = 0.8f}, Warp{.temperature = 1.0f, .top_p = 0.9f},
                                Warp{.temperature = 0.0f},
                                Warp{.temperature = 1.0f, .top_k = 50, .top_p = 0.9f},
                                Warp{.temperature = 1.0f, .top_k = 2000}};
  const auto batch = static_cast<std::int64_t>(warps.size());
  std::vector<FullVocabChain<float>> sequences;
  for (std::int64_t b = 0; b < batch; ++b) {
    sequences.emplace_back(1, gamma, vocab, 3.0f, warps[static_cast<std::size_t>(b)],
                           static_cast<std::uint64_t>(300 + b));
  }
  FullVocabChain<float> all = sequences[0];
  all.batch = batch;
  all.target.clear();
  all.draft.clear();
  all.tokens.clear();
  all.streams.clear();
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto& s = sequences[static_cast<std::size_t>(b)];
    all.target.insert(all.target.end(), s.target.begin(), s.target.end());
    all.draft.insert(all.draft.end(), s.draft.begin(), s.draft.end());
    all.tokens.insert(all.tokens.end(), s.tokens.begin(), s.tokens.end());
    RandomStream stream = s.streams[0];
    stream.sequence = static_cast<std::uint32_t>(b);
    all.streams.push_back(stream);
  }
  all.offsets.resize(static_cast<std::size_t>(batch + 1));
  uniform_draft_offsets(gamma, all.offsets);
  const auto rows = static_cast<std::size_t>(batch * (gamma + 1));
  std::vector<Token> want_emitted(rows);
  std::vector<std::int32_t> want_accepted(static_cast<std::size_t>(batch));
  Workspace ws(workspace_size(backend::cpu, ChainBatchShape{.batch = batch, .max_gamma = gamma,
                                                            .vocab = vocab, .from_logits = true}));
  verify_chain_batch_logits(
      backend::cpu,
      ChainBatchLogitsArgs<float>{
          .draft_offsets = all.offsets,
          .target_logits = MatrixView<const float>(all.target.data(), batch * (gamma + 1), vocab),
          .draft_logits = MatrixView<const float>(all.draft.data(), batch * gamma, vocab),
          .warps = warps,
          .draft_tokens = all.tokens,
          .streams = all.streams,
          .emitted = want_emitted,
          .accepted = want_accepted},
      ws);
  Buffer<backend::Cuda, float> target(all.target), draft(all.draft);
  Buffer<backend::Cuda, Token> tokens(all.tokens);
  Buffer<backend::Cuda, std::int32_t> offsets(all.offsets);
  Buffer<backend::Cuda, RandomStream> streams(all.streams);
  Buffer<backend::Cuda, Warp> device_warps(warps);
  Buffer<backend::Cuda, Token> emitted(rows);
  Buffer<backend::Cuda, std::int32_t> accepted(static_cast<std::size_t>(batch));
  Scratch<backend::Cuda> scratch(workspace_size(
      backend::cuda,
      ChainBatchShape{.batch = batch, .max_gamma = gamma, .vocab = vocab, .from_logits = true}));
  verify_chain_batch_logits(
      backend::cuda,
      ChainBatchLogitsArgs<float>{
          .draft_offsets = on_device(offsets.data(), static_cast<std::size_t>(batch) + 1),
          .target_logits = MatrixView<const float>(target.data(), batch * (gamma + 1), vocab),
          .draft_logits = MatrixView<const float>(draft.data(), batch * gamma, vocab),
          .warps = on_device(device_warps.data(), static_cast<std::size_t>(batch)),
          .draft_tokens = std::span<const Token>(tokens.data(), all.tokens.size()),
          .streams = on_device(streams.data(), static_cast<std::size_t>(batch)),
          .emitted = std::span<Token>(emitted.data(), rows),
          .accepted = std::span<std::int32_t>(accepted.data(), static_cast<std::size_t>(batch))},
      scratch.get());
  const std::vector<Token> got_emitted = emitted.to_host();
  const std::vector<std::int32_t> got_accepted = accepted.to_host();
  for (std::size_t b = 0; b < 4; ++b) {
    CHECK(got_accepted[b] == want_accepted[b]);
    for (std::size_t j = 0; j <= static_cast<std::size_t>(gamma); ++j) {
      const std::size_t at = b * static_cast<std::size_t>(gamma + 1) + j;
      CHECK(got_emitted[at] == want_emitted[at]);
    }
  }
  CHECK(got_accepted[4] == -1);  // top-k 2000: not on the statistics path
}
