// SPDX-License-Identifier: MIT
// The traffic ledger of the CUDA backend's calls, run whole (launcher, staging copies, kernels)
// through the emulated runtime at V = 8192: bytes read and written per element, launches, copies,
// synchronisations and allocations per call, the figures of the "ledger" table in
// docs/backends.md. Also the emulated runtime itself (2-D grids, block order, capture) and the
// review fixes it can now show (token range, launch bounds, unwritten bytes).
#include "emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain.hpp"
#include "tree_cases.hpp"

using namespace specdec;
namespace cuda_impl = specdec::backend::cuda_impl;
namespace emu = specdec_emulation;

namespace {

constexpr std::int64_t kLedgerVocab = 8192;

/// Host memory registered as a named region of emulated device memory while the buffer lives.
template <class T>
class LedgerBuffer {
 public:
  LedgerBuffer(std::string name, std::vector<T> values, bool initialised = true)
      : data_(std::move(values)) {
    emu::ledger.add(std::move(name), data_.data(), data_.size() * sizeof(T), initialised);
  }
  /// `count` entries no one has written yet (a fresh device allocation).
  LedgerBuffer(std::string name, std::size_t count)
      : LedgerBuffer(std::move(name), std::vector<T>(count), false) {}
  LedgerBuffer(const LedgerBuffer&) = delete;
  LedgerBuffer& operator=(const LedgerBuffer&) = delete;
  ~LedgerBuffer() { emu::ledger.remove(data_.data()); }

  T* get() { return data_.data(); }
  const std::vector<T>& values() const { return data_; }
  T operator[](std::size_t i) const { return data_[i]; }

 private:
  std::vector<T> data_;
};

std::vector<float> ledger_logits(std::int64_t rows, std::int64_t vocab, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  std::vector<float> out(static_cast<std::size_t>(rows * vocab));
  for (auto& x : out) x = static_cast<float>(2.0 * rng.normal());
  return out;
}

RandomStream ledger_stream(std::uint64_t seed, std::uint32_t sequence) {
  RandomStream s;
  s.seed = seed;
  s.sequence = sequence;
  s.position = 3;
  return s;
}

/// The argmax of a row: kept by every warp, so a chain whose target equals its draft accepts it.
std::int32_t ledger_argmax(const std::vector<float>& rows, std::int64_t row, std::int64_t vocab) {
  const auto begin = rows.begin() + row * vocab;
  return static_cast<std::int32_t>(std::max_element(begin, begin + vocab) - begin);
}

/// One call's figures, per element of the `row_bytes` the call is about.
struct CallFigures {
  double reads, writes, sector_efficiency;
  std::uint64_t launches, copies, syncs, allocations;
};

CallFigures ledger_figures(double row_bytes) {
  const emu::Traffic t = emu::ledger.total();
  const emu::RuntimeCounts& c = emu::ledger.counts;
  const CallFigures f{static_cast<double>(t.read) / row_bytes,
                      static_cast<double>(t.written) / row_bytes,
                      t.sector_efficiency(),
                      c.launches,
                      c.copies(),
                      c.syncs,
                      c.allocations};
  UNSCOPED_INFO("reads per element " << f.reads << ", writes per element " << f.writes
                                     << ", sector efficiency " << f.sector_efficiency
                                     << ", launches " << f.launches << ", copies " << f.copies
                                     << ", syncs " << f.syncs << ", allocations "
                                     << f.allocations);
  return f;
}

/// A chain batch of probability or logit rows in emulated device memory.
struct LedgerChain {
  LedgerChain(std::int64_t batch, std::int64_t gamma, std::int64_t vocab,
              std::vector<float> target_rows, std::vector<float> draft_rows,
              std::vector<std::int32_t> draft_tokens)
      : target("target", std::move(target_rows)),
        draft("draft", std::move(draft_rows)),
        tokens("tokens", std::move(draft_tokens)),
        emitted("emitted", static_cast<std::size_t>(batch * (gamma + 1))),
        accepted("accepted", static_cast<std::size_t>(batch)),
        workspace("workspace", cuda_impl::chain_logits_workspace_size(batch, vocab)) {
    for (std::int64_t b = 0; b <= batch; ++b) offsets.push_back(static_cast<std::int32_t>(b * gamma));
    for (std::int64_t b = 0; b < batch; ++b)
      streams.push_back(ledger_stream(9, static_cast<std::uint32_t>(b)));
    params = {target.get(), vocab,        draft.get(),      vocab,          cuda_impl::DType::kF32,
              batch,        vocab,        offsets.data(),   tokens.get(),   streams.data(),
              emitted.get(), accepted.get()};
  }

  LedgerBuffer<float> target, draft;
  LedgerBuffer<std::int32_t> tokens, emitted, accepted;
  LedgerBuffer<unsigned char> workspace;
  std::vector<std::int32_t> offsets;
  std::vector<RandomStream> streams;
  cuda_impl::ChainVerifyParams params{};
};

/// gamma drafted positions per sequence whose target rows equal their draft rows (every draft
/// accepted, so every row is warped), logits.
LedgerChain accepted_chain(std::int64_t batch, std::int64_t gamma, std::int64_t vocab) {
  std::vector<float> draft = ledger_logits(batch * gamma, vocab, 41);
  std::vector<float> target;
  std::vector<std::int32_t> tokens;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i <= gamma; ++i) {
      const std::int64_t row = b * gamma + std::min(i, gamma - 1);
      target.insert(target.end(), draft.begin() + row * vocab, draft.begin() + (row + 1) * vocab);
      if (i < gamma) tokens.push_back(ledger_argmax(draft, row, vocab));
    }
  }
  return {batch, gamma, vocab, std::move(target), std::move(draft), std::move(tokens)};
}

}  // namespace

TEST_CASE("ledger: the chain step from logits with T and top-p, every draft accepted",
          "[backend][cuda_kernel][ledger]") {
  emu::ledger.clear();
  const std::int64_t batch = 1, gamma = 2, v = kLedgerVocab;
  LedgerChain c = accepted_chain(batch, gamma, v);
  const cuda_impl::DeviceWarp warp{0.8f, 0, 0.9f, 0.0f};
  emu::ledger.reset();
  REQUIRE(cuda_impl::verify_chain_batch_logits(c.params, &warp, 1, c.workspace.get(), nullptr) ==
          cudaSuccess);
  REQUIRE(c.accepted[0] == gamma);
  // 2 gamma + 1 rows warped.
  const CallFigures f = ledger_figures(static_cast<double>((2 * gamma + 1) * v * 4));
  CHECK(f.reads > 0);
  CHECK(f.launches == 1);
  CHECK(f.copies == 2);
  CHECK(emu::ledger.counts.copies_pageable == 2);
  CHECK(f.syncs == 0);
  CHECK(f.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}
