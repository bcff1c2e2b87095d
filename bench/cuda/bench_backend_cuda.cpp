// SPDX-License-Identifier: MIT
// Batched warps and batched chain verification on the CUDA backend against a copy kernel moving the
// same bytes, in one run: B = 1, 16, 64, 256 rows (sequences), V = 32000 and 128256, fp32 and bf16
// logits; chain verification with gamma = 5, warps included; batched Gumbel-top-k (k = 8) and one
// stochastic-beam-search level (W = 4); packed tree masks and positions of B trees.
#include <cuda_runtime_api.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdio>
#include <string_view>
#include <vector>

#include "copy_kernel.hpp"
#include "specdec/backend/cuda/draft_batch.hpp"
#include "specdec/backend/cuda/tree_mask_batch.hpp"
#include "specdec/backend/cuda/verify_batch.hpp"
#include "specdec/backend/cuda/warp_batch.hpp"
#include "specdec/toy/random.hpp"

namespace {

void check(cudaError_t code, const char* what) {
  if (code != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(code));
    std::exit(1);
  }
}

/// Profile mode (`specdec_bench_cuda profile`): one warm-up and one timed call per case, for a
/// profiler that replays every kernel.
bool profile_mode = false;

/// Mean milliseconds per call of `fn` over `iterations` calls after a warm-up, on `stream`.
template <class F>
float time_ms(cudaStream_t stream, int iterations, F&& fn) {
  if (profile_mode) iterations = 1;
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < (profile_mode ? 1 : 3); ++i) fn();
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  for (int i = 0; i < iterations; ++i) fn();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.0f;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / static_cast<float>(iterations);
}

template <class T>
void run_case(cudaStream_t stream, std::int64_t rows, std::int64_t vocab, const char* dtype,
              const specdec::Warp& warp, const char* warp_name) {
  specdec::toy::ToyRandom rng(7);
  std::vector<T> host(static_cast<std::size_t>(rows * vocab));
  for (auto& x : host) x = static_cast<T>(static_cast<float>(3.0 * rng.normal()));
  T* logits = nullptr;
  float* warped = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const std::size_t bytes = specdec::workspace_size(backend, specdec::WarpBatchShape{rows, vocab});
  check(cudaMalloc(reinterpret_cast<void**>(&logits), host.size() * sizeof(T)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&warped), host.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(logits, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  const std::vector<specdec::Warp> warps = {warp};
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const int iterations = rows * vocab > 4'000'000 ? 20 : 100;
  const float warp_ms = time_ms(stream, iterations, [&] {
    specdec::warp_logits_batch(backend, specdec::MatrixView<const T>(logits, rows, vocab), warps,
                               specdec::MatrixView<float>(warped, rows, vocab), ws);
  });
  const float copy_ms = time_ms(stream, iterations, [&] {
    check(specdec::bench::copy_to_float(logits, sizeof(T) == 2, warped, rows * vocab, stream),
          "copy_to_float");
  });
  std::printf("%-10s %-5s %5lld %7lld %12.1f %12.1f %10.2f\n", warp_name, dtype,
              static_cast<long long>(rows), static_cast<long long>(vocab), warp_ms * 1e3,
              copy_ms * 1e3, warp_ms / copy_ms);
  cudaFree(logits);
  cudaFree(warped);
  cudaFree(scratch);
}

/// Batched chain verification from logits (warps included) of `batch` sequences, gamma = 5. The
/// draft logits equal the target logits and token 0 leads every row, so every draft token is
/// accepted: the worst case, where all 2 gamma + 1 rows of every sequence are warped. Rows are
/// 3 x normal logits, or `peaked` as an LM's: five entries spread over the row far above the
/// rest (20 + normal), token 0 still leading them. The read kernel reads the same logits once.
template <class T>
void run_chain_case(cudaStream_t stream, std::int64_t batch, std::int64_t vocab, const char* dtype,
                    const specdec::Warp& warp, const char* warp_name, bool peaked = false) {
  constexpr std::int64_t gamma = 5;
  // Drawing every row on the host would dominate the run at B = 256: 64 rows are drawn once per
  // vocabulary and reused, rotated by the row's index past 64, so no two rows are equal.
  constexpr std::int64_t kPoolRows = 64;
  static std::vector<float> pool;
  if (static_cast<std::int64_t>(pool.size()) != kPoolRows * vocab) {
    specdec::toy::ToyRandom rng(11);
    pool.resize(static_cast<std::size_t>(kPoolRows * vocab));
    for (auto& x : pool) x = static_cast<float>(3.0 * rng.normal());
  }
  const std::int64_t rows = batch * (gamma + 1);
  std::vector<T> host_target(static_cast<std::size_t>(rows * vocab));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* from = pool.data() + (r % kPoolRows) * vocab;
    const std::int64_t shift = r / kPoolRows;
    T* to = host_target.data() + r * vocab;
    float top = from[shift % vocab];
    for (std::int64_t x = 0; x < vocab; ++x) {
      to[x] = static_cast<T>(from[(x + shift) % vocab]);
      top = std::max(top, from[(x + shift) % vocab]);
    }
    if (peaked) {
      const std::int64_t spikes[] = {17, 1030, 1031, vocab / 2, vocab - 1};
      for (int j = 0; j < 5; ++j) {
        const float spike = 20.0f + from[(j + shift) % vocab] / 3.0f;  // 20 + a standard normal
        to[spikes[j]] = static_cast<T>(spike);
        top = std::max(top, spike);
      }
    }
    to[0] = static_cast<T>(top + 0.5f);  // token 0 leads: first in any nucleus
  }
  // Each sequence's draft rows are its first gamma target rows: every drafted token 0 is accepted.
  std::vector<T> host_draft;
  host_draft.reserve(static_cast<std::size_t>(batch * gamma * vocab));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto first = host_target.begin() + static_cast<std::ptrdiff_t>(b * (gamma + 1) * vocab);
    host_draft.insert(host_draft.end(), first, first + static_cast<std::ptrdiff_t>(gamma * vocab));
  }
  std::vector<specdec::Token> host_tokens(static_cast<std::size_t>(batch * gamma), 0);
  std::vector<specdec::RandomStream> streams(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < streams.size(); ++b)
    streams[b].sequence = static_cast<std::uint32_t>(b);
  T *target = nullptr, *draft = nullptr;
  specdec::Token *tokens = nullptr, *emitted = nullptr;
  std::int32_t* accepted = nullptr;
  float* copied = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const specdec::ChainBatchShape shape{
      .batch = batch, .max_gamma = gamma, .vocab = vocab, .from_logits = true};
  const std::size_t bytes = specdec::workspace_size(backend, shape);
  const std::size_t elements = host_target.size() + host_draft.size();
  check(cudaMalloc(reinterpret_cast<void**>(&target), host_target.size() * sizeof(T)),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&draft), host_draft.size() * sizeof(T)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&tokens), host_tokens.size() * sizeof(specdec::Token)),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&emitted),
                   static_cast<std::size_t>(batch * (gamma + 1)) * sizeof(specdec::Token)),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&accepted), static_cast<std::size_t>(batch) * 4),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&copied), host_target.size() * sizeof(float)),
        "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(target, host_target.data(), host_target.size() * sizeof(T),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(draft, host_draft.data(), host_draft.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(tokens, host_tokens.data(), host_tokens.size() * sizeof(specdec::Token),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  const std::vector<specdec::Warp> warps = {warp};
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const int iterations = batch * vocab > 1'000'000 ? 10 : 50;
  std::vector<std::int32_t> offsets(static_cast<std::size_t>(batch + 1));
  const specdec::ChainBatchLogitsArgs<T> args{
      .draft_offsets = specdec::uniform_draft_offsets(gamma, offsets),
      .target_logits = specdec::MatrixView<const T>(target, batch * (gamma + 1), vocab),
      .draft_logits = specdec::MatrixView<const T>(draft, batch * gamma, vocab),
      .warps = warps,
      .draft_tokens =
          std::span<const specdec::Token>(tokens, static_cast<std::size_t>(batch * gamma)),
      .streams = streams,
      .emitted = std::span<specdec::Token>(emitted, static_cast<std::size_t>(batch * (gamma + 1))),
      .accepted = std::span<std::int32_t>(accepted, static_cast<std::size_t>(batch))};
  const float chain_ms =
      time_ms(stream, iterations, [&] { specdec::verify_chain_batch_logits(backend, args, ws); });
  // The same call with the offsets and streams already in device memory (the graph-safe form):
  // no host copy.
  std::int32_t* device_offsets = nullptr;
  specdec::RandomStream* device_streams = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&device_offsets), offsets.size() * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&device_streams),
                   streams.size() * sizeof(specdec::RandomStream)),
        "cudaMalloc");
  check(cudaMemcpy(device_offsets, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(device_streams, streams.data(), streams.size() * sizeof(specdec::RandomStream),
                   cudaMemcpyHostToDevice),
        "cudaMemcpy");
  auto resident = args;
  resident.draft_offsets = specdec::on_device(device_offsets, offsets.size());
  resident.streams = specdec::on_device(device_streams, streams.size());
  // ... and with counters zeroed once (DeviceWorkspace::counters): no memset either.
  const std::size_t words = specdec::workspace_counters(backend, shape);
  unsigned int* counters = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&counters), words * sizeof(unsigned int)),
        "cudaMalloc");
  check(cudaMemset(counters, 0, words * sizeof(unsigned int)), "cudaMemset");
  const specdec::backend::DeviceWorkspace resident_ws{scratch, bytes, {counters, words}};
  const float resident_ms = time_ms(stream, iterations, [&] {
    specdec::verify_chain_batch_logits(backend, resident, resident_ws);
  });
  // The floor: the target logits and then the draft logits read once.
  const float read_ms = time_ms(stream, iterations, [&] {
    check(specdec::bench::read_once(target, sizeof(T) == 2, copied,
                                    static_cast<std::int64_t>(host_target.size()), stream),
          "read_once");
    check(specdec::bench::read_once(draft, sizeof(T) == 2, copied,
                                    static_cast<std::int64_t>(host_draft.size()), stream),
          "read_once");
  });
  // The timed calls must have done the work: every sequence accepts all its drafts.
  std::vector<std::int32_t> counts(static_cast<std::size_t>(batch));
  check(cudaMemcpy(counts.data(), accepted, counts.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const bool all = std::all_of(counts.begin(), counts.end(), [](std::int32_t a) { return a == gamma; });
  std::printf("%-10s %-5s %-6s %5lld %7lld %12.1f %12.1f %12.1f %10.2f   (%zu logits%s)\n",
              warp_name, dtype, peaked ? "peaked" : "flat", static_cast<long long>(batch),
              static_cast<long long>(vocab), chain_ms * 1e3, resident_ms * 1e3, read_ms * 1e3,
              resident_ms / read_ms, elements, all ? "" : "; NOT every draft accepted");
  cudaFree(device_offsets);
  cudaFree(device_streams);
  cudaFree(counters);
  cudaFree(target);
  cudaFree(draft);
  cudaFree(tokens);
  cudaFree(emitted);
  cudaFree(accepted);
  cudaFree(copied);
  cudaFree(scratch);
}

/// Batched Gumbel-top-k, k = 8, over `rows` rows of log-weights (logits) of type T; the copy
/// kernel reads the same rows once.
template <class T>
void run_top_k_case(cudaStream_t stream, std::int64_t rows, std::int64_t vocab, const char* dtype) {
  constexpr std::int64_t k = 8;
  specdec::toy::ToyRandom rng(5);
  std::vector<T> host(static_cast<std::size_t>(rows * vocab));
  for (auto& x : host) x = static_cast<T>(static_cast<float>(3.0 * rng.normal()));
  std::vector<specdec::RandomStream> streams(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < streams.size(); ++r) {
    streams[r].sequence = static_cast<std::uint32_t>(r);
    streams[r].domain = specdec::Domain::kDraft;
  }
  T* logits = nullptr;
  float *values = nullptr, *copied = nullptr;
  specdec::Token* tokens = nullptr;
  std::int32_t* counts = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const std::size_t bytes =
      specdec::workspace_size(backend, specdec::GumbelTopKBatchShape{rows, vocab, k});
  check(cudaMalloc(reinterpret_cast<void**>(&logits), host.size() * sizeof(T)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&copied), host.size() * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&values), static_cast<std::size_t>(rows * k) * 4),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&tokens), static_cast<std::size_t>(rows * k) * 4),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&counts), static_cast<std::size_t>(rows) * 4),
        "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(logits, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const int iterations = rows * vocab > 4'000'000 ? 20 : 100;
  const float top_k_ms = time_ms(stream, iterations, [&] {
    specdec::gumbel_top_k_batch(
        backend,
        specdec::GumbelTopKBatchArgs<T>{
            .kind = specdec::RowKind::kLogWeights,
            .rows = specdec::MatrixView<const T>(logits, rows, vocab),
            .k = k,
            .streams = streams,
            .tokens = specdec::MatrixView<specdec::Token>(tokens, rows, k),
            .values = specdec::MatrixView<float>(values, rows, k),
            .counts = std::span<std::int32_t>(counts, static_cast<std::size_t>(rows))},
        ws);
  });
  const float copy_ms = time_ms(stream, iterations, [&] {
    check(specdec::bench::copy_to_float(logits, sizeof(T) == 2, copied, rows * vocab, stream),
          "copy_to_float");
  });
  std::printf("%-10s %-5s %5lld %7lld %12.1f %12.1f %10.2f\n", "top-8", dtype,
              static_cast<long long>(rows), static_cast<long long>(vocab), top_k_ms * 1e3,
              copy_ms * 1e3, top_k_ms / copy_ms);
  cudaFree(logits);
  cudaFree(copied);
  cudaFree(values);
  cudaFree(tokens);
  cudaFree(counts);
  cudaFree(scratch);
}

/// One stochastic-beam-search level, W = 4 live beams in each of `batch` sequences (B W fp32
/// probability rows); the copy kernel reads the same rows once.
void run_beam_case(cudaStream_t stream, std::int64_t batch, std::int64_t vocab) {
  constexpr std::int64_t width = 4;
  const std::int64_t rows = batch * width;
  specdec::toy::ToyRandom rng(8);
  std::vector<float> host(static_cast<std::size_t>(rows * vocab));
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = specdec::toy::dirichlet(vocab, 0.5, rng);
    std::copy(row.begin(), row.end(), host.begin() + r * vocab);
  }
  const std::vector<std::int32_t> host_counts(static_cast<std::size_t>(batch), width);
  std::vector<std::int32_t> host_nodes(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < host_nodes.size(); ++i)
    host_nodes[i] = static_cast<std::int32_t>(i % width);
  const std::vector<float> host_zeros(static_cast<std::size_t>(rows), -1.0f);
  std::vector<specdec::RandomStream> streams(static_cast<std::size_t>(batch));
  for (std::size_t b = 0; b < streams.size(); ++b) {
    streams[b].sequence = static_cast<std::uint32_t>(b);
    streams[b].domain = specdec::Domain::kDraft;
  }
  float *draft = nullptr, *copied = nullptr, *phis = nullptr, *psis = nullptr;
  float *next_lp = nullptr, *next_sc = nullptr;
  std::int32_t *counts = nullptr, *nodes = nullptr, *parents = nullptr, *tokens = nullptr;
  std::int32_t* next_counts = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const std::size_t bytes =
      specdec::workspace_size(backend, specdec::BeamLevelBatchShape{batch, width, vocab});
  const auto cells = static_cast<std::size_t>(rows) * 4;
  check(cudaMalloc(reinterpret_cast<void**>(&draft), host.size() * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&copied), host.size() * 4), "cudaMalloc");
  for (float** p : {&phis, &psis, &next_lp, &next_sc})
    check(cudaMalloc(reinterpret_cast<void**>(p), cells), "cudaMalloc");
  for (std::int32_t** p : {&nodes, &parents, &tokens})
    check(cudaMalloc(reinterpret_cast<void**>(p), cells), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&counts), static_cast<std::size_t>(batch) * 4),
        "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&next_counts), static_cast<std::size_t>(batch) * 4),
        "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(draft, host.data(), host.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(counts, host_counts.data(), host_counts.size() * 4, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(nodes, host_nodes.data(), cells, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(phis, host_zeros.data(), cells, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemcpy(psis, host_zeros.data(), cells, cudaMemcpyHostToDevice), "cudaMemcpy");
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const int iterations = rows * vocab > 4'000'000 ? 20 : 100;
  using specdec::MatrixView;
  const float beam_ms = time_ms(stream, iterations, [&] {
    specdec::stochastic_beam_level_batch(
        backend,
        specdec::BeamLevelBatchArgs{
            .draft_rows = MatrixView<const float>(draft, rows, vocab),
            .beam_counts = std::span<const std::int32_t>(counts, static_cast<std::size_t>(batch)),
            .nodes = MatrixView<const std::int32_t>(nodes, batch, width),
            .log_probs = MatrixView<const float>(phis, batch, width),
            .scores = MatrixView<const float>(psis, batch, width),
            .streams = streams,
            .next_parents = MatrixView<std::int32_t>(parents, batch, width),
            .next_tokens = MatrixView<specdec::Token>(tokens, batch, width),
            .next_log_probs = MatrixView<float>(next_lp, batch, width),
            .next_scores = MatrixView<float>(next_sc, batch, width),
            .next_counts = std::span<std::int32_t>(next_counts, static_cast<std::size_t>(batch))},
        ws);
  });
  const float copy_ms = time_ms(stream, iterations, [&] {
    check(specdec::bench::copy_to_float(draft, false, copied, rows * vocab, stream),
          "copy_to_float");
  });
  std::printf("%-10s %-5s %5lld %7lld %12.1f %12.1f %10.2f\n", "beam W=4", "fp32",
              static_cast<long long>(batch), static_cast<long long>(vocab), beam_ms * 1e3,
              copy_ms * 1e3, beam_ms / copy_ms);
  cudaFree(draft);
  cudaFree(copied);
  for (float* p : {phis, psis, next_lp, next_sc}) cudaFree(p);
  for (std::int32_t* p : {nodes, parents, tokens, counts, next_counts}) cudaFree(p);
  cudaFree(scratch);
}

/// Packed masks and positions of B trees of `nodes` nodes each (every node's parent drawn among
/// the earlier nodes), against copying the masks' bytes once.
void run_tree_mask_case(cudaStream_t stream, std::int64_t batch, std::int32_t nodes) {
  specdec::toy::ToyRandom rng(13);
  std::vector<std::int32_t> offsets{0}, host_parents, contexts;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int32_t i = 0; i < nodes; ++i) {
      host_parents.push_back(static_cast<std::int32_t>(rng.uniform() * static_cast<float>(i + 1)) -
                             1);
    }
    offsets.push_back(offsets.back() + nodes);
    contexts.push_back(100 + static_cast<std::int32_t>(b));
  }
  const auto n = host_parents.size();
  const std::int64_t words = specdec::packed_mask_words(nodes);
  const auto cells = static_cast<std::size_t>(static_cast<std::int64_t>(n) * words);
  std::int32_t *parents = nullptr, *positions = nullptr;
  std::uint32_t* masks = nullptr;
  float* copied = nullptr;
  void* scratch = nullptr;
  const auto backend = specdec::backend::cuda.on(stream);
  const std::size_t bytes = specdec::workspace_size(backend, specdec::TreeMaskBatchShape{batch});
  std::int32_t* tokens = nullptr;  // sized for the trees; the mask and position kernels skip them
  check(cudaMalloc(reinterpret_cast<void**>(&tokens), n * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&parents), n * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&positions), n * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&masks), cells * 4), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&copied), cells * 4), "cudaMalloc");
  check(cudaMalloc(&scratch, bytes), "cudaMalloc");
  check(cudaMemcpy(parents, host_parents.data(), n * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
  const specdec::backend::DeviceWorkspace ws{scratch, bytes};
  const specdec::TreeView device_trees{{tokens, n}, {parents, n}};
  const float masks_ms = time_ms(stream, 100, [&] {
    specdec::packed_tree_masks_batch(
        backend, offsets, device_trees,
        specdec::MatrixView<std::uint32_t>(masks, static_cast<std::int64_t>(n), words), ws);
  });
  const float positions_ms = time_ms(stream, 100, [&] {
    specdec::tree_positions_batch(backend, offsets, device_trees, contexts,
                                  std::span<std::int32_t>(positions, n), ws);
  });
  const float copy_ms = time_ms(stream, 100, [&] {
    check(specdec::bench::copy_to_float(masks, false, copied, static_cast<std::int64_t>(cells),
                                        stream),
          "copy_to_float");
  });
  std::printf("%-10s %5lld %7d %12.1f %12.1f %12.1f %10.2f\n", "masks",
              static_cast<long long>(batch), nodes, masks_ms * 1e3, positions_ms * 1e3,
              copy_ms * 1e3, masks_ms / copy_ms);
  for (void* p :
       {static_cast<void*>(tokens), static_cast<void*>(parents), static_cast<void*>(positions),
        static_cast<void*>(masks), static_cast<void*>(copied), scratch}) {
    cudaFree(p);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Optional argument: one section (warp, chain, draft, tree), `cuts` for the top-k and min-p rows
  // of the warp and chain sections, or `profile` for a few cases timed once each, for a profiler.
  const std::string_view only = argc > 1 ? argv[1] : "";
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured
  profile_mode = only == "profile";
  auto wanted = [&](std::string_view section) { return only.empty() || only == section; };
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no CUDA device: nothing to benchmark");
    return 0;
  }
  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const specdec::Warp top_p{.temperature = 0.8f, .top_p = 0.9f};
  const specdec::Warp top_k{.temperature = 0.8f, .top_k = 50};
  const specdec::Warp min_p{.temperature = 0.8f, .min_p = 0.1f};
  if (profile_mode) {
    run_chain_case<float>(stream, 1, 128256, "fp32", top_p, "top-p 0.9");
    run_chain_case<float>(stream, 256, 128256, "fp32", top_p, "top-p 0.9");
    run_chain_case<Eigen::bfloat16>(stream, 16, 32000, "bf16", {}, "none");
    run_chain_case<float>(stream, 16, 32000, "fp32", top_p, "top-p 0.9");
    run_chain_case<Eigen::bfloat16>(stream, 1, 128256, "bf16", {}, "none");
    run_chain_case<Eigen::bfloat16>(stream, 1, 128256, "bf16", top_k, "top-k 50");
    run_chain_case<Eigen::bfloat16>(stream, 1, 128256, "bf16", min_p, "min-p 0.1");
    run_case<float>(stream, 1, 128256, "fp32", top_p, "top-p 0.9");
    run_case<Eigen::bfloat16>(stream, 1, 128256, "bf16", top_k, "top-k 50");
    run_top_k_case<float>(stream, 1, 128256, "fp32");
    cudaStreamDestroy(stream);
    return 0;
  }
  if (only == "cuts") {  // the top-k and min-p rows of the warp and chain sections alone
    for (std::int64_t vocab : {32000, 128256}) {
      for (std::int64_t rows : {1, 16, 256}) {
        run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", top_k, "top-k 50");
        run_chain_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", top_k, "top-k 50");
        run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", min_p, "min-p 0.1");
        run_chain_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", min_p, "min-p 0.1");
      }
    }
  }
  if (wanted("warp")) {
    std::printf("%-10s %-5s %5s %7s %12s %12s %10s\n", "warp", "dtype", "B", "V", "warp(us)",
                "copy(us)", "x copy");
    for (std::int64_t vocab : {32000, 128256}) {
      for (std::int64_t rows : {1, 16, 64, 256}) {
        run_case<float>(stream, rows, vocab, "fp32", top_p, "top-p 0.9");
        run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", top_p, "top-p 0.9");
        run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", top_k, "top-k 50");
        run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", min_p, "min-p 0.1");
        run_case<Eigen::bfloat16>(stream, rows, vocab, "bf16", {.temperature = 0.8f}, "T 0.8");
      }
    }
  }
  if (wanted("chain")) {
    std::printf(
        "\nbatched chain verification, gamma = 5, from logits, every token accepted;\n"
        "resident: offsets and streams already in device memory (no host copy) and\n"
        "the caller's zeroed counters (no memset): the capturable form an engine runs\n");
    std::printf("read: the logits read once; x read: resident / read\n");
    std::printf("%-10s %-5s %-6s %5s %7s %12s %12s %12s %10s\n", "warp", "dtype", "rows", "B", "V",
                "chain(us)", "resident(us)", "read(us)", "x read");
    for (std::int64_t vocab : {32000, 128256}) {
      for (std::int64_t batch : {1, 16, 64, 256}) {
        run_chain_case<float>(stream, batch, vocab, "fp32", top_p, "top-p 0.9");
        run_chain_case<float>(stream, batch, vocab, "fp32", top_p, "top-p 0.9", true);
        run_chain_case<Eigen::bfloat16>(stream, batch, vocab, "bf16", top_p, "top-p 0.9");
        run_chain_case<Eigen::bfloat16>(stream, batch, vocab, "bf16", {}, "none");
        run_chain_case<Eigen::bfloat16>(stream, batch, vocab, "bf16", top_k, "top-k 50");
        run_chain_case<Eigen::bfloat16>(stream, batch, vocab, "bf16", min_p, "min-p 0.1");
      }
    }
  }
  if (wanted("draft")) {
    std::printf("\nbatched drafting: Gumbel-top-k (k = 8) over B rows of logits; one beam level\n");
    std::printf("%-10s %-5s %5s %7s %12s %12s %10s\n", "op", "dtype", "B", "V", "draft(us)",
                "copy(us)", "x copy");
    for (std::int64_t vocab : {32000, 128256}) {
      for (std::int64_t rows : {1, 16, 64, 256}) {
        run_top_k_case<float>(stream, rows, vocab, "fp32");
        run_top_k_case<Eigen::bfloat16>(stream, rows, vocab, "bf16");
      }
      for (std::int64_t batch : {1, 16, 64}) run_beam_case(stream, batch, vocab);
    }
  }
  if (wanted("tree")) {
    std::printf("\ntree attention inputs: packed masks and positions of B trees of N nodes\n");
    std::printf("%-10s %5s %7s %12s %12s %12s %10s\n", "op", "B", "N", "masks(us)", "pos(us)",
                "copy(us)", "x copy");
    for (std::int64_t batch : {1, 16, 64, 256}) {
      for (std::int32_t nodes : {64, 256}) run_tree_mask_case(stream, batch, nodes);
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}
