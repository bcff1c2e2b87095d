// SPDX-License-Identifier: MIT
// The batched chain verification kernel: one block per sequence, standard rejection sampling with
// the draws of verify_chain, rows warped on the fly when they arrive as logits.
//
// The accept test u * draft(x) < target(x) reads two entries and is bit-identical to the CPU's.
// A rejection samples the residual [target - draft]+ by inverse CDF without materialising it
// (each thread sums a contiguous chunk, a prefix over the chunks finds the one holding the
// threshold); its sums are taken in another order than the CPU's, so a token can differ only when
// the threshold falls within rounding of a cumulative sum.
// IWYU pragma: private
#pragma once

#include <cstdint>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/ragged_block.cuh"
#include "specdec/backend/cuda/detail/status_write.cuh"
#include "specdec/backend/cuda/detail/warp_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/ragged.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/verify/residual_walk.hpp"

namespace specdec::backend::cuda_impl::detail {

struct MinInt {
  __device__ __forceinline__ int operator()(int a, int b) const { return a < b ? a : b; }
};
struct MaxInt {
  __device__ __forceinline__ int operator()(int a, int b) const { return a > b ? a : b; }
};

struct ChainShared {
  Shared warp;
  double prefix[kWarpThreads];
  double total;
  int ints[32];
};

/// A residual entry [target - draft]+: the CPU's scaled_residual at scale 1.
__device__ __forceinline__ float positive_residual(float target, float draft) {
  return specdec::detail::scaled_residual(target, 1.0f, draft);
}

/// The inverse-CDF rule of verify/residual_walk.hpp (detail::sample_row) on the non-negative row
/// value(0 .. n-1) (any scale) with uniform u, by the whole block: each thread sums a contiguous
/// chunk, a prefix over the chunks finds the one holding the threshold, and that chunk is scanned
/// by the shared detail::inverse_cdf_scan.
template <class Value>
__device__ __forceinline__ int sample_block(const Value& value, int n, float u, ChainShared& sh) {
  const int threads = static_cast<int>(blockDim.x);
  const int tid = static_cast<int>(threadIdx.x);
  const int chunk = (n + threads - 1) / threads;
  const int begin = tid * chunk < n ? tid * chunk : n;
  const int end = begin + chunk < n ? begin + chunk : n;
  double local = 0.0;
  for (int i = begin; i < end; ++i) {
    const float v = value(i);
    if (v > 0.0f) local += v;
  }
  __syncthreads();
  sh.prefix[tid] = local;
  __syncthreads();
  if (tid == 0) {
    double running = 0.0;
    for (int t = 0; t < threads; ++t) {
      const double s = sh.prefix[t];
      sh.prefix[t] = running;
      running += s;
    }
    sh.total = running;
  }
  __syncthreads();
  const double threshold = u * sh.total;
  double running = sh.prefix[tid];
  int found = 0x7fffffff;
  if (running + local > threshold) {
    const auto i = specdec::detail::inverse_cdf_scan(value, begin, end, running, threshold);
    if (i >= 0) found = static_cast<int>(i);
  }
  const int last = static_cast<int>(specdec::detail::last_positive(value, begin, end, 0));
  found = block_all_reduce(found, MinInt{}, sh.ints);
  if (found != 0x7fffffff) return found;
  return block_all_reduce(last, MaxInt{}, sh.ints);
}

/// Reads a probability row of type float.
struct RowValue {
  Global<const float> row;
  __device__ __forceinline__ float operator()(int i) const { return row[i]; }
};
/// Reads [target - draft]+ entry by entry.
struct ResidualValue {
  Global<const float> target;
  Global<const float> draft;
  __device__ __forceinline__ float operator()(int i) const {
    return positive_residual(target[i], draft[i]);
  }
};

/// One block per sequence b (blockIdx.x) of a ragged batch: its gamma = offsets[b + 1] -
/// offsets[b] draft tokens start at offsets[b], its target rows and emitted tokens at
/// offsets[b] + b (the layout of specdec::ChainBatchArgs; `offsets` in device memory).
/// kLogits = false: `target` / `draft` are warped fp32 rows (T = float) read in place;
/// kLogits = true: they are logits of type T, warped on the fly (target row i and draft row i just
/// before position i is tested, so rows after a rejection are never warped) into
/// rows_ws[b * 2n ..], with warps[b] (or shared_warp when warps is null).
/// Draws: those of specdec::verify_chain_batch (position i uses streams[b].at_position(position +
/// i): draw 0 tests, draw 1 corrects; the bonus token is draw 0 at position + gamma). emitted gets
/// the tokens then -1 padding; accepted[b] the count. A draft token outside [0, n), or one whose
/// draft probability is not positive at a tested position (what the CPU rejects as bad input),
/// is never read past the row nor accepted: the sequence gets accepted[b] = -1 and only -1 tokens.
template <bool kLogits, class T>
__global__ void __launch_bounds__(kWarpThreads) verify_chain_kernel(ChainKernelArgs<T> args) {
  const auto& [target, target_stride, draft, draft_stride, offsets, tokens, vocab, streams,
               shared_warp, warps, rows_ws, emitted, accepted, status] = args;
  const int n = static_cast<int>(vocab);
  expect_block_threads(kWarpThreads);
  __shared__ ChainShared sh;
  const auto [b, first_draft, gamma, first_target, stream] = ragged_block(offsets, streams);
  const DeviceWarp w = warps == nullptr ? shared_warp : warps[b];
  const Global<float> warped_target =
      kLogits ? rows_ws + b * 2 * static_cast<std::int64_t>(n) : Global<float>();
  const Global<float> warped_draft = kLogits ? warped_target + n : Global<float>();
  const Global<std::int32_t> out = emitted + first_target;
  bool invalid = any_token_outside(tokens + first_draft, gamma, n);
  SequenceStatus code = invalid ? SequenceStatus::kTokenOutsideVocab : SequenceStatus::kOk;
  int i = 0;
  for (; i < gamma && !invalid; ++i) {
    const Global<const T> t_row = target + (first_target + i) * target_stride;
    const Global<const T> d_row = draft + (first_draft + i) * draft_stride;
    Global<const float> tp;
    Global<const float> dp;
    if constexpr (kLogits) {
      __syncthreads();  // every thread has finished reading the previous position's rows
      warp_row(t_row, warped_target, n, w, sh.warp);
      warp_row(d_row, warped_draft, n, w, sh.warp);
      __syncthreads();
      tp = warped_target;
      dp = warped_draft;
    } else {
      tp = t_row;
      dp = d_row;
    }
    const std::int32_t x = tokens[first_draft + i];
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(i));
    const float qx = dp[x];
    if (!(qx > 0.0f)) {  // the draft cannot have drawn x
      invalid = true;
      code = SequenceStatus::kZeroDraftProbability;
      break;
    }
    // The CPU's test, mass = 1 before any residual.
    if (specdec::detail::accepts(s.uniform(0), qx, 1.0f, tp[x])) {
      if (threadIdx.x == 0) out[i] = x;
      continue;
    }
    double local = 0.0;
    for (int j = static_cast<int>(threadIdx.x); j < n; j += static_cast<int>(blockDim.x)) {
      local += positive_residual(tp[j], dp[j]);
    }
    const double mass = block_all_reduce(local, Plus{}, sh.warp.d);
    const float u = s.uniform(1);
    // An empty residual (mass below the floor) falls back to the target row.
    const int token = mass >= kResidualFloor && mass > 0.0
                          ? sample_block(ResidualValue{tp, dp}, n, u, sh)
                          : sample_block(RowValue{tp}, n, u, sh);
    if (threadIdx.x == 0) out[i] = token;
    break;
  }
  if (i == gamma && !invalid) {
    const Global<const T> t_row = target + (first_target + gamma) * target_stride;
    Global<const float> tp;
    if constexpr (kLogits) {
      __syncthreads();
      warp_row(t_row, warped_target, n, w, sh.warp);
      __syncthreads();
      tp = warped_target;
    } else {
      tp = t_row;
    }
    const RandomStream s = stream.at_position(stream.position + static_cast<std::uint32_t>(gamma));
    const int token = sample_block(RowValue{tp}, n, s.uniform(0), sh);
    if (threadIdx.x == 0) out[gamma] = token;
  }
  finish_chain(accepted, out, b, gamma, i, invalid, status, code);
}

}  // namespace specdec::backend::cuda_impl::detail
