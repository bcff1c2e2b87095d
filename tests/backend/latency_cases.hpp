// SPDX-License-Identifier: MIT
// The benchmark's cases (bench/cuda/bench_backend_cuda.cpp: the same rows, warps and calls through
// the public entry points) run once on the emulation with the latency model on: each returns the
// model's account of its call on `gpu`.
#pragma once

#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers then see its built-ins and runtime.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/backend/cuda/draft_batch.hpp"
#include "specdec/backend/cuda/emulation/region_buffer.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/toy/random.hpp"

namespace specdec::test {

/// The rows of a case: the benchmark's flat rows, or LM-like peaked ones.
enum class RowShape { kFlat, kPeaked };

/// Where a case's offsets and streams live: host memory (staged by the call: the form the H200
/// figures were measured with) or the device (read in place: the capturable form an engine runs,
/// with the caller's zeroed counters, DeviceWorkspace::counters, so no memset either).
enum class ArgsIn { kHost, kDevice };

/// The workspace of a case: `bytes` of scratch, and with ArgsIn::kDevice `counters` zeroed words.
struct CaseWorkspace {
  emulation::RegionBuffer<unsigned char> scratch;
  emulation::RegionBuffer<unsigned int> counters;
  CaseWorkspace(std::size_t bytes, std::size_t words, ArgsIn in)
      : scratch("workspace", bytes),
        counters("counters", std::vector<unsigned int>(in == ArgsIn::kDevice ? words : 0)) {}
  backend::DeviceWorkspace get() {
    return {scratch.get(), scratch.size(),
            std::span<unsigned int>(counters.get(), counters.size())};
  }
};

/// `rows` rows of 3 x normal logits (seed 11) in which entry 0 leads by 0.5: the benchmark's.
/// Peaked, five more entries spread over the row stand far above the rest (20 + normal), as an
/// LM's rows do, and entry 0 still leads them by 0.5.
template <class T>
std::vector<T> latency_rows(std::int64_t rows, std::int64_t vocab,
                            RowShape shape = RowShape::kFlat) {
  toy::ToyRandom rng(11);
  const std::int64_t spikes[] = {17, 1030, 1031, vocab / 2, vocab - 1};
  std::vector<T> out(static_cast<std::size_t>(rows * vocab));
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> row(static_cast<std::size_t>(vocab));
    for (float& v : row) v = static_cast<float>(3.0 * rng.normal());
    if (shape == RowShape::kPeaked) {
      for (const std::int64_t x : spikes)
        row[static_cast<std::size_t>(x)] = 20.0f + static_cast<float>(rng.normal());
    }
    row[0] = *std::max_element(row.begin(), row.end()) + 0.5f;
    for (std::size_t x = 0; x < row.size(); ++x)
      out[static_cast<std::size_t>(r * vocab) + x] = static_cast<T>(row[x]);
  }
  return out;
}

/// A chain step from logits, gamma 5, every draft accepted (each sequence's draft rows are its
/// first five target rows, drafting token 0), with one shared host warp, on rows of `shape`.
template <class T>
emulation::CallTime chain_step_time(const emulation::Gpu& gpu, std::int64_t batch,
                                    std::int64_t vocab, const Warp& warp,
                                    RowShape shape = RowShape::kFlat, ArgsIn in = ArgsIn::kHost,
                                    const emulation::LatencyConstants& k = {}) {
  namespace emu = specdec::emulation;
  emu::ledger.clear();  // the blocks' order (seeded by the launch count) whatever ran before
  constexpr std::int64_t gamma = 5;
  const std::vector<T> target_rows = latency_rows<T>(batch * (gamma + 1), vocab, shape);
  std::vector<T> draft_rows;
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto first = target_rows.begin() + b * (gamma + 1) * vocab;
    draft_rows.insert(draft_rows.end(), first, first + gamma * vocab);
  }
  emu::RegionBuffer<T> target("target", target_rows), draft("draft", draft_rows);
  emu::RegionBuffer<Token> tokens("tokens", std::vector<Token>(batch * gamma, 0));
  emu::RegionBuffer<Token> emitted("emitted", static_cast<std::size_t>(batch * (gamma + 1)));
  emu::RegionBuffer<std::int32_t> accepted("accepted", static_cast<std::size_t>(batch));
  const auto backend = specdec::backend::cuda;
  const ChainBatchShape sized{
      .batch = batch, .max_gamma = gamma, .vocab = vocab, .from_logits = true};
  CaseWorkspace workspace(workspace_size(backend, sized), workspace_counters(backend, sized), in);
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1));
  std::vector<RandomStream> streams(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < streams.size(); ++b)
    streams[b].sequence = static_cast<std::uint32_t>(b);
  uniform_draft_offsets(gamma, offsets);
  emu::RegionBuffer<std::int32_t> device_offsets("offsets", offsets);
  emu::RegionBuffer<RandomStream> device_streams("streams", streams);
  const std::vector<Warp> warps{warp};
  ChainBatchLogitsArgs<T> args{
      .draft_offsets = offsets,
      .target_logits = MatrixView<const T>(target.get(), batch * (gamma + 1), vocab),
      .draft_logits = MatrixView<const T>(draft.get(), batch * gamma, vocab),
      .warps = warps,
      .draft_tokens = std::span<const Token>(tokens.get(), static_cast<std::size_t>(batch * gamma)),
      .streams = streams,
      .emitted = std::span<Token>(emitted.get(), static_cast<std::size_t>(batch * (gamma + 1))),
      .accepted = std::span<std::int32_t>(accepted.get(), static_cast<std::size_t>(batch))};
  if (in == ArgsIn::kDevice) {
    args.draft_offsets = on_device(device_offsets.get(), offsets.size());
    args.streams = on_device(device_streams.get(), streams.size());
  }
  emu::latency.start(gpu, k);
  verify_chain_batch_logits(backend, args, workspace.get());
  return emu::latency.stop();
}

/// The warp of `rows` rows of bf16 logits into fp32 probabilities.
inline emulation::CallTime warp_time(const emulation::Gpu& gpu, std::int64_t rows,
                                     std::int64_t vocab, const Warp& warp,
                                     ArgsIn in = ArgsIn::kHost,
                                     const emulation::LatencyConstants& k = {}) {
  namespace emu = specdec::emulation;
  emu::ledger.clear();  // the blocks' order (seeded by the launch count) whatever ran before
  using T = Eigen::bfloat16;
  emu::RegionBuffer<T> logits("logits", latency_rows<T>(rows, vocab));
  emu::RegionBuffer<float> warped("warped", static_cast<std::size_t>(rows * vocab));
  const auto backend = specdec::backend::cuda;
  const WarpBatchShape sized{rows, vocab};
  CaseWorkspace workspace(workspace_size(backend, sized), workspace_counters(backend, sized), in);
  emu::latency.start(gpu, k);
  warp_logits_batch(backend,
                    WarpBatchArgs<T>{.logits = MatrixView<const T>(logits.get(), rows, vocab),
                                     .warps = std::span<const Warp>(&warp, 1),
                                     .warped = MatrixView<float>(warped.get(), rows, vocab)},
                    workspace.get());
  return emu::latency.stop();
}

/// Gumbel-top-k, k = 8, over `rows` rows of fp32 log-weights.
inline emulation::CallTime gumbel_time(const emulation::Gpu& gpu, std::int64_t rows,
                                       std::int64_t vocab, ArgsIn in = ArgsIn::kHost,
                                       const emulation::LatencyConstants& k = {}) {
  namespace emu = specdec::emulation;
  emu::ledger.clear();  // the blocks' order (seeded by the launch count) whatever ran before
  constexpr std::int64_t kK = 8;
  emu::RegionBuffer<float> logits("logits", latency_rows<float>(rows, vocab));
  emu::RegionBuffer<Token> tokens("tokens", static_cast<std::size_t>(rows * kK));
  emu::RegionBuffer<float> values("values", static_cast<std::size_t>(rows * kK));
  emu::RegionBuffer<std::int32_t> counts("counts", static_cast<std::size_t>(rows));
  std::vector<RandomStream> streams(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < streams.size(); ++r) {
    streams[r].sequence = static_cast<std::uint32_t>(r);
    streams[r].domain = Domain::kDraft;
  }
  emu::RegionBuffer<RandomStream> device_streams("streams", streams);
  const auto backend = specdec::backend::cuda;
  const GumbelTopKBatchShape sized{rows, vocab, kK};
  CaseWorkspace workspace(workspace_size(backend, sized), workspace_counters(backend, sized), in);
  emu::latency.start(gpu, k);
  gumbel_top_k_batch(
      backend,
      GumbelTopKBatchArgs<float>{
          .kind = RowKind::kLogWeights,
          .rows = MatrixView<const float>(logits.get(), rows, vocab),
          .k = kK,
          .streams = in == ArgsIn::kDevice ? on_device(device_streams.get(), streams.size())
                                           : Resident<const RandomStream>(streams),
          .tokens = MatrixView<Token>(tokens.get(), rows, kK),
          .values = MatrixView<float>(values.get(), rows, kK),
          .counts = std::span<std::int32_t>(counts.get(), static_cast<std::size_t>(rows))},
      workspace.get());
  return emu::latency.stop();
}

}  // namespace specdec::test
