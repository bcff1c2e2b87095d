// SPDX-License-Identifier: MIT
// The traffic ledger of the CUDA backend's calls, run whole (launcher, staging copies, kernels)
// through the emulated runtime at V = 8192: bytes read and written per element, launches, copies,
// synchronisations and allocations per call, the figures of the "ledger" table in
// docs/cuda-measurements.md. Also the emulated runtime itself (2-D grids, block order, capture) and
// the review fixes it can now show (token range, launch bounds, unwritten bytes).
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "emulated_warp.hpp"
#include "specdec/backend/cpu/tree_mask_batch.hpp"
#include "specdec/backend/cuda/emulation/region_buffer.hpp"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"
#include "specdec/toy/distributions.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/chain.hpp"
#include "tree_cases.hpp"

using namespace specdec;
namespace cuda_impl = specdec::backend::cuda_impl;
namespace emu = specdec::emulation;

namespace {

constexpr std::int64_t kLedgerVocab = 8192;

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
                                     << ", syncs " << f.syncs << ", allocations " << f.allocations);
  return f;
}

/// What a call on the statistics path makes besides its traffic: `launches` launches, `copies`
/// host copies, no synchronisation or allocation, no read of an unwritten byte.
void check_call_counts(const CallFigures& f, std::uint64_t launches, std::uint64_t copies) {
  CHECK(f.launches == launches);
  CHECK(f.copies == copies);
  CHECK(f.syncs == 0);
  CHECK(f.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

/// The expected traffic of a call per element, within the tolerances the ledger table allows.
struct TrafficFigures {
  double reads, reads_epsilon = 0.02, writes, writes_epsilon = 0.02, sector_efficiency;
};

void check_traffic(const CallFigures& f, const TrafficFigures& e) {
  CHECK(f.reads == Approx(e.reads).epsilon(e.reads_epsilon));
  CHECK(f.writes == Approx(e.writes).epsilon(e.writes_epsilon));
  CHECK(f.sector_efficiency == Approx(e.sector_efficiency).margin(0.02));
}

/// A chain batch of probability or logit rows in emulated device memory.
struct LedgerChain {
  LedgerChain(std::int64_t batch, std::int64_t gamma, std::int64_t vocab,
              std::vector<float> target_rows, std::vector<float> draft_rows,
              std::vector<std::int32_t> draft_tokens)
      : target("target", target_rows),
        draft("draft", draft_rows),
        tokens("tokens", draft_tokens),
        emitted("emitted", static_cast<std::size_t>(batch * (gamma + 1))),
        accepted("accepted", static_cast<std::size_t>(batch)),
        workspace("workspace", cuda_impl::chain_logits_workspace_size(batch, gamma, vocab)) {
    for (std::int64_t b = 0; b <= batch; ++b)
      offsets.push_back(static_cast<std::int32_t>(b * gamma));
    for (std::int64_t b = 0; b < batch; ++b)
      streams.push_back(ledger_stream(9, static_cast<std::uint32_t>(b)));
    params = {.target = target.get(),
              .target_stride = vocab,
              .draft = draft.get(),
              .draft_stride = vocab,
              .dtype = cuda_impl::DType::kF32,
              .batch = batch,
              .vocab = vocab,
              .drafts = batch * gamma,
              .draft_offsets = offsets,
              .draft_tokens = tokens.get(),
              .streams = streams,
              .emitted = emitted.get(),
              .accepted = accepted.get()};
  }

  emu::RegionBuffer<float> target, draft;
  emu::RegionBuffer<std::int32_t> tokens, emitted, accepted;
  emu::RegionBuffer<unsigned char> workspace;
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

/// The warp launcher over `rows` rows of ledger_logits, and one call's figures.
struct LedgerWarp : test::EmulatedWarpCall {
  LedgerWarp(std::int64_t rows, std::int64_t vocab, std::uint64_t seed)
      : EmulatedWarpCall(ledger_logits(rows, vocab, seed), rows, vocab) {}

  /// One call with `warps` from fresh counts: its figures per element of the logits.
  CallFigures figures(const std::vector<cuda_impl::DeviceWarp>& warps) {
    emu::ledger.reset();
    REQUIRE(run(warps) == cudaSuccess);
    return ledger_figures(static_cast<double>(bytes()));
  }
  /// The bytes of the logits, and of the warped rows.
  std::uint64_t bytes() const { return static_cast<std::uint64_t>(rows_ * vocab_ * 4); }
};

/// The warp launcher over two rows of ledger_logits(`seed`) at V kLedgerVocab, on a clear ledger.
LedgerWarp cleared_warp(std::uint64_t seed) {
  emu::ledger.clear();
  return LedgerWarp(2, kLedgerVocab, seed);
}

/// The figures of a chain step from logits (B 1, gamma 1, V kLedgerVocab, every draft accepted)
/// with `warp`, per element of its 2 gamma + 1 rows, and how many times it read the logits.
std::pair<CallFigures, double> accepted_chain_figures(const cuda_impl::DeviceWarp& warp) {
  emu::ledger.clear();
  const std::int64_t batch = 1, gamma = 1, v = kLedgerVocab;
  LedgerChain c = accepted_chain(batch, gamma, v);
  emu::ledger.reset();
  c.params.warps = std::span<const cuda_impl::DeviceWarp>(&warp, 1);
  REQUIRE(cuda_impl::verify_chain_batch_logits(c.params, c.workspace.get(), nullptr) ==
          cudaSuccess);
  REQUIRE(c.accepted[0] == gamma);
  const auto bytes = static_cast<double>((2 * gamma + 1) * v * 4);
  const double logit_reads = static_cast<double>(emu::ledger.region("target").traffic.read +
                                                 emu::ledger.region("draft").traffic.read) /
                             bytes;
  UNSCOPED_INFO("logits read " << logit_reads << " times");
  return {ledger_figures(bytes), logit_reads};
}

}  // namespace

TEST_CASE("ledger: the chain step from logits with T and top-p, every draft accepted",
          "[backend][cuda_kernel][ledger]") {
  const std::int64_t v = kLedgerVocab;
  const auto [f, logit_reads] = accepted_chain_figures({0.8f, 0, 0.9f, 0.0f});
  // Before: one block per sequence, about 41 passes over each warped row (a radix pass per bit
  // for the top-p cut), about 5 row writes; 42.8 reads and 4.9 writes per element in all, sector
  // efficiency 0.90. Now the statistics, the nucleus and the draws: the logits are read twice
  // (the bonus is drawn from its row's listed nucleus); the rest is the nucleus candidates'
  // lists (this row's nucleus holds a quarter of its entries) written and read, and their
  // histograms (each block adds its part by atomics; 2% of the rows' bytes here, less at
  // larger vocabularies); the nucleus drawn from is ordered by id and written once more.
  // Twice, the gate's sample of 1024 entries per row, the entries at the drafted tokens.
  const double sample = 1024.0 / static_cast<double>(v);
  CHECK(logit_reads <= 2.0 + sample + 0.03);
  check_traffic(f, {.reads = 3.21, .writes = 0.86, .sector_efficiency = 0.94});
  CHECK(emu::ledger.counts.copies_pageable == 2);
  check_call_counts(f, 3, 2);
}

TEST_CASE("ledger: the chain step from logits with T, top-k 50 and top-p, every draft accepted",
          "[backend][cuda_kernel][ledger]") {
  const std::int64_t v = kLedgerVocab;
  const auto [f, logit_reads] = accepted_chain_figures({0.8f, 50, 0.9f, 0.0f});
  // Before: one block per sequence over rows warped into the workspace (four radix passes for
  // the top-k cut, the softmax, the nucleus, the draws): 47.0 reads and 5.0 writes per element,
  // sector efficiency 0.90, one launch. Then (2.17 reads) the statistics and each block's best
  // 50 in two reads. Now each block's best 50 in the statistics' one read of the logits, then
  // the 50 candidates once more, summed, cut and listed by one block of the row; the bonus is
  // drawn from the listed row. The rest: the blocks' lists of 50 keys, written and read once,
  // and the statistics; the candidates' scattered reads bring sector efficiency down.
  CHECK(logit_reads <= 1.0 + 3.0 * 50 / static_cast<double>(v));
  check_traffic(
      f, {.reads = 1.165, .writes = 0.118, .writes_epsilon = 0.05, .sector_efficiency = 0.905});
  check_call_counts(f, 3, 2);
}

TEST_CASE("ledger: the warp with T and top-k 50", "[backend][cuda_kernel][ledger]") {
  LedgerWarp w = cleared_warp(43);
  const CallFigures f = w.figures({{0.8f, 50, 1.0f, 0.0f}});
  // Before: one block per row, 9.0 reads and 4.0 writes per element (four radix passes for the
  // cut, the softmax, three row writes), sector efficiency 0.98. Then (3.13 reads) the
  // statistics, each block's best 50 and the write pass each read the logits. Now each block's
  // best 50 in the statistics' read, then the write pass: the logits twice, the output once.
  CHECK(emu::ledger.region("logits").reads_per_byte() <=
        2.0 + 50.0 / static_cast<double>(kLedgerVocab));
  CHECK(emu::ledger.region("warped").traffic.written == w.bytes());
  check_traffic(f, {.reads = 2.13, .writes = 1.107, .sector_efficiency = 0.98});
  check_call_counts(f, 3, 0);
}

TEST_CASE("ledger: the chain step from logits with T and min-p, every draft accepted",
          "[backend][cuda_kernel][ledger]") {
  const auto [f, logit_reads] = accepted_chain_figures({0.8f, 0, 1.0f, 0.1f});
  // Before: one block per sequence over rows warped into the workspace: 9.0 reads and 5.0 writes
  // per element, sector efficiency 0.73, one launch. Now the statistics, the entries at or above
  // the threshold gathered into the row's list (the logits read twice), their mass added in id
  // order by one thread, the bonus drawn from the listed row.
  CHECK(logit_reads <= 2.0 + 0.001);
  check_traffic(
      f, {.reads = 2.10, .writes = 0.029, .writes_epsilon = 0.05, .sector_efficiency = 0.95});
  check_call_counts(f, 3, 2);
}

TEST_CASE("ledger: the warp with T and min-p", "[backend][cuda_kernel][ledger]") {
  LedgerWarp w = cleared_warp(43);
  const CallFigures f = w.figures({{0.8f, 0, 1.0f, 0.1f}});
  // Before: one block per row, 8.0 reads and 5.0 writes per element. Then (3.06 reads) the
  // statistics, the entries at or above the threshold, the write pass each read the logits. Now
  // the write pass cuts: the logits at most twice (here 1.44: it skips the 7 of 16 tiles whose
  // largest entry is below the threshold), the output once, the kept entries listed on the way.
  CHECK(emu::ledger.region("logits").reads_per_byte() <= 2.0);
  CHECK(emu::ledger.region("logits").reads_per_byte() == Approx(1.4375));
  CHECK(emu::ledger.region("warped").traffic.written == w.bytes());
  check_traffic(
      f, {.reads = 1.464, .reads_epsilon = 0.01, .writes = 1.011, .sector_efficiency = 0.985});
  check_call_counts(f, 2, 0);
}

TEST_CASE("ledger: the warp with T and top-p", "[backend][cuda_kernel][ledger]") {
  LedgerWarp w = cleared_warp(43);
  const CallFigures f = w.figures({{0.8f, 0, 0.9f, 0.0f}});
  // Before: one block per row, 42 passes (scale, 3 softmax passes, 31 radix passes for the cut,
  // ...) and 5 row writes where the output needs 1: 42.0 reads and 4.9 writes per element,
  // sector efficiency 0.96. Now the statistics, the nucleus, the write pass: the logits three
  // times (and the gate's sample), the output once; the rest is the nucleus candidates' lists
  // (this row's nucleus holds a quarter of its entries) and their histograms, which the row's
  // last block reads back to select the cut (3.87 before it did).
  const double sample = 1024.0 / static_cast<double>(kLedgerVocab);
  CHECK(emu::ledger.region("logits").reads_per_byte() <= 3.0 + sample + 1e-9);
  CHECK(emu::ledger.region("warped").traffic.written == w.bytes());
  check_traffic(f, {.reads = 3.95, .writes = 1.52, .sector_efficiency = 0.96});
  check_call_counts(f, 3, 0);
}

TEST_CASE("ledger: the warp with T only, one warp per row", "[backend][cuda_kernel][ledger]") {
  LedgerWarp w = cleared_warp(44);
  const CallFigures f = w.figures({{0.8f, 0, 1.0f, 0.0f}, {1.2f, 0, 1.0f, 0.0f}});
  // The statistics path (8 blocks per row): the logits twice, each block's warp once; the output
  // once, 16 bytes per tile and 32 per row of statistics.
  CHECK(emu::ledger.region("logits").reads_per_byte() == 2.0);
  CHECK(f.reads == Approx(2.02).epsilon(0.01));
  CHECK(f.writes == Approx(1.006).epsilon(0.002));
  CHECK(f.sector_efficiency > 0.97);
  CHECK(f.launches == 2);
  CHECK(emu::ledger.counts.copies_pageable == 1);  // the per-row warps
  CHECK(f.syncs == 0);
  CHECK(f.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE("ledger: the warp with T only, one shared warp", "[backend][cuda_kernel][ledger]") {
  LedgerWarp w = cleared_warp(44);
  const CallFigures f = w.figures({{0.8f, 0, 1.0f, 0.0f}});
  // The floor of a warp without a cut: each logit read by the statistics and by the write pass,
  // each output written once; the warp is a kernel argument.
  CHECK(emu::ledger.region("logits").reads_per_byte() == 2.0);
  CHECK(emu::ledger.region("warped").writes_per_byte() == 1.0);
  CHECK(f.reads == Approx(2.02).epsilon(0.01));
  CHECK(f.writes == Approx(1.006).epsilon(0.002));
  CHECK(f.sector_efficiency > 0.99);
  check_call_counts(f, 2, 0);
}

TEST_CASE("ledger: Gumbel-top-k with k = 8", "[backend][cuda_kernel][ledger]") {
  emu::ledger.clear();
  const std::int64_t rows = 2, v = kLedgerVocab, k = 8;
  emu::RegionBuffer<float> logits("logits", ledger_logits(rows, v, 45));
  emu::RegionBuffer<std::int32_t> tokens("tokens", static_cast<std::size_t>(rows * k));
  emu::RegionBuffer<float> values("values", static_cast<std::size_t>(rows * k));
  emu::RegionBuffer<std::int32_t> counts("counts", static_cast<std::size_t>(rows));
  emu::RegionBuffer<unsigned char> workspace("workspace",
                                             cuda_impl::gumbel_batch_workspace_size(rows, v, k));
  const std::vector<RandomStream> streams{ledger_stream(5, 0), ledger_stream(5, 1)};
  emu::RegionBuffer<RandomStream> device_streams("device_streams", streams);
  cuda_impl::GumbelTopKParams p{.rows = logits.get(),
                                .dtype = cuda_impl::DType::kF32,
                                .kind = RowKind::kLogWeights,
                                .row_count = rows,
                                .vocab = v,
                                .row_stride = v,
                                .k = k,
                                .streams = streams,
                                .tokens = tokens.get(),
                                .token_stride = k,
                                .values = values.get(),
                                .value_stride = k,
                                .counts = counts.get()};
  const auto blocks = cuda_impl::draft_row_split(rows, v, cuda_impl::kH100Sms).blocks(rows);
  REQUIRE(blocks == 8);  // 4 blocks of two tiles per row
  emu::ledger.reset();
  REQUIRE(cuda_impl::gumbel_top_k_batch(p, workspace.get(), nullptr) == cudaSuccess);
  CHECK(counts[0] == k);
  const CallFigures f = ledger_figures(static_cast<double>(rows * v * 4));
  // One read of each entry, perturbed as it is read; each block writes its 8 best (value and id)
  // and the last block of a row reads them back: no perturbed row.
  CHECK(emu::ledger.region("logits").traffic.read == static_cast<std::uint64_t>(rows * v * 4));
  CHECK(f.reads == Approx(1.023).epsilon(0.01));
  CHECK(f.writes == Approx(0.0110).epsilon(0.05));
  CHECK(emu::ledger.total().written <= static_cast<std::uint64_t>(blocks * k * 8 + 512));
  CHECK(f.sector_efficiency == Approx(0.97).margin(0.02));
  CHECK(f.launches == 1);
  CHECK(emu::ledger.counts.copies_pageable == 1);  // the streams
  CHECK(emu::ledger.counts.memsets == 1);          // the row counters
  CHECK(f.syncs == 0);
  CHECK(f.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);

  // Device-resident streams: nothing staged.
  const auto host_tokens = tokens.values();
  p.streams = on_device(device_streams.get(), streams.size());
  emu::ledger.reset();
  REQUIRE(cuda_impl::gumbel_top_k_batch(p, workspace.get(), nullptr) == cudaSuccess);
  CHECK(tokens.values() == host_tokens);
  CHECK(emu::ledger.counts.launches == 1);
  CHECK(emu::ledger.counts.copies() == 0);
  CHECK(emu::ledger.counts.syncs == 0);
  CHECK(emu::ledger.counts.allocations == 0);
  CHECK(emu::ledger.region("logits").traffic.read == static_cast<std::uint64_t>(rows * v * 4));
}

namespace {

/// One stochastic beam level of one sequence with `width` live beams over probability rows.
struct LedgerBeam {
  LedgerBeam(std::int64_t width, std::int64_t vocab)
      : draft("draft", beam_rows(width, vocab)),
        counts("beam_counts", std::vector<std::int32_t>{static_cast<std::int32_t>(width)}),
        nodes("nodes", std::vector<std::int32_t>{0, 1, 2, 3}),
        log_probs("log_probs", std::vector<float>{-0.5f, -1.0f, -1.5f, -2.0f}),
        scores("scores", std::vector<float>{-0.3f, -0.9f, -1.2f, -2.5f}),
        next_parents("next_parents", static_cast<std::size_t>(width)),
        next_tokens("next_tokens", static_cast<std::size_t>(width)),
        next_log_probs("next_log_probs", static_cast<std::size_t>(width)),
        next_scores("next_scores", static_cast<std::size_t>(width)),
        next_counts("next_counts", std::size_t{1}),
        workspace("workspace", cuda_impl::beam_level_workspace_size(1, width, vocab)),
        width_(width),
        vocab_(vocab) {}

  static std::vector<float> beam_rows(std::int64_t width, std::int64_t vocab) {
    toy::ToyRandom rng(46);
    std::vector<float> out;
    for (std::int64_t i = 0; i < width; ++i) {
      const auto row = toy::dirichlet(vocab, 0.7, rng);
      out.insert(out.end(), row.begin(), row.end());
    }
    return out;
  }

  cudaError_t run() {
    const std::int64_t w = width_;
    const cuda_impl::BeamLevelArgs m{draft.get(),
                                     vocab_,
                                     counts.get(),
                                     nodes.get(),
                                     w,
                                     log_probs.get(),
                                     w,
                                     scores.get(),
                                     w,
                                     next_parents.get(),
                                     w,
                                     next_tokens.get(),
                                     w,
                                     next_log_probs.get(),
                                     w,
                                     next_scores.get(),
                                     w,
                                     next_counts.get()};
    return cuda_impl::stochastic_beam_level_batch(
        {.matrices = m, .batch = 1, .width = w, .vocab = vocab_, .streams = streams},
        workspace.get(), nullptr);
  }

  emu::RegionBuffer<float> draft;
  emu::RegionBuffer<std::int32_t> counts, nodes;
  emu::RegionBuffer<float> log_probs, scores;
  emu::RegionBuffer<std::int32_t> next_parents, next_tokens;
  emu::RegionBuffer<float> next_log_probs, next_scores;
  emu::RegionBuffer<std::int32_t> next_counts;
  emu::RegionBuffer<unsigned char> workspace;
  std::vector<RandomStream> streams{ledger_stream(6, 0).in_domain(Domain::kDraft)};
  std::int64_t width_, vocab_;
};

}  // namespace

TEST_CASE("ledger: one stochastic beam level of width 4", "[backend][cuda_kernel][ledger]") {
  emu::ledger.clear();
  const std::int64_t width = 4, v = kLedgerVocab;
  LedgerBeam beam(width, v);
  REQUIRE(cuda_impl::draft_row_split(width, v, cuda_impl::kH100Sms).blocks_per_row == 4);
  emu::ledger.reset();
  REQUIRE(beam.run() == cudaSuccess);
  CHECK(beam.next_counts[0] == width);
  const CallFigures f = ledger_figures(static_cast<double>(width * v * 4));
  // Each draft row read once (4 blocks per beam) and its W children's probabilities; per beam W
  // candidates and a count, per block its W best: no perturbed row. The rest of the reads are
  // the selection's threshold search over the W * W candidates (a pass per bit).
  CHECK(emu::ledger.region("draft").traffic.read ==
        static_cast<std::uint64_t>(width * v * 4 + width * width * 4));
  check_traffic(
      f, {.reads = 1.26, .writes = 0.0086, .writes_epsilon = 0.05, .sector_efficiency = 0.96});
  CHECK(f.launches == 2);
  CHECK(emu::ledger.counts.copies_pageable == 1);  // the streams
  CHECK(emu::ledger.counts.memsets == 1);          // the beam counters
  CHECK(f.syncs == 0);
  CHECK(f.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE("ledger: tree verification with RRS", "[backend][cuda_kernel][ledger]") {
  emu::ledger.clear();
  const test::TreeCase c = test::make_trees(2, kLedgerVocab, 47);
  const auto want = test::tree_oracle(Recursive{}, c);
  const auto batch = static_cast<std::int64_t>(c.offsets.size()) - 1;
  int largest = 1;
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b)
    largest = std::max(largest, c.offsets[b + 1] - c.offsets[b]);
  emu::RegionBuffer<std::int32_t> tokens("tokens", c.tokens), parents("parents", c.parents);
  emu::RegionBuffer<float> target("target", c.target), draft("draft", c.draft);
  emu::RegionBuffer<std::int32_t> accepted_nodes("accepted_nodes", c.tokens.size());
  emu::RegionBuffer<std::int32_t> accepted("accepted", static_cast<std::size_t>(batch));
  emu::RegionBuffer<std::int32_t> final_tokens("final_tokens", static_cast<std::size_t>(batch));
  emu::RegionBuffer<std::uint8_t> bonus("bonus", static_cast<std::size_t>(batch));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", cuda_impl::tree_workspace_size(batch, largest, c.vocab));
  const cuda_impl::TreeVerifyParams p{.node_offsets = c.offsets,
                                      .batch = batch,
                                      .max_nodes = largest,
                                      .tokens = tokens.get(),
                                      .parents = parents.get(),
                                      .target = target.get(),
                                      .target_stride = c.vocab,
                                      .draft = draft.get(),
                                      .draft_stride = c.vocab,
                                      .vocab = c.vocab,
                                      .streams = c.streams,
                                      .accepted_nodes = accepted_nodes.get(),
                                      .accepted = accepted.get(),
                                      .final_tokens = final_tokens.get(),
                                      .bonus = bonus.get()};
  emu::ledger.reset();
  REQUIRE(cuda_impl::verify_tree_batch(cuda_impl::TreeRule::kRecursive, p, workspace.get(),
                                       nullptr) == cudaSuccess);
  CHECK(accepted.values() == want.accepted);
  CHECK(final_tokens.values() == want.final_tokens);
  // Per element of the rows the walks visit: one target and one draft row per node tested.
  std::int64_t visited = 0;
  for (const auto a : want.accepted) visited += a + 1;
  const CallFigures f = ledger_figures(static_cast<double>(2 * visited * c.vocab * 4));
  // An accepted node reads two entries; the last node of a walk reads its rows once per residual
  // and once for the draw. Before: 0.35 reads, a residual row written per rejection, sector
  // efficiency 0.13 (each thread summing its own chunk). Now the residual rows are recomputed,
  // never written, and every pass is coalesced: nothing is written but the outputs and the
  // candidate lists.
  CHECK(f.reads == Approx(0.27).epsilon(0.03));
  CHECK(f.sector_efficiency >= 0.9);
  CHECK(emu::ledger.region("workspace").traffic.written <=
        static_cast<std::uint64_t>(2 * c.tokens.size() * sizeof(std::int32_t) +
                                   (batch + 1) * sizeof(std::int32_t) +
                                   batch * sizeof(RandomStream)));
  CHECK(f.launches == 1);
  CHECK(emu::ledger.counts.copies_pageable == 2);  // offsets and streams
  CHECK(f.syncs == 0);
  CHECK(f.allocations == 0);
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

namespace {

/// The nodes of a forest whose parent is -1 (their mask rows read no parent row).
std::int64_t ledger_roots(const test::Forest& f) {
  return std::count(f.parents.begin(), f.parents.end(), -1);
}

}  // namespace

TEST_CASE("ledger: packed tree masks move each mask word once and each parent row once",
          "[backend][cuda_kernel][ledger]") {
  emu::ledger.clear();
  const test::Forest f = test::random_forest(4, 51);
  const auto n = static_cast<std::int64_t>(f.parents.size());
  const auto batch = static_cast<std::int64_t>(f.trees.size());
  const std::int64_t words = 3;  // the largest tree has at most 70 nodes
  emu::RegionBuffer<std::int32_t> parents("parents", f.parents);
  emu::RegionBuffer<std::int32_t> offsets("offsets", f.offsets);
  emu::RegionBuffer<std::uint32_t> masks("masks", static_cast<std::size_t>(n * words));
  emu::RegionBuffer<unsigned char> workspace("workspace",
                                             cuda_impl::tree_mask_workspace_size(batch));
  for (const bool device_offsets : {false, true}) {
    emu::ledger.reset();
    REQUIRE(cuda_impl::packed_tree_masks_batch(
                {.node_offsets = device_offsets ? on_device(offsets.get(), f.offsets.size())
                                                : Resident<const std::int32_t>(f.offsets),
                 .batch = batch,
                 .parents = parents.get(),
                 .masks = masks.get(),
                 .words = words,
                 .mask_stride = words},
                workspace.get(), nullptr) == cudaSuccess);
    CAPTURE(device_offsets);
    // Each mask word written once; a non-root row reads its parent's row once; each of the
    // `words` threads of a block reads the tree's parents and its two offsets.
    const auto word_bytes = static_cast<std::uint64_t>(words * 4);
    CHECK(emu::ledger.region("masks").traffic.written ==
          static_cast<std::uint64_t>(n) * word_bytes);
    CHECK(emu::ledger.region("masks").traffic.read ==
          static_cast<std::uint64_t>(n - ledger_roots(f)) * word_bytes);
    CHECK(emu::ledger.region("parents").traffic.read == static_cast<std::uint64_t>(n) * word_bytes);
    const std::uint64_t offset_bytes = static_cast<std::uint64_t>(batch) * 2 * word_bytes;
    CHECK(emu::ledger.region(device_offsets ? "offsets" : "workspace").traffic.read ==
          offset_bytes);
    CHECK(emu::ledger.counts.launches == 1);
    CHECK(emu::ledger.counts.copies_pageable == (device_offsets ? 0u : 1u));
    CHECK(emu::ledger.counts.syncs == 0);
    CHECK(emu::ledger.counts.allocations == 0);
    CHECK(emu::ledger.total().unwritten_reads == 0);
  }
  Workspace ws;
  std::vector<std::uint32_t> want(masks.values().size());
  packed_tree_masks_batch(backend::cpu, f.offsets, f.view(),
                          MatrixView<std::uint32_t>(want.data(), n, words), ws);
  CHECK(masks.values() == want);
}

TEST_CASE("ledger: tree positions write each position twice (depth, then position)",
          "[backend][cuda_kernel][ledger]") {
  emu::ledger.clear();
  const test::Forest f = test::random_forest(5, 52);
  const auto n = static_cast<std::int64_t>(f.parents.size());
  const auto batch = static_cast<std::int64_t>(f.trees.size());
  const std::vector<std::int32_t> contexts(static_cast<std::size_t>(batch), 4);
  emu::RegionBuffer<std::int32_t> parents("parents", f.parents);
  emu::RegionBuffer<std::int32_t> positions("positions", static_cast<std::size_t>(n));
  emu::RegionBuffer<unsigned char> workspace("workspace",
                                             cuda_impl::tree_mask_workspace_size(batch));
  emu::ledger.reset();
  REQUIRE(cuda_impl::tree_positions_batch({.node_offsets = f.offsets,
                                           .batch = batch,
                                           .parents = parents.get(),
                                           .context_lengths = contexts,
                                           .positions = positions.get()},
                                          workspace.get(), nullptr) == cudaSuccess);
  const auto node_bytes = static_cast<std::uint64_t>(n) * 4;
  // tree_positions_row writes depths, then turns them into positions in place.
  CHECK(emu::ledger.region("positions").traffic.written == 2 * node_bytes);
  CHECK(emu::ledger.region("positions").traffic.read ==
        node_bytes + static_cast<std::uint64_t>(n - ledger_roots(f)) * 4);
  CHECK(emu::ledger.region("parents").traffic.read == node_bytes);
  CHECK(emu::ledger.region("workspace").traffic.read == static_cast<std::uint64_t>(batch) * 12);
  CHECK(emu::ledger.counts.launches == 1);
  CHECK(emu::ledger.counts.copies_pageable == 2);  // offsets and context lengths
  CHECK(emu::ledger.total().unwritten_reads == 0);
}

TEST_CASE("emulated runtime: fill_random runs its 2-D grid like RandomStream",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  const std::int64_t streams_n = 3, count = 300, stride = 301;
  std::vector<RandomStream> streams;
  for (std::uint32_t s = 0; s < streams_n; ++s) streams.push_back(ledger_stream(17, s));
  emu::RegionBuffer<float> out("out", static_cast<std::size_t>(streams_n * stride));
  emu::RegionBuffer<unsigned char> workspace(
      "workspace", static_cast<std::size_t>(streams_n) * sizeof(RandomStream));
  for (const RandomKind kind : {RandomKind::kUniform, RandomKind::kGumbel}) {
    REQUIRE(cuda_impl::fill_random({.streams = streams,
                                    .first = 11,
                                    .count = count,
                                    .out = out.get(),
                                    .out_stride = stride,
                                    .kind = kind},
                                   workspace.get(), nullptr) == cudaSuccess);
    int wrong = 0;
    for (std::int64_t s = 0; s < streams_n; ++s) {
      for (std::int64_t i = 0; i < count; ++i) {
        const auto draw = static_cast<std::uint32_t>(11 + i);
        const RandomStream& st = streams[static_cast<std::size_t>(s)];
        const float want = kind == RandomKind::kUniform ? st.uniform(draw) : st.gumbel(draw);
        wrong += out[static_cast<std::size_t>(s * stride + i)] == want ? 0 : 1;
      }
    }
    CHECK(wrong == 0);
  }
  CHECK(emu::ledger.counts.launches == 2);  // one 2 x 3 grid per call
  CHECK(emu::ledger.region("out").traffic.written ==
        2 * static_cast<std::uint64_t>(streams_n * count * 4));
}

TEST_CASE("emulated runtime: a launch gives the same rows in any block order",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  LedgerWarp w(6, 64, 48);
  const std::vector<cuda_impl::DeviceWarp> warp{{0.7f, 0, 1.0f, 0.0f}};
  std::vector<std::vector<float>> results;
  for (const std::uint64_t seed : {1, 2, 3}) {
    emu::ledger.seed = seed;
    REQUIRE(w.run(warp) == cudaSuccess);
    results.push_back(w.warped.values());
  }
  emu::ledger.seed = 1;
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

namespace {

/// A chain batch over small probability rows (the draft rows are the target rows), gamma 2.
LedgerChain probability_chain(std::int64_t batch, std::int64_t vocab,
                              std::vector<std::int32_t> tokens) {
  const std::int64_t gamma = 2;
  toy::ToyRandom rng(49);
  std::vector<float> target, draft;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t i = 0; i <= gamma; ++i) {
      const auto row = toy::dirichlet(vocab, 1.0, rng);
      target.insert(target.end(), row.begin(), row.end());
      if (i < gamma) draft.insert(draft.end(), row.begin(), row.end());
    }
  }
  return {batch, gamma, vocab, std::move(target), std::move(draft), std::move(tokens)};
}

}  // namespace

TEST_CASE(
    "review fix: the chain kernel reads no entry outside a row for a token outside the "
    "vocabulary",
    "[backend][cuda_kernel]") {
  emu::ledger.clear();
  const std::int64_t v = 256;
  LedgerChain c = probability_chain(2, v, {-4, 7, 3, static_cast<std::int32_t>(v) + 5});
  REQUIRE(cuda_impl::verify_chain_batch(c.params, c.workspace.get(), nullptr) == cudaSuccess);
  CHECK(emu::ledger.unregistered.read == 0);
  CHECK(c.accepted.values() == std::vector<std::int32_t>{-1, -1});
  CHECK(c.emitted.values() == std::vector<std::int32_t>(6, -1));
}

TEST_CASE("review fix: the chain kernel refuses a token of draft probability 0, as the CPU does",
          "[backend][cuda_kernel]") {
  emu::ledger.clear();
  const std::int64_t v = 256;
  LedgerChain c = probability_chain(1, v, {5, 9});
  c.draft.get()[5] = 0.0f;  // q(5) = 0 at position 0; p(5) > 0 on the target row
  const std::vector<float>& draft = c.draft.values();
  REQUIRE(c.target[5] > 0.0f);
  Workspace ws;
  std::vector<Token> cpu_emitted(3);
  CHECK_THROWS_AS(verify_chain<float>(
                      Rejection{}, std::span<const float>(c.target.values()).first(3 * v),
                      std::span<const float>(draft).first(2 * v),
                      std::span<const Token>(c.tokens.values()), v, c.streams[0], cpu_emitted, ws),
                  Error);
  REQUIRE(cuda_impl::verify_chain_batch(c.params, c.workspace.get(), nullptr) == cudaSuccess);
  CHECK(c.accepted[0] == -1);
  CHECK(c.emitted.values() == std::vector<std::int32_t>(3, -1));
}

TEST_CASE(
    "review fix: the beam selection kernel is launched with the block size it is declared "
    "for",
    "[backend][cuda_kernel]") {
  emu::ledger.clear();
  LedgerBeam beam(4, 64);
  REQUIRE(beam.run() == cudaSuccess);
  CHECK(emu::ledger.counts.launches == 2);
  CHECK(emu::ledger.counts.bounds_mismatches == 0);
}

TEST_CASE(
    "review fix: a beam level reads no workspace byte it has not written (candidate "
    "padding)",
    "[backend][cuda_kernel]") {
  emu::ledger.clear();
  LedgerBeam beam(4, 64);
  REQUIRE(beam.run() == cudaSuccess);
  CHECK(beam.next_counts[0] == 4);
  CHECK(emu::ledger.region("workspace").traffic.unwritten_reads == 0);
}

TEST_CASE(
    "emulated runtime: a capture refuses pageable staging; pinned staging replays with new "
    "inputs",
    "[backend][cuda_kernel]") {
  emu::ledger.clear();
  const std::int64_t v = 128;
  LedgerChain c = probability_chain(2, v, {1, 2, 3, 4});
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  // Pageable host offsets and streams: the staging copy is refused, the capture invalidated.
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  CHECK(cuda_impl::verify_chain_batch(c.params, c.workspace.get(), stream) ==
        cudaErrorStreamCaptureUnsupported);
  CHECK(cudaStreamEndCapture(stream, &graph) == cudaErrorStreamCaptureInvalidated);
  CHECK(emu::ledger.counts.launches == 0);
  (void)cudaGetLastError();

  // Pinned staging: captured once, replayed after the pinned inputs change.
  void* pinned = nullptr;
  REQUIRE(cudaMallocHost(&pinned, 4 * sizeof(std::int32_t) + 2 * sizeof(RandomStream)) ==
          cudaSuccess);
  auto* offsets = static_cast<std::int32_t*>(pinned);
  auto* streams = reinterpret_cast<RandomStream*>(offsets + 4);
  std::copy(c.offsets.begin(), c.offsets.end(), offsets);
  std::copy(c.streams.begin(), c.streams.end(), streams);
  cuda_impl::ChainVerifyParams p = c.params;
  p.draft_offsets = std::span<const std::int32_t>(offsets, c.offsets.size());
  p.streams = std::span<const RandomStream>(streams, c.streams.size());
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal) == cudaSuccess);
  REQUIRE(cuda_impl::verify_chain_batch(p, c.workspace.get(), stream) == cudaSuccess);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  CHECK(emu::ledger.counts.launches == 0);
  CHECK(emu::ledger.counts.captured_launches == 1);
  cudaGraphExec_t exec = nullptr;
  REQUIRE(cudaGraphInstantiate(&exec, graph) == cudaSuccess);

  for (std::uint64_t seed : {21, 22}) {
    for (std::size_t b = 0; b < 2; ++b) {
      streams[b] = ledger_stream(seed, static_cast<std::uint32_t>(b));
      c.streams[b] = streams[b];
    }
    REQUIRE(cudaGraphLaunch(exec, stream) == cudaSuccess);
    const auto replayed = c.emitted.values();
    const auto replayed_accepted = c.accepted.values();
    REQUIRE(cuda_impl::verify_chain_batch(c.params, c.workspace.get(), nullptr) == cudaSuccess);
    CAPTURE(seed);
    CHECK(replayed == c.emitted.values());
    CHECK(replayed_accepted == c.accepted.values());
  }
  CHECK(cudaGraphExecDestroy(exec) == cudaSuccess);
  CHECK(cudaGraphDestroy(graph) == cudaSuccess);
  CHECK(cudaFreeHost(pinned) == cudaSuccess);
}
