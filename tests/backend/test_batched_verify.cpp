// SPDX-License-Identifier: MIT
// Batched chain and tree verification against verify_chain / verify_tree per sequence.
#include <Eigen/Core>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/tree.hpp"
#include "support/backends.hpp"
#include "support/stats.hpp"
#include "tree_cases.hpp"

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
#include "specdec/backend/cuda/verify_batch.hpp"
#endif

using namespace specdec;
using namespace specdec::test;

namespace {

struct ChainCase {
  std::vector<std::int32_t> offsets;  // draft offsets, B + 1
  std::int64_t vocab;
  std::vector<float> target, draft;
  std::vector<Token> tokens;
  std::vector<RandomStream> streams;

  std::int64_t batch() const { return static_cast<std::int64_t>(offsets.size()) - 1; }
  std::int64_t drafts() const { return offsets.back(); }
  std::int64_t max_gamma() const {
    std::int64_t largest = 0;
    for (std::size_t b = 0; b + 1 < offsets.size(); ++b)
      largest = std::max<std::int64_t>(largest, offsets[b + 1] - offsets[b]);
    return largest;
  }
};

/// Offsets of B sequences of `gamma` draft tokens each.
std::vector<std::int32_t> uniform(std::int64_t batch, std::int64_t gamma) {
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1));
  uniform_draft_offsets(gamma, offsets);
  return offsets;
}

/// One sequence per entry of `gammas`, draft tokens drawn from their draft rows.
ChainCase make_ragged(const std::vector<std::int64_t>& gammas, std::int64_t vocab,
                      std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  ChainCase c{{0}, vocab, {}, {}, {}, {}};
  for (std::size_t b = 0; b < gammas.size(); ++b) {
    const std::int64_t gamma = gammas[b];
    std::vector<std::vector<float>> drafts;
    for (std::int64_t i = 0; i <= gamma; ++i) drafts.push_back(toy::dirichlet(vocab, 0.5, rng));
    for (std::int64_t i = 0; i <= gamma; ++i) {
      const auto t = near(drafts[static_cast<std::size_t>(i)], rng, 0.3f);
      c.target.insert(c.target.end(), t.begin(), t.end());
    }
    for (std::int64_t i = 0; i < gamma; ++i) {
      const auto& d = drafts[static_cast<std::size_t>(i)];
      c.draft.insert(c.draft.end(), d.begin(), d.end());
      c.tokens.push_back(detail::sample_row(d.data(), vocab, rng.uniform()));
    }
    c.offsets.push_back(c.offsets.back() + static_cast<std::int32_t>(gamma));
    c.streams.push_back(verify_stream(seed, static_cast<std::uint32_t>(b), 17));
  }
  return c;
}

/// B sequences of `gamma` draft tokens each.
ChainCase make_chain(std::int64_t batch, std::int64_t gamma, std::int64_t vocab,
                     std::uint64_t seed) {
  return make_ragged(std::vector<std::int64_t>(static_cast<std::size_t>(batch), gamma), vocab,
                     seed);
}

/// verify_chain(Rejection) per sequence, each sequence's gamma_b + 1 tokens padded with -1.
void chain_oracle(const ChainCase& c, std::vector<Token>& emitted,
                  std::vector<std::int32_t>& accepted) {
  const auto v = static_cast<std::size_t>(c.vocab);
  emitted.assign(static_cast<std::size_t>(c.drafts() + c.batch()), kNoToken);
  accepted.assign(static_cast<std::size_t>(c.batch()), -1);
  Workspace ws;
  for (std::size_t b = 0; b < static_cast<std::size_t>(c.batch()); ++b) {
    const auto first = static_cast<std::size_t>(c.offsets[b]);
    const auto g = static_cast<std::size_t>(c.offsets[b + 1]) - first;
    const auto verdict = verify_chain<float>(
        Rejection{}, std::span<const float>(c.target).subspan((first + b) * v, (g + 1) * v),
        std::span<const float>(c.draft).subspan(first * v, g * v),
        std::span<const Token>(c.tokens).subspan(first, g), c.vocab, c.streams[b],
        std::span<Token>(emitted).subspan(first + b, g + 1), ws);
    accepted[b] = verdict.accepted;
    std::fill(emitted.begin() + static_cast<std::ptrdiff_t>(
                                    first + b + static_cast<std::size_t>(verdict.emitted)),
              emitted.begin() + static_cast<std::ptrdiff_t>(first + b + g + 1), kNoToken);
  }
}

/// verify_chain_batch of c on `backend`, or with `target_only` verify_chain_batch_target_only of
/// its target rows and tokens (its draft rows unused).
template <class Backend>
void run_chain(const Backend& backend, const ChainCase& c, std::vector<Token>& emitted,
               std::vector<std::int32_t>& accepted, bool target_only = false) {
  test::Buffer<Backend, float> target(c.target), draft(c.draft);
  test::Buffer<Backend, Token> tokens(c.tokens);
  const auto outputs = static_cast<std::size_t>(c.drafts() + c.batch());
  test::Buffer<Backend, Token> out(std::vector<Token>(outputs, -7));
  test::Buffer<Backend, std::int32_t> acc(static_cast<std::size_t>(c.batch()));
  test::Scratch<Backend> scratch(workspace_size(
      backend, ChainBatchShape{.batch = c.batch(), .max_gamma = c.max_gamma(), .vocab = c.vocab}));
  ChainBatchArgs args{
      .draft_offsets = c.offsets,
      .target_rows = MatrixView<const float>(target.data(), c.drafts() + c.batch(), c.vocab),
      .draft_rows = MatrixView<const float>(draft.data(), c.drafts(), c.vocab),
      .draft_tokens = std::span<const Token>(tokens.data(), c.tokens.size()),
      .streams = c.streams,
      .emitted = std::span<Token>(out.data(), outputs),
      .accepted = std::span<std::int32_t>(acc.data(), static_cast<std::size_t>(c.batch()))};
  if (target_only) {
    args.draft_rows = {};
    verify_chain_batch_target_only(backend, args, scratch.get());
  } else {
    verify_chain_batch(backend, args, scratch.get());
  }
  emitted = out.to_host();
  accepted = acc.to_host();
}

/// The workspace shape of verify_chain_batch_logits on c.
ChainBatchShape chain_logits_shape(const ChainCase& c) {
  return {.batch = c.batch(), .max_gamma = c.max_gamma(), .vocab = c.vocab, .from_logits = true};
}

/// verify_chain_batch_logits of c's offsets, tokens and streams on `target_logits` and
/// `draft_logits` (c's rows are their warps) with `warps`, in `scratch`.
template <class Backend>
void run_chain_logits(const Backend& backend, const ChainCase& c,
                      const std::vector<float>& target_logits,
                      const std::vector<float>& draft_logits, std::span<const Warp> warps,
                      std::vector<Token>& emitted, std::vector<std::int32_t>& accepted,
                      test::Scratch<Backend>& scratch) {
  test::Buffer<Backend, float> t(target_logits), d(draft_logits);
  test::Buffer<Backend, Token> tok(c.tokens);
  const auto outputs = static_cast<std::size_t>(c.drafts() + c.batch());
  test::Buffer<Backend, Token> out(outputs);
  test::Buffer<Backend, std::int32_t> acc(static_cast<std::size_t>(c.batch()));
  verify_chain_batch_logits(
      backend,
      ChainBatchLogitsArgs<float>{
          .draft_offsets = c.offsets,
          .target_logits = MatrixView<const float>(t.data(), c.drafts() + c.batch(), c.vocab),
          .draft_logits = MatrixView<const float>(d.data(), c.drafts(), c.vocab),
          .warps = warps,
          .draft_tokens = std::span<const Token>(tok.data(), c.tokens.size()),
          .streams = c.streams,
          .emitted = std::span<Token>(out.data(), outputs),
          .accepted = std::span<std::int32_t>(acc.data(), static_cast<std::size_t>(c.batch()))},
      scratch.get());
  emitted = out.to_host();
  accepted = acc.to_host();
}

/// run_chain_logits in a workspace of its own.
template <class Backend>
void run_chain_logits(const Backend& backend, const ChainCase& c,
                      const std::vector<float>& target_logits,
                      const std::vector<float>& draft_logits, std::span<const Warp> warps,
                      std::vector<Token>& emitted, std::vector<std::int32_t>& accepted) {
  test::Scratch<Backend> scratch(workspace_size(backend, chain_logits_shape(c)));
  run_chain_logits(backend, c, target_logits, draft_logits, warps, emitted, accepted, scratch);
}

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
using ChainBackends = std::tuple<backend::Cpu, backend::Cuda>;
#else
using ChainBackends = std::tuple<backend::Cpu>;
#endif

struct ChainRun {
  std::vector<Token> emitted;
  std::vector<std::int32_t> accepted;
};

/// `c` on `backend`, checked against the per-sequence oracle.
template <class Backend>
ChainRun checked_chain_run(const Backend& backend, const ChainCase& c) {
  ChainRun want, got;
  chain_oracle(c, want.emitted, want.accepted);
  run_chain(backend, c, got.emitted, got.accepted);
  CHECK(got.accepted == want.accepted);
  CHECK(got.emitted == want.emitted);
  return got;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("verify_chain_batch equals verify_chain per sequence", "[backend][batched]",
                        ChainBackends) {
  const auto accepted = checked_chain_run(TestType{}, make_chain(13, 5, 300, 11)).accepted;
  // The case exercises rejections, full acceptances and bonus tokens.
  CHECK(std::count(accepted.begin(), accepted.end(), 5) > 0);
  CHECK(std::count_if(accepted.begin(), accepted.end(), [](int a) { return a < 5; }) > 0);
}

TEMPLATE_LIST_TEST_CASE("verify_chain_batch takes ragged draft counts, zero included",
                        "[backend][batched]", ChainBackends) {
  const auto c = make_ragged({3, 0, 5, 1, 0, 0, 7, 2, 4, 0, 6, 1}, 200, 23);
  const auto got = checked_chain_run(TestType{}, c);
  // A sequence without drafts accepts nothing and emits exactly its bonus token.
  for (const std::size_t b : {1, 4, 5, 9}) {
    const auto first = static_cast<std::size_t>(c.offsets[b]) + b;
    CHECK(got.accepted[b] == 0);
    CHECK(got.emitted[first] >= 0);
    CHECK(got.emitted[first] < c.vocab);
  }
  CHECK(std::count_if(got.accepted.begin(), got.accepted.end(), [](int a) { return a >= 2; }) > 0);
}

TEMPLATE_LIST_TEST_CASE("verify_chain_batch of sequences without drafts samples bonus tokens",
                        "[backend][batched]", ChainBackends) {
  CHECK(checked_chain_run(TestType{}, make_ragged({0, 0, 0}, 50, 41)).accepted ==
        std::vector<std::int32_t>{0, 0, 0});
}

TEST_CASE("verify_chain_batch is independent of the thread count", "[backend][batched]") {
  const auto c = make_chain(31, 3, 200, 5);
  std::vector<Token> one, other;
  std::vector<std::int32_t> acc_one, acc_other;
  run_chain(backend::cpu.with_threads(1), c, one, acc_one);
  for (int threads : {2, 3, 8}) {
    run_chain(backend::cpu.with_threads(threads), c, other, acc_other);
    CHECK(other == one);
    CHECK(acc_other == acc_one);
  }
}

namespace {

/// Six sequences of three drafts from logits, each with its own warp, drafts drawn from the
/// warped draft rows (c's rows): the case and its logits.
struct LogitsChainCase {
  ChainCase c;
  std::vector<float> target_logits, draft_logits;
  std::vector<Warp> warps;
};

LogitsChainCase logits_chain_case() {
  const std::int64_t batch = 6, gamma = 3, vocab = 120;
  toy::ToyRandom rng(3);
  std::vector<float> target_logits(static_cast<std::size_t>(batch * (gamma + 1) * vocab));
  std::vector<float> draft_logits(static_cast<std::size_t>(batch * gamma * vocab));
  for (std::size_t i = 0; i < draft_logits.size(); ++i) {
    draft_logits[i] = static_cast<float>(2.0 * rng.normal());
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i <= gamma; ++i) {
      for (std::int64_t x = 0; x < vocab; ++x) {
        const auto from = (b * gamma + std::min(i, gamma - 1)) * vocab + x;
        target_logits[static_cast<std::size_t>((b * (gamma + 1) + i) * vocab + x)] =
            draft_logits[static_cast<std::size_t>(from)] + static_cast<float>(0.5 * rng.normal());
      }
    }
  }
  const std::vector<Warp> warps = {{.temperature = 0.8f},
                                   {.top_k = 20},
                                   {.top_p = 0.9f},
                                   {.temperature = 1.2f, .min_p = 0.05f},
                                   {.temperature = 0.7f, .top_k = 50, .top_p = 0.95f},
                                   {}};
  // Warped rows and draft tokens drawn from them.
  std::vector<float> target(target_logits.size()), draft(draft_logits.size());
  Workspace ws;
  const auto v = static_cast<std::size_t>(vocab);
  for (std::size_t r = 0; r < static_cast<std::size_t>(batch * (gamma + 1)); ++r) {
    warp_logits<float>(warps[r / static_cast<std::size_t>(gamma + 1)],
                       std::span<const float>(target_logits).subspan(r * v, v),
                       std::span<float>(target).subspan(r * v, v), ws);
  }
  std::vector<Token> tokens;
  for (std::size_t r = 0; r < static_cast<std::size_t>(batch * gamma); ++r) {
    warp_logits<float>(warps[r / static_cast<std::size_t>(gamma)],
                       std::span<const float>(draft_logits).subspan(r * v, v),
                       std::span<float>(draft).subspan(r * v, v), ws);
    tokens.push_back(detail::sample_row(draft.data() + r * v, vocab, rng.uniform()));
  }
  ChainCase c{uniform(batch, gamma), vocab, target, draft, tokens, {}};
  for (std::int64_t b = 0; b < batch; ++b) {
    c.streams.push_back(verify_stream(9, static_cast<std::uint32_t>(b), 0));
  }
  return {c, target_logits, draft_logits, warps};
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("verify_chain_batch_logits equals warp_logits then verify_chain",
                        "[backend][batched]", ChainBackends) {
  const LogitsChainCase k = logits_chain_case();
  std::vector<Token> want;
  std::vector<std::int32_t> want_acc;
  chain_oracle(k.c, want, want_acc);

  std::vector<Token> got;
  std::vector<std::int32_t> got_acc;
  run_chain_logits(TestType{}, k.c, k.target_logits, k.draft_logits, k.warps, got, got_acc);
  CHECK(got_acc == want_acc);
  CHECK(got == want);
}

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
TEST_CASE(
    "verify_chain_batch_logits on CUDA with the caller's zeroed counters: the CPU's tokens "
    "call after call, the counters zero after each",
    "[backend][batched]") {
  const LogitsChainCase k = logits_chain_case();
  const ChainCase& c = k.c;
  std::vector<Token> want;
  std::vector<std::int32_t> want_acc;
  chain_oracle(c, want, want_acc);
  const auto cuda = backend::cuda;
  test::Scratch<backend::Cuda> scratch(workspace_size(cuda, chain_logits_shape(c)),
                                       workspace_counters(cuda, chain_logits_shape(c)));
  for (int call = 0; call < 3; ++call) {
    std::vector<Token> got;
    std::vector<std::int32_t> got_acc;
    run_chain_logits(cuda, c, k.target_logits, k.draft_logits, k.warps, got, got_acc, scratch);
    CHECK(got_acc == want_acc);
    CHECK(got == want);
    const std::vector<unsigned int> counters = scratch.counters();
    CHECK(std::all_of(counters.begin(), counters.end(), [](unsigned int w) { return w == 0u; }));
  }
}
#endif

TEMPLATE_LIST_TEST_CASE("verify_chain_batch_logits takes ragged draft counts", "[backend][batched]",
                        ChainBackends) {
  const std::vector<std::int64_t> gammas = {2, 0, 4, 1, 0, 3};
  const std::int64_t vocab = 90;
  auto c = make_ragged(gammas, vocab, 61);
  // Logits whose warp (temperature 1) gives back rows proportional to the case's rows; the oracle
  // verifies the warped rows.
  const Warp warp{.temperature = 1.0f, .top_k = 40};
  std::vector<float> target_logits, draft_logits;
  for (const float x : c.target) target_logits.push_back(std::log(std::max(x, 1e-12f)));
  for (const float x : c.draft) draft_logits.push_back(std::log(std::max(x, 1e-12f)));
  Workspace ws;
  const auto v = static_cast<std::size_t>(vocab);
  for (std::size_t r = 0; r < c.target.size() / v; ++r) {
    warp_logits<float>(warp, std::span<const float>(target_logits).subspan(r * v, v),
                       std::span<float>(c.target).subspan(r * v, v), ws);
  }
  toy::ToyRandom rng(62);
  for (std::size_t r = 0; r < c.draft.size() / v; ++r) {
    warp_logits<float>(warp, std::span<const float>(draft_logits).subspan(r * v, v),
                       std::span<float>(c.draft).subspan(r * v, v), ws);
    c.tokens[r] = detail::sample_row(c.draft.data() + r * v, vocab, rng.uniform());
  }
  std::vector<Token> want;
  std::vector<std::int32_t> want_acc;
  chain_oracle(c, want, want_acc);

  std::vector<Token> got;
  std::vector<std::int32_t> got_acc;
  run_chain_logits(TestType{}, c, target_logits, draft_logits, std::span<const Warp>(&warp, 1), got,
                   got_acc);
  CHECK(got_acc == want_acc);
  CHECK(got == want);
}

TEST_CASE("verify_chain_batch_logits takes bfloat16 logits", "[backend][batched]") {
  const std::int64_t batch = 4, gamma = 2, vocab = 64;
  toy::ToyRandom rng(21);
  std::vector<Eigen::bfloat16> target_logits(static_cast<std::size_t>(batch * (gamma + 1) * vocab));
  std::vector<Eigen::bfloat16> draft_logits(static_cast<std::size_t>(batch * gamma * vocab));
  for (auto& x : target_logits) x = static_cast<Eigen::bfloat16>(static_cast<float>(rng.normal()));
  for (auto& x : draft_logits) x = static_cast<Eigen::bfloat16>(static_cast<float>(rng.normal()));
  const Warp warp{.temperature = 0.9f, .top_p = 0.95f};
  const auto v = static_cast<std::size_t>(vocab);
  std::vector<float> target(target_logits.size()), draft(draft_logits.size());
  Workspace ws;
  for (std::size_t r = 0; r < target.size() / v; ++r) {
    warp_logits<Eigen::bfloat16>(warp,
                                 std::span<const Eigen::bfloat16>(target_logits).subspan(r * v, v),
                                 std::span<float>(target).subspan(r * v, v), ws);
  }
  std::vector<Token> tokens;
  for (std::size_t r = 0; r < draft.size() / v; ++r) {
    warp_logits<Eigen::bfloat16>(warp,
                                 std::span<const Eigen::bfloat16>(draft_logits).subspan(r * v, v),
                                 std::span<float>(draft).subspan(r * v, v), ws);
    tokens.push_back(detail::sample_row(draft.data() + r * v, vocab, rng.uniform()));
  }
  ChainCase c{uniform(batch, gamma), vocab, target, draft, tokens, {}};
  for (std::int64_t b = 0; b < batch; ++b)
    c.streams.push_back(verify_stream(4, 0, static_cast<std::uint32_t>(b)));
  std::vector<Token> want;
  std::vector<std::int32_t> want_acc;
  chain_oracle(c, want, want_acc);
  std::vector<Token> out(static_cast<std::size_t>(batch * (gamma + 1)));
  std::vector<std::int32_t> acc(static_cast<std::size_t>(batch));
  Workspace scratch(workspace_size(
      backend::cpu,
      ChainBatchShape{.batch = batch, .max_gamma = gamma, .vocab = vocab, .from_logits = true}));
  verify_chain_batch_logits(
      backend::cpu.with_threads(2),
      ChainBatchLogitsArgs<Eigen::bfloat16>{.draft_offsets = c.offsets,
                                            .target_logits = MatrixView<const Eigen::bfloat16>(
                                                target_logits.data(), batch * (gamma + 1), vocab),
                                            .draft_logits = MatrixView<const Eigen::bfloat16>(
                                                draft_logits.data(), batch * gamma, vocab),
                                            .warps = std::span<const Warp>(&warp, 1),
                                            .draft_tokens = tokens,
                                            .streams = c.streams,
                                            .emitted = out,
                                            .accepted = acc},
      scratch);
  CHECK(acc == want_acc);
  CHECK(out == want);
}

TEMPLATE_LIST_TEST_CASE("verify_chain_batch first token follows the target", "[backend][batched]",
                        ChainBackends) {
  // B sequences share the rows and differ in their streams; each draws its draft tokens from the
  // draft rows, so the first emitted token of each is a sample of target row 0.
  const std::int64_t batch = 100000, gamma = 2, vocab = 5;
  const std::vector<float> target_row = {0.35f, 0.05f, 0.3f, 0.2f, 0.1f};
  const std::vector<float> draft_row = {0.1f, 0.4f, 0.2f, 0.2f, 0.1f};
  ChainCase c{uniform(batch, gamma), vocab, {}, {}, {}, {}};
  for (std::int64_t b = 0; b < batch; ++b) {
    for (int i = 0; i <= gamma; ++i)
      c.target.insert(c.target.end(), target_row.begin(), target_row.end());
    for (int i = 0; i < gamma; ++i)
      c.draft.insert(c.draft.end(), draft_row.begin(), draft_row.end());
    RandomStream drafting = verify_stream(77, static_cast<std::uint32_t>(b), 0);
    drafting.domain = Domain::kDraft;
    for (std::uint32_t i = 0; i < gamma; ++i) {
      c.tokens.push_back(detail::sample_row(draft_row.data(), vocab, drafting.uniform(i)));
    }
    c.streams.push_back(verify_stream(77, static_cast<std::uint32_t>(b), 0));
  }
  std::vector<Token> emitted;
  std::vector<std::int32_t> accepted;
  run_chain(TestType{}, c, emitted, accepted);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
  for (std::int64_t b = 0; b < batch; ++b)
    ++counts[static_cast<std::size_t>(emitted[static_cast<std::size_t>(b * (gamma + 1))])];
  // False-failure probability: kFalseFailureProbability = 1e-6.
  const auto result = test::chi_square_test(counts, std::span<const float>(target_row));
  CHECK(result.p_value > test::kFalseFailureProbability);
}

TEST_CASE("verify_chain_batch rejects bad input naming the argument", "[backend][batched]") {
  auto c = make_chain(4, 2, 10, 1);
  std::vector<Token> emitted;
  std::vector<std::int32_t> accepted;
  c.tokens[3 * 2 + 1] = 10;
  CHECK_THROWS_WITH(run_chain(backend::cpu, c, emitted, accepted),
                    Catch::Contains("draft_tokens[3][1]: token 10 is outside"));
  c = make_chain(4, 2, 10, 1);
  c.target[(2 * 3 + 1) * 10 + 4] = -0.5f;
  CHECK_THROWS_WITH(run_chain(backend::cpu, c, emitted, accepted),
                    Catch::Contains("target_rows[2][1]"));
  c = make_chain(4, 2, 10, 1);
  c.streams.pop_back();
  CHECK_THROWS_WITH(run_chain(backend::cpu, c, emitted, accepted), Catch::Contains("streams"));
  c = make_chain(4, 2, 10, 1);
  c.draft.resize(c.draft.size() - 10);  // one draft row short
  std::vector<Token> out(12);
  std::vector<std::int32_t> acc(4);
  Workspace ws;
  ChainBatchArgs args{.draft_offsets = c.offsets,
                      .target_rows = MatrixView<const float>(c.target.data(), 12, 10),
                      .draft_rows = MatrixView<const float>(c.draft.data(), 7, 10),
                      .draft_tokens = c.tokens,
                      .streams = c.streams,
                      .emitted = out,
                      .accepted = acc};
  CHECK_THROWS_WITH(verify_chain_batch(backend::cpu, args, ws),
                    Catch::Contains("draft_rows: has 7 rows, expected G = 8"));
  const std::vector<std::int32_t> decreasing = {0, 2, 1, 4, 8};
  args.draft_offsets = decreasing;
  CHECK_THROWS_WITH(verify_chain_batch(backend::cpu, args, ws),
                    Catch::Contains("draft_offsets[2]: 1 is smaller than draft_offsets[1] = 2"));
  const std::vector<Warp> warps = {{.top_p = 1.5f}};
  CHECK_THROWS_WITH(verify_chain_batch_logits(
                        backend::cpu,
                        ChainBatchLogitsArgs<float>{
                            .draft_offsets = c.offsets,
                            .target_logits = MatrixView<const float>(c.target.data(), 12, 10),
                            .draft_logits = MatrixView<const float>(c.draft.data(), 8, 10),
                            .warps = warps,
                            .draft_tokens = c.tokens,
                            .streams = c.streams,
                            .emitted = out,
                            .accepted = acc},
                        ws),
                    Catch::Contains("warps[0].top_p"));
}

// ---- Tree verification ----

namespace {

/// verify_tree_batch of c with `rule`, or with no rule verify_tree_batch_target_only of its trees
/// and target rows (its draft rows unused), in a workspace of `workspace_bytes` (0: the size
/// workspace_size gives).
template <class Backend>
TreeResult run_tree_with(const Backend& backend, const Rule* rule, const TreeCase& c,
                         std::size_t workspace_bytes = 0) {
  const auto batch = static_cast<std::int64_t>(c.offsets.size() - 1);
  const auto rows = static_cast<std::int64_t>(c.tokens.size()) + batch;
  std::int64_t largest = 0;
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b)
    largest = std::max<std::int64_t>(largest, c.offsets[b + 1] - c.offsets[b]);
  test::Buffer<Backend, Token> tokens(c.tokens);
  test::Buffer<Backend, std::int32_t> parents(c.parents);
  test::Buffer<Backend, float> target(c.target), draft(c.draft);
  test::Buffer<Backend, std::int32_t> nodes(std::vector<std::int32_t>(c.tokens.size(), -7));
  test::Buffer<Backend, std::int32_t> accepted(static_cast<std::size_t>(batch));
  test::Buffer<Backend, Token> final_tokens(static_cast<std::size_t>(batch));
  test::Buffer<Backend, std::uint8_t> bonus(static_cast<std::size_t>(batch));
  test::Scratch<Backend> scratch(
      workspace_bytes > 0 ? workspace_bytes
                          : workspace_size(backend, TreeBatchShape{batch, largest, c.vocab}));
  const auto b = static_cast<std::size_t>(batch);
  TreeBatchArgs args{
      .node_offsets = c.offsets,
      .trees = {{tokens.data(), c.tokens.size()}, {parents.data(), c.parents.size()}},
      .target_rows = MatrixView<const float>(target.data(), rows, c.vocab),
      .draft_rows = MatrixView<const float>(draft.data(), rows, c.vocab),
      .streams = c.streams,
      .accepted_nodes = std::span<std::int32_t>(nodes.data(), c.tokens.size()),
      .accepted = std::span<std::int32_t>(accepted.data(), b),
      .final_tokens = std::span<Token>(final_tokens.data(), b),
      .bonus = std::span<std::uint8_t>(bonus.data(), b)};
  if (rule == nullptr) {
    args.draft_rows = {};
    verify_tree_batch_target_only(backend, args, scratch.get());
  } else {
    verify_tree_batch(backend, *rule, args, scratch.get());
  }
  return {nodes.to_host(), accepted.to_host(), final_tokens.to_host(), bonus.to_host()};
}

template <class Backend>
TreeResult run_tree(const Backend& backend, const Rule& rule, const TreeCase& c) {
  return run_tree_with(backend, &rule, c);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("verify_tree_batch equals verify_tree per sequence", "[backend][batched]",
                        ChainBackends) {
  const auto c = make_trees(12, 40, 8);
  for (const Rule& rule : {Rule(Recursive{}), Rule(MultiRound{})}) {
    const auto want = tree_oracle(rule, c);
    const auto got = run_tree(TestType{}, rule, c);
    CHECK(got == want);
    CHECK(std::count(want.bonus.begin(), want.bonus.end(), 1) > 0);
    CHECK(std::count(want.bonus.begin(), want.bonus.end(), 0) > 0);
  }
}

TEMPLATE_LIST_TEST_CASE("verify_tree_batch with Rejection walks chains like verify_tree",
                        "[backend][batched]", ChainBackends) {
  toy::ToyRandom rng(21);
  TreeCase c;
  c.vocab = 30;
  for (std::uint32_t b = 0; b < 12; ++b) add_tree(c, 4, 1, rng, verify_stream(21, b, 2));
  CHECK(run_tree(TestType{}, Rejection{}, c) == tree_oracle(Rejection{}, c));
}

TEMPLATE_LIST_TEST_CASE("verify_tree_batch takes trees without nodes", "[backend][batched]",
                        ChainBackends) {
  toy::ToyRandom rng(5);
  TreeCase c;
  c.vocab = 40;
  // Trees 0, 2 and 4 have no nodes: such a tree samples its bonus token from its root row.
  for (std::uint32_t b = 0; b < 5; ++b)
    add_tree(c, b % 2 == 1 ? 3 : 0, 3, rng, verify_stream(8, b, 4));
  REQUIRE(c.offsets[0] == c.offsets[1]);
  REQUIRE(c.offsets[1] < c.offsets[2]);
  REQUIRE(c.offsets[2] == c.offsets[3]);
  REQUIRE(c.offsets[3] < c.offsets[4]);
  REQUIRE(c.offsets[4] == c.offsets[5]);
  for (const Rule& rule : {Rule(Recursive{}), Rule(MultiRound{})}) {
    const auto want = tree_oracle(rule, c);
    const auto got = run_tree(TestType{}, rule, c);
    CHECK(got == want);
    for (const std::size_t b : {0, 2, 4}) {
      CHECK(got.accepted[b] == 0);
      CHECK(got.bonus[b] == 1);
    }
  }
}

TEST_CASE("verify_tree_batch is independent of the thread count", "[backend][batched]") {
  const auto c = make_trees(25, 30, 2);
  const auto one = run_tree(backend::cpu.with_threads(1), Recursive{}, c);
  CHECK(run_tree(backend::cpu.with_threads(2), Recursive{}, c) == one);
  CHECK(run_tree(backend::cpu.with_threads(5), Recursive{}, c) == one);
}

namespace {

/// One-level trees of two children drawn from the draft row (without replacement for RRS, i.i.d.
/// for multi-round), one per sequence, all with the same rows; returns the first emitted token of
/// each (the accepted child or the correction), a sample of the root's target row.
template <class Backend>
std::vector<std::int64_t> first_token_counts(const Backend& backend, const Rule& rule,
                                             const std::vector<float>& target_row,
                                             const std::vector<float>& draft_row,
                                             std::int64_t batch) {
  const auto vocab = static_cast<std::int64_t>(target_row.size());
  TreeCase c;
  c.vocab = vocab;
  Workspace ws;
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto stream = verify_stream(31, static_cast<std::uint32_t>(b), 0);
    RandomStream drafting = stream;
    drafting.domain = Domain::kDraft;
    Token kids[2];
    if (draws_without_replacement(rule)) {
      gumbel_top_k_probabilities<float>(draft_row, 2, drafting, kids, ws);
    } else {
      for (std::uint32_t k = 0; k < 2; ++k)
        kids[k] = detail::sample_row(draft_row.data(), vocab, drafting.uniform(k));
    }
    c.tokens.insert(c.tokens.end(), kids, kids + 2);
    c.parents.insert(c.parents.end(), {-1, -1});
    for (int r = 0; r < 3; ++r) {
      c.target.insert(c.target.end(), target_row.begin(), target_row.end());
      c.draft.insert(c.draft.end(), draft_row.begin(), draft_row.end());
    }
    c.offsets.push_back(c.offsets.back() + 2);
    c.streams.push_back(stream);
  }
  const auto r = run_tree(backend, rule, c);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto bb = static_cast<std::size_t>(b);
    const Token first = r.accepted[bb] > 0
                            ? c.tokens[2 * bb + static_cast<std::size_t>(r.accepted_nodes[2 * bb])]
                            : r.final_tokens[bb];
    ++counts[static_cast<std::size_t>(first)];
  }
  return counts;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("verify_tree_batch first token follows the target", "[backend][batched]",
                        ChainBackends) {
  const std::vector<float> target_row = {0.35f, 0.05f, 0.3f, 0.2f, 0.1f};
  const std::vector<float> draft_row = {0.1f, 0.4f, 0.2f, 0.2f, 0.1f};
  for (const Rule& rule : {Rule(Recursive{}), Rule(MultiRound{})}) {
    const auto counts = first_token_counts(TestType{}, rule, target_row, draft_row, 100000);
    // False-failure probability: kFalseFailureProbability = 1e-6 per rule.
    const auto result = test::chi_square_test(counts, std::span<const float>(target_row));
    CHECK(result.p_value > test::kFalseFailureProbability);
  }
}

TEST_CASE("verify_tree_batch rejects bad input naming the argument", "[backend][batched]") {
  auto c = make_trees(4, 20, 3);
  const auto third = static_cast<std::size_t>(c.offsets[3]);
  REQUIRE(c.offsets[4] > c.offsets[3]);
  c.tokens[third] = 25;
  CHECK_THROWS_WITH(run_tree(backend::cpu, Recursive{}, c),
                    Catch::Contains("tokens[3][0]: token 25"));
  c = make_trees(4, 20, 3);
  c.offsets[2] = c.offsets[1] - 1;
  CHECK_THROWS_WITH(run_tree(backend::cpu, Recursive{}, c), Catch::Contains("node_offsets[2]"));
  c = make_trees(4, 20, 3);
  c.streams.resize(3);
  CHECK_THROWS_WITH(run_tree(backend::cpu, Recursive{}, c), Catch::Contains("streams"));
}

#if defined(SPECDEC_HAS_CUDA) && SPECDEC_HAS_CUDA
TEST_CASE("CUDA verify_tree_batch rejects a rule it does not implement and a small workspace",
          "[backend][batched]") {
  const auto c = make_trees(3, 20, 3);
  CHECK_THROWS_WITH(run_tree(backend::cuda, Greedy{}, c),
                    Catch::Contains("rule: the CUDA backend verifies trees with Recursive"));
  const Rule recursive = Recursive{};
  CHECK_THROWS_WITH(run_tree_with(backend::cuda, &recursive, c, 64),
                    Catch::Contains("workspace: holds 64 bytes"));
}
#endif

namespace {

/// verify_tree_batch_target_only of c's trees and target rows (its draft rows unused).
template <class Backend>
TreeResult run_tree_target_only(const Backend& backend, const TreeCase& c) {
  return run_tree_with(backend, nullptr, c);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE(
    "verify_chain_batch_target_only equals verify_chain_target_only per "
    "sequence",
    "[backend][batched][target_only]", ChainBackends) {
  const auto c = make_ragged({3, 0, 5, 1}, 300, 31);
  std::vector<Token> emitted;
  std::vector<std::int32_t> accepted;
  run_chain(TestType{}, c, emitted, accepted, /*target_only=*/true);
  Workspace ws;
  const auto v = static_cast<std::size_t>(c.vocab);
  for (std::size_t b = 0; b < 4; ++b) {
    const auto first = static_cast<std::size_t>(c.offsets[b]);
    const auto g = static_cast<std::size_t>(c.offsets[b + 1]) - first;
    std::vector<Token> want(g + 1, kNoToken);
    const auto verdict = verify_chain_target_only<float>(
        std::span<const float>(c.target).subspan((first + b) * v, (g + 1) * v),
        std::span<const Token>(c.tokens).subspan(first, g), c.vocab, c.streams[b], want, ws);
    std::fill(want.begin() + verdict.emitted, want.end(), kNoToken);
    CHECK(accepted[b] == verdict.accepted);
    CHECK(std::vector<Token>(emitted.begin() + static_cast<std::ptrdiff_t>(first + b),
                             emitted.begin() + static_cast<std::ptrdiff_t>(first + b + g + 1)) ==
          want);
  }
}

TEMPLATE_LIST_TEST_CASE("verify_tree_batch_target_only equals verify_tree_target_only per tree",
                        "[backend][batched][target_only]", ChainBackends) {
  const auto c = make_trees(12, 40, 8);
  const auto got = run_tree_target_only(TestType{}, c);
  Workspace ws;
  const auto v = static_cast<std::size_t>(c.vocab);
  int walked = 0;
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b) {
    const auto begin = static_cast<std::size_t>(c.offsets[b]);
    const auto n = static_cast<std::size_t>(c.offsets[b + 1]) - begin;
    std::vector<std::int32_t> nodes(n);
    const auto want = verify_tree_target_only<float>(
        c.view().subtree(begin, n),
        std::span<const float>(c.target).subspan((begin + b) * v, (n + 1) * v), c.vocab,
        c.streams[b], nodes, ws);
    CHECK(got.accepted[b] == want.accepted);
    CHECK(got.final_tokens[b] == want.token);
    CHECK(got.bonus[b] == (want.bonus ? 1 : 0));
    for (std::int32_t i = 0; i < want.accepted; ++i)
      CHECK(got.accepted_nodes[begin + static_cast<std::size_t>(i)] ==
            nodes[static_cast<std::size_t>(i)]);
    walked += want.accepted;
  }
  CHECK(walked > 0);
}
