// SPDX-License-Identifier: MIT
// Per-sequence status codes (backend/status.hpp): each cause reported by the CUDA launchers and
// kernels (run on the host through the emulated runtime) and by the CPU backend when asked to,
// with the same codes and the same failed outputs (accepted = -1, -1 tokens).
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/status.hpp"

using namespace specdec;
namespace cuda_impl = specdec::backend::cuda_impl;
using Codes = std::vector<std::int32_t>;

namespace {

constexpr std::int64_t kVocab = 8;

std::vector<RandomStream> status_streams(std::size_t batch) {
  std::vector<RandomStream> out(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    out[b].seed = 17;
    out[b].sequence = static_cast<std::uint32_t>(b);
    out[b].domain = Domain::kVerify;
  }
  return out;
}

/// `rows` uniform target rows, or draft rows putting no mass on token 0.
std::vector<float> status_rows(std::int64_t rows, bool draft) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < kVocab; ++i) {
      out.push_back(draft ? (i == 0 ? 0.0f : 1.0f / (kVocab - 1)) : 1.0f / kVocab);
    }
  }
  return out;
}

/// A chain batch of three sequences of two drafts: the first verifies, the second has a token
/// outside the vocabulary, the third a first token of draft probability 0.
struct StatusChain {
  std::vector<std::int32_t> offsets{0, 2, 4, 6};
  std::vector<Token> tokens{1, 2, 3, static_cast<Token>(kVocab), 0, 1};
  std::vector<float> target = status_rows(9, false);
  std::vector<float> draft = status_rows(6, true);
  std::vector<RandomStream> streams = status_streams(3);
  std::vector<Token> emitted = std::vector<Token>(9, 99);
  std::vector<std::int32_t> accepted = std::vector<std::int32_t>(3, 99);
  Codes status = Codes(4, 99);

  ChainBatchArgs args() {
    return {.draft_offsets = offsets,
            .target_rows = {target.data(), 9, kVocab},
            .draft_rows = {draft.data(), 6, kVocab},
            .draft_tokens = tokens,
            .streams = streams,
            .emitted = emitted,
            .accepted = accepted,
            .status = status};
  }

  /// The CUDA launchers' view of the same batch (`with_draft` false: target-only).
  cuda_impl::ChainVerifyParams params(bool with_draft) {
    return {.target = target.data(),
            .target_stride = kVocab,
            .draft = with_draft ? draft.data() : nullptr,
            .draft_stride = with_draft ? kVocab : 0,
            .dtype = cuda_impl::DType::kF32,
            .batch = 3,
            .vocab = kVocab,
            .drafts = 6,
            .draft_offsets = offsets,
            .draft_tokens = tokens.data(),
            .streams = streams,
            .emitted = emitted.data(),
            .accepted = accepted.data(),
            .status = status.data()};
  }
};

const Codes kChainCodes{0, 1, 2, 2};

void check_failed_chain(const StatusChain& c, std::size_t b) {
  CHECK(c.accepted[b] == -1);
  for (std::int32_t i = c.offsets[b]; i <= c.offsets[b + 1]; ++i)
    CHECK(c.emitted[static_cast<std::size_t>(i) + b] == kNoToken);
}

}  // namespace

TEST_CASE("the CPU chain batch reports a bad token and a zero draft probability as status codes",
          "[backend][status]") {
  StatusChain c;
  Workspace ws;
  verify_chain_batch(backend::cpu, c.args(), ws);
  CHECK(c.status == kChainCodes);
  CHECK(c.accepted[0] >= 0);
  check_failed_chain(c, 1);
  check_failed_chain(c, 2);
}

TEST_CASE("without a status buffer the CPU chain batch still throws", "[backend][status]") {
  StatusChain c;
  Workspace ws;
  auto args = c.args();
  args.status = {};
  CHECK_THROWS_WITH(verify_chain_batch(backend::cpu, args, ws),
                    Catch::Contains("draft_tokens[1][1]"));
}

TEST_CASE("the CUDA chain launcher writes the CPU's status codes and outputs",
          "[backend][status][cuda_kernel]") {
  StatusChain cpu, cuda;
  Workspace ws;
  verify_chain_batch(backend::cpu, cpu.args(), ws);
  std::vector<unsigned char> workspace(cuda_impl::chain_workspace_size(3));
  REQUIRE(cuda_impl::verify_chain_batch(cuda.params(true), workspace.data(), nullptr) ==
          cudaSuccess);
  CHECK(cuda.status == kChainCodes);
  CHECK(cuda.accepted == cpu.accepted);
  CHECK(cuda.emitted == cpu.emitted);
}

TEST_CASE("chain batches from logits report a bad row and a bad warp on both backends",
          "[backend][status][cuda_kernel]") {
  // One draft each: sequence 1's first target row holds a NaN, sequence 2's warp a negative
  // temperature.
  const std::vector<std::int32_t> offsets{0, 1, 2, 3};
  const std::vector<Token> tokens{1, 2, 3};
  std::vector<float> target(6 * kVocab, 0.0f), draft(3 * kVocab, 0.0f);
  target[2 * kVocab + 4] = std::numeric_limits<float>::quiet_NaN();  // row offsets[1] + 1
  const std::vector<Warp> warps{Warp{}, Warp{}, Warp{.temperature = -1.0f}};
  const auto streams = status_streams(3);
  const Codes want{0, 5, 3, 2};

  std::vector<Token> emitted(6, 99);
  std::vector<std::int32_t> accepted(3, 99);
  Codes status(4, 99);
  Workspace ws;
  verify_chain_batch_logits<backend::Cpu, float>(
      backend::cpu,
      ChainBatchLogitsArgs<float>{.draft_offsets = offsets,
                                  .target_logits = {target.data(), 6, kVocab},
                                  .draft_logits = {draft.data(), 3, kVocab},
                                  .warps = warps,
                                  .draft_tokens = tokens,
                                  .streams = streams,
                                  .emitted = emitted,
                                  .accepted = accepted,
                                  .status = status},
      ws);
  CHECK(status == want);
  CHECK(accepted[1] == -1);
  CHECK(accepted[2] == -1);

  std::vector<cuda_impl::DeviceWarp> device_warps;
  for (const Warp& w : warps) device_warps.push_back({.temperature = w.temperature, .top_k = w.top_k, .top_p = w.top_p,
                                                  .min_p = w.min_p});
  std::vector<Token> cuda_emitted(6, 99);
  std::vector<std::int32_t> cuda_accepted(3, 99);
  Codes cuda_status(4, 99);
  std::vector<unsigned char> workspace(cuda_impl::chain_logits_workspace_bytes(3, 3, kVocab));
  const cuda_impl::ChainVerifyParams p{
      .target = target.data(),
      .target_stride = kVocab,
      .draft = draft.data(),
      .draft_stride = kVocab,
      .dtype = cuda_impl::DType::kF32,
      .batch = 3,
      .vocab = kVocab,
      .drafts = 3,
      .draft_offsets = offsets,
      .draft_tokens = tokens.data(),
      .streams = streams,
      .emitted = cuda_emitted.data(),
      .accepted = cuda_accepted.data(),
      .warps = on_device(device_warps.data(), device_warps.size()),
      .status = cuda_status.data()};
  REQUIRE(cuda_impl::verify_chain_batch_logits(p, workspace.data(), nullptr) == cudaSuccess);
  CHECK(cuda_status == want);
  CHECK(cuda_accepted == accepted);
  CHECK(cuda_emitted == emitted);
}

TEST_CASE("the CUDA target-only chain launcher reports a token outside the vocabulary",
          "[backend][status][cuda_kernel]") {
  StatusChain c;
  Workspace ws;
  auto args = c.args();
  args.draft_rows = {};
  c.tokens[4] = 5;  // sequence 2 verifies: target-only has no draft probabilities
  verify_chain_batch_target_only(backend::cpu, args, ws);
  const Codes want{0, 1, 0, 1};
  CHECK(c.status == want);

  StatusChain d;
  d.tokens[4] = 5;
  std::vector<unsigned char> workspace(cuda_impl::chain_workspace_size(3));
  REQUIRE(cuda_impl::verify_chain_batch_target_only(d.params(false), workspace.data(), nullptr) ==
          cudaSuccess);
  CHECK(d.status == want);
  CHECK(d.accepted == c.accepted);
  CHECK(d.emitted == c.emitted);
}

namespace {

/// Two trees over `vocab` tokens, each `children` children of the root, tree 1's last token
/// replaced by `bad_token`; uniform target rows, draft rows without mass on token 0.
struct StatusTrees {
  std::int64_t vocab;
  std::vector<std::int32_t> offsets;
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<float> target, draft;
  std::vector<RandomStream> streams = status_streams(2);
  std::vector<std::int32_t> accepted_nodes, accepted = std::vector<std::int32_t>(2, 99);
  std::vector<Token> final_tokens = std::vector<Token>(2, 99);
  std::vector<std::uint8_t> bonus = std::vector<std::uint8_t>(2, 7);
  Codes status = Codes(3, 99);

  StatusTrees(std::int64_t v, int children, Token bad_token) : vocab(v) {
    offsets = {0, children, 2 * children};
    for (int t = 0; t < 2; ++t) {
      for (int k = 0; k < children; ++k) {
        tokens.push_back(1 + k);
        parents.push_back(-1);
      }
    }
    tokens.back() = bad_token;
    accepted_nodes.assign(tokens.size(), 99);
    const auto rows = static_cast<std::int64_t>(tokens.size()) + 2;
    for (std::int64_t r = 0; r < rows * vocab; ++r) {
      target.push_back(1.0f / static_cast<float>(vocab));
      draft.push_back(r % vocab == 0 ? 0.0f : 1.0f / static_cast<float>(vocab - 1));
    }
  }

  TreeBatchArgs args(bool draft_rows) {
    const auto rows = static_cast<std::int64_t>(tokens.size()) + 2;
    return {.node_offsets = offsets,
            .trees = {tokens, parents},
            .target_rows = {target.data(), rows, vocab},
            .draft_rows = draft_rows ? MatrixView<const float>{draft.data(), rows, vocab}
                                     : MatrixView<const float>{},
            .streams = streams,
            .accepted_nodes = accepted_nodes,
            .accepted = accepted,
            .final_tokens = final_tokens,
            .bonus = bonus,
            .status = status};
  }

  cuda_impl::TreeVerifyParams params(bool draft_rows) {
    return {.node_offsets = offsets,
            .batch = 2,
            .max_nodes = offsets[1],
            .tokens = tokens.data(),
            .parents = parents.data(),
            .target = target.data(),
            .target_stride = vocab,
            .draft = draft_rows ? draft.data() : nullptr,
            .draft_stride = draft_rows ? vocab : 0,
            .vocab = vocab,
            .streams = streams,
            .accepted_nodes = accepted_nodes.data(),
            .accepted = accepted.data(),
            .final_tokens = final_tokens.data(),
            .bonus = bonus.data(),
            .status = status.data()};
  }
};

}  // namespace

TEST_CASE("tree batches report a token outside the vocabulary on both backends",
          "[backend][status][cuda_kernel]") {
  for (const bool recursive : {true, false}) {
    StatusTrees cpu(kVocab, 3, static_cast<Token>(kVocab + 2));
    StatusTrees cuda(kVocab, 3, static_cast<Token>(kVocab + 2));
    Workspace ws;
    const Rule rule = recursive ? Rule(Recursive{}) : Rule(MultiRound{});
    verify_tree_batch(backend::cpu, rule, cpu.args(true), ws);
    std::vector<unsigned char> workspace(cuda_impl::tree_workspace_size(2, 3, kVocab));
    const auto node_rule =
        recursive ? cuda_impl::TreeRule::kRecursive : cuda_impl::TreeRule::kMultiRound;
    REQUIRE(cuda_impl::verify_tree_batch(node_rule, cuda.params(true), workspace.data(),
                                         nullptr) == cudaSuccess);
    const Codes want{0, 1, 1};
    CHECK(cpu.status == want);
    CHECK(cuda.status == want);
    CHECK(cpu.accepted[1] == -1);
    CHECK(cuda.accepted[1] == -1);
    CHECK(cpu.final_tokens[1] == kNoToken);
    CHECK(cuda.final_tokens[1] == kNoToken);
    CHECK(cuda.accepted[0] == cpu.accepted[0]);
  }
}

TEST_CASE("the CPU tree batch reports too many children and a malformed tree",
          "[backend][status]") {
  SECTION("Rejection takes one child per node") {
    StatusTrees t(kVocab, 2, 3);
    Workspace ws;
    verify_tree_batch(backend::cpu, Rejection{}, t.args(true), ws);
    CHECK(t.status == Codes{4, 4, 2});
  }
  SECTION("repeated RRS siblings") {
    StatusTrees t(kVocab, 2, 1);  // tree 1's children are both token 1
    Workspace ws;
    verify_tree_batch(backend::cpu, Recursive{}, t.args(true), ws);
    CHECK(t.status == Codes{0, 6, 1});
    CHECK_THROWS_WITH(throw_if_failed(t.status),
                      Catch::Contains("status[1]") && Catch::Contains("malformed"));
  }
}

TEST_CASE("the CUDA target-only tree launcher reports a node of more than 256 children",
          "[backend][status][cuda_kernel]") {
  StatusTrees t(512, 300, 700);  // tree 0: 300 children; tree 1 also a token outside
  // Targets on token 0, no child's: every child is rejected, and the 257th finds no room.
  for (std::size_t i = 0; i < t.target.size(); ++i) t.target[i] = i % 512 == 0 ? 1.0f : 0.0f;
  std::vector<unsigned char> workspace(cuda_impl::chain_workspace_size(2));
  REQUIRE(cuda_impl::verify_tree_batch_target_only(t.params(false), workspace.data(), nullptr) ==
          cudaSuccess);
  CHECK(t.status == Codes{4, 1, 2});
  CHECK(t.accepted == std::vector<std::int32_t>{-1, -1});

  StatusTrees cpu(512, 3, 700);
  Workspace ws;
  verify_tree_batch_target_only(backend::cpu, cpu.args(false), ws);
  CHECK(cpu.status == Codes{0, 1, 1});
}

TEST_CASE("throw_if_failed names the first failed sequence and its cause", "[backend][status]") {
  CHECK_NOTHROW(throw_if_failed(Codes{0, 0, 0}));
  CHECK_THROWS_WITH(throw_if_failed(Codes{0, 2, 1, 2}),
                    Catch::Contains("status[1]") && Catch::Contains("draft probability 0") &&
                        Catch::Contains("2 sequence(s) failed"));
  CHECK_THROWS_AS(throw_if_failed(Codes{}), Error);
  for (std::int32_t code = 0; code <= 8; ++code)
    CHECK(describe(static_cast<SequenceStatus>(code)) != "unknown status code");
}
