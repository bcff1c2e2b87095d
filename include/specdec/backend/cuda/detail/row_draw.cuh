// SPDX-License-Identifier: MIT
// The CPU's sums and draws of a row, by a whole block: detail::blocked_sum (blocks of 1024
// entries, 8 lanes each, blocks added in order in double) and detail::sample_row (whole blocks
// skipped by their sums, the block holding the threshold scanned in order), bit for bit. A block
// of the row is loaded side by side into shared memory, so every load is coalesced, and summed by
// one warp in the CPU's lane order. A row is a functor value(i), or a type with its own
// fill(b, e, buf, rank, size, sync) and last_positive(n) (a row held as its positive entries).
// IWYU pragma: private
#pragma once

#include <cstdint>
#include <type_traits>

#include "specdec/backend/cuda/detail/block_reduce.cuh"
#include "specdec/backend/cuda/detail/global.cuh"
#include "specdec/backend/cuda/detail/launch.cuh"
#include "specdec/core/blocked_sum.hpp"
#include "specdec/core/inverse_cdf.hpp"

namespace specdec::backend::cuda_impl::detail {

/// Threads per block of the kernels that draw: a block sums kDrawThreads blocks of the row at a
/// time (a chunk), a warp per block.
inline constexpr int kDrawThreads = 256;
inline constexpr int kDrawWarps = kDrawThreads / 32;
inline constexpr int kSumBlock = static_cast<int>(specdec::detail::kBlockedSumBlock);
/// Listed entries up to which a block of a sparse row is summed from its list, not filled.
inline constexpr int kSparseBlock = 64;

struct DrawShared {
  float block[kDrawWarps][kSumBlock];  // a 1024-entry block of the row per warp
  float sums[kDrawThreads];            // block sums of the current chunk of the row
  int starts[kDrawThreads + 1];        // a sparse row's first listed entry of each block
  double running;                      // the draw's running sum
  double prefix[kDrawThreads + 1];     // sample_from_sums's running sums of the block sums
  double warp_mass[kDrawWarps];        // block_threshold_scan's per-warp sums
  int warp_first[kDrawWarps];          // and per-warp first crossings
  int next;
  int result;
  int found;
  int last;  // last_block_of_row's answer for a draw split over blocks
};

/// A row of fp32 probabilities (a warped target row, say) in global memory. A row type with
/// source() and map(x, i) (the entry from the source's element x at i) is filled by 16-byte loads.
struct TargetRowValue {
  Global<const float> row;
  __device__ __forceinline__ float operator()(std::int64_t i) const { return row[i]; }
  __device__ __forceinline__ Global<const float> source() const { return row; }
  __device__ __forceinline__ float map(float x, std::int64_t) const { return x; }
};

/// buf[0, kSumBlock) = map(a[b + i], b[b + i], i) (or map(a[..], i) with one source) for a whole
/// block of the row, by the threads of a group (`rank` of `size`, size >= 32): 16-byte loads,
/// every one of a thread's issued before any is used, so a warp has its whole block in flight.
template <class T, class Map>
__device__ __forceinline__ void fill_whole_block(Global<const T> a, Global<const T> second,
                                                 std::int64_t b, float* buf, int rank, int size,
                                                 const Map& map) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kVectors = kSumBlock / kVec;
  constexpr int kMost = kVectors / 32;  // a thread's vectors in a group of 32
  constexpr bool kTwo = requires(const Map& m) { m(0.0f, 0.0f, std::int64_t{0}); };
  Vec<T, kVec> x[kMost] = {}, y[kTwo ? kMost : 1] = {};
  SPECDEC_UNROLL(8)
  for (int j = 0; j < kMost; ++j) {
    const int v = rank + j * size;
    if (v < kVectors) {
      x[j] = a.template load_vec<kVec>(b + static_cast<std::int64_t>(v) * kVec);
      if constexpr (kTwo) y[j] = second.template load_vec<kVec>(b + static_cast<std::int64_t>(v) * kVec);
    }
  }
  SPECDEC_UNROLL(8)
  for (int j = 0; j < kMost; ++j) {
    const int v = rank + j * size;
    if (v < kVectors) {
      for (int k = 0; k < kVec; ++k) {
        const int i = v * kVec + k;
        if constexpr (kTwo) {
          buf[i] = map(specdec::detail::to_float(x[j].v[k]), specdec::detail::to_float(y[j].v[k]),
                       b + i);
        } else {
          buf[i] = map(specdec::detail::to_float(x[j].v[k]), b + i);
        }
      }
    }
  }
}

/// buf[0, e - b) = entries b .. e-1 of `row`, by the threads of a group (`rank` of `size`, `sync`
/// the group's barrier).
template <class Row, class Sync>
__device__ __forceinline__ void fill_block(const Row& row, std::int64_t b, std::int64_t e,
                                           float* buf, int rank, int size, const Sync& sync) {
  if constexpr (requires { row.fill(b, e, buf, rank, size, sync); }) {
    row.fill(b, e, buf, rank, size, sync);
  } else {
    if constexpr (requires { row.source(); row.map(0.0f, std::int64_t{0}); }) {
      if (e - b == kSumBlock && row.source().vector_aligned(b) && size >= 32) {
        fill_whole_block(row.source(), row.source(), b, buf, rank, size,
                         [&row](float x, std::int64_t i) { return row.map(x, i); });
        return;
      }
    }
    SPECDEC_UNROLL(4)
    for (std::int64_t i = rank; i < e - b; i += size) buf[i] = row(b + i);
  }
}

/// The row's last positive entry (sample_row's fallback), or 0.
template <class Row>
__device__ std::int64_t last_positive_of(const Row& row, std::int64_t n) {
  if constexpr (requires { row.last_positive(n); }) {
    return row.last_positive(n);
  } else {
    return specdec::detail::last_positive(row, 0, n, 0);
  }
}

/// detail::block_sum of value(b .. e-1) by one warp: the entries are loaded side by side into
/// `buf`, then lane j < 8 adds those at offsets j mod 8 in order, as the CPU's lane j does; lane 0
/// adds the tail and the lanes in the CPU's order and returns the sum.
template <class Value>
__device__ __forceinline__ float warp_block_sum(const Value& value, std::int64_t b, std::int64_t e,
                                                float* buf) {
  constexpr int kLanes = specdec::detail::kBlockedSumLanes;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int count = static_cast<int>(e - b), whole = count / kLanes * kLanes;
  if constexpr (requires { value.listed(b); value.sparse_sum(b, e); }) {
    // A row held as its positive entries: a block listing few is summed from its list.
    if (value.listed(b) <= kSparseBlock) return value.sparse_sum(b, e);
  }
  fill_block(value, b, e, buf, lane, 32, [] { __syncwarp(); });
  __syncwarp();
  float partial = 0.0f;
  if (lane < kLanes) {
    SPECDEC_UNROLL(16)
    for (int i = lane; i < whole; i += kLanes) partial += buf[i];
  }
  float block = 0.0f;
  for (int i = whole; i < count; ++i) block += buf[i];
  for (int j = 0; j < kLanes; ++j) block += __shfl_sync(0xffffffffu, partial, j);
  __syncwarp();  // buf is read before the warp's next block overwrites it
  return block;
}

/// warp_block_sum's sum of value(b .. e-1) with the whole block loading and computing the
/// entries: warp 0 then adds them as warp_block_sum's lanes do (the same additions in the same
/// order: the same sum). The sum in thread 0. By the whole block; ends with a barrier.
template <class Value>
__device__ float block_sum_by_block(const Value& value, std::int64_t b, std::int64_t e,
                                    float* buf) {
  constexpr int kLanes = specdec::detail::kBlockedSumLanes;
  const int count = static_cast<int>(e - b), whole = count / kLanes * kLanes;
  const int rank = static_cast<int>(threadIdx.x);
  fill_block(value, b, e, buf, rank, static_cast<int>(blockDim.x), [] { __syncthreads(); });
  __syncthreads();
  float block = 0.0f;
  if (rank < 32) {
    float partial = 0.0f;
    if (rank < kLanes) {
      SPECDEC_UNROLL(16)
      for (int i = rank; i < whole; i += kLanes) partial += buf[i];
    }
    for (int i = whole; i < count; ++i) block += buf[i];
    for (int j = 0; j < kLanes; ++j) block += __shfl_sync(0xffffffffu, partial, j);
  }
  __syncthreads();  // buf is read before it is filled again
  return block;
}

/// block_sum of every 1024-entry block of chunk `base` (kDrawThreads blocks) into sh.sums,
/// a warp per block (coalesced loads); returns how many blocks the chunk has. Ends with a barrier.
template <class Value>
__device__ SPECDEC_NOINLINE int chunk_sums(const Value value, std::int64_t n, std::int64_t base,
                                           DrawShared& sh) {
  constexpr std::int64_t kBlock = specdec::detail::kBlockedSumBlock;
  const std::int64_t left = (n - base + kBlock - 1) / kBlock;
  const int count = left < kDrawThreads ? static_cast<int>(left) : kDrawThreads;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  __syncthreads();  // the previous chunk's sums have been read
  if constexpr (requires { value.index_chunk(base, sh.starts); }) {
    value.index_chunk(base, sh.starts);  // a sparse row: where each block's entries start
    __syncthreads();
  }
  for (int k = warp; k < count; k += kDrawWarps) {
    const std::int64_t b = base + k * kBlock;
    const float sum = warp_block_sum(value, b, b + kBlock < n ? b + kBlock : n, sh.block[warp]);
    if (threadIdx.x % 32 == 0) sh.sums[k] = sum;
  }
  __syncthreads();
  return count;
}

/// block_sum of the 1024-entry blocks [first, last) of value(0 .. n-1) into sums[k], a warp per
/// block (the whole block per block when it has fewer blocks than warps): one block's share of a
/// row whose draw is split over blocks (the last to finish draws from the sums, sample_from_sums).
template <class Value>
__device__ SPECDEC_NOINLINE void block_sums_to(const Value value, std::int64_t n, int first,
                                               int last, Global<float> sums, DrawShared& sh) {
  constexpr std::int64_t kBlock = specdec::detail::kBlockedSumBlock;
  if constexpr (!requires { value.listed(0); }) {  // a sparse row sums its few entries by warp
    if (last - first < kDrawWarps) {
      // Fewer blocks than warps (a small batch): each by the whole block, not one warp.
      for (int k = first; k < last; ++k) {
        const std::int64_t b = k * kBlock;
        const float sum =
            block_sum_by_block(value, b, b + kBlock < n ? b + kBlock : n, sh.block[0]);
        if (threadIdx.x == 0) sums[k] = sum;
      }
      return;
    }
  }
  const int warp = static_cast<int>(threadIdx.x) / 32;
  for (int k = first + warp; k < last; k += kDrawWarps) {
    const std::int64_t b = k * kBlock;
    const float sum = warp_block_sum(value, b, b + kBlock < n ? b + kBlock : n, sh.block[warp]);
    if (threadIdx.x % 32 == 0) sums[k] = sum;
  }
}

/// detail::blocked_sum of value(0 .. n-1), bit for bit, by the whole block. Leaves the last
/// chunk's block sums in sh.sums.
template <class Value>
__device__ double exact_row_sum(const Value& value, std::int64_t n, DrawShared& sh) {
  constexpr std::int64_t kChunk = specdec::detail::kBlockedSumBlock * kDrawThreads;
  double total = 0.0;
  for (std::int64_t base = 0; base < n; base += kChunk) {
    const int count = chunk_sums(value, n, base, sh);
    for (int k = 0; k < count; ++k) total += sh.sums[k];  // every thread, same order
  }
  return total;
}

/// inverse_cdf_scan(buf, 0, count, sh.running, threshold) (the CPU's walk of one block in order,
/// the running sum in double) by the whole block; returns the index or -1, the same in every
/// thread. The prefix sums are first taken in parallel: they differ from the walk's by less than
/// `margin` (each is within (count + 24) roundings of the exact sum), so where the first parallel
/// prefix above the threshold clears it by the margin and the prefix before it falls short by
/// the margin, the walk crosses there too. Otherwise (a prefix within about 1e-13 of the
/// threshold, or no crossing, where the walk's running sum must be exact) thread 0 walks.
__device__ inline int block_threshold_scan(const float* buf, int count, double threshold,
                                           DrawShared& sh) {
  constexpr int kPer = kSumBlock / kDrawThreads;  // entries per thread, consecutive
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int first = static_cast<int>(threadIdx.x) * kPer;
  double local[kPer];
  double own = 0.0;
  for (int k = 0; k < kPer; ++k) {
    const float v = first + k < count ? buf[first + k] : 0.0f;
    own += v > 0.0f ? static_cast<double>(v) : 0.0;
    local[k] = own;
  }
  const BlockScan<double> scan = block_scan(own, sh.warp_mass);  // the threads' sums
  const double running = sh.running;
  const double offset = running + scan.exclusive(own);
  const double margin =
      static_cast<double>(count + 64) * 0x1p-52 * (running + scan.total);  // see above
  // This thread's first entry whose prefix passes the threshold, and whether that is certain.
  int crossing = kSumBlock;
  bool certain = false;
  double previous = offset;
  for (int k = 0; k < kPer; ++k) {
    const float v = first + k < count ? buf[first + k] : 0.0f;
    const double prefix = offset + local[k];
    if (v > 0.0f && prefix > threshold) {
      crossing = first + k;
      certain = prefix > threshold + margin && previous <= threshold - margin;
      break;
    }
    previous = prefix;
  }
  int least = crossing;
  for (int mask = 16; mask > 0; mask /= 2) {
    const int other = __shfl_xor_sync(0xffffffffu, least, mask);
    least = other < least ? other : least;
  }
  if (lane == 0) sh.warp_first[warp] = least;
  __syncthreads();
  int winner = kSumBlock;
  for (int w = 0; w < kDrawWarps; ++w) winner = sh.warp_first[w] < winner ? sh.warp_first[w] : winner;
  if (threadIdx.x == 0) sh.found = -2;  // undecided
  __syncthreads();
  if (winner < kSumBlock && crossing == winner && certain) sh.found = winner;
  __syncthreads();
  if (sh.found == -2 && threadIdx.x == 0) {
    sh.found = static_cast<int>(specdec::detail::inverse_cdf_scan(
        [buf](std::int64_t i) { return buf[i]; }, std::int64_t{0}, std::int64_t{count}, sh.running,
        threshold));
  }
  __syncthreads();
  const int found = sh.found;
  __syncthreads();  // sh.found and sh.warp_* are read before the next scan writes them
  return found;
}

/// detail::sample_row's walk over the `count` block sums of chunk `base` in sh.sums, by the whole
/// block, the running sum in sh.running: whole blocks are skipped by their sums, and the one
/// holding the threshold is loaded side by side and scanned by thread 0. Returns whether it found
/// the token (sh.result); at the row's last chunk it always does (last_positive's fallback).
/// `walked` >= 0: the walk's first skips are made (its block, with sh.running before it).
template <class Value>
__device__ SPECDEC_NOINLINE bool scan_chunk(const Value value, std::int64_t n, std::int64_t base,
                                            int count, double threshold, DrawShared& sh,
                                            int walked = -1) {
  constexpr std::int64_t kBlock = specdec::detail::kBlockedSumBlock;
  constexpr std::int64_t kChunk = kBlock * kDrawThreads;
  float* buf = sh.block[0];
  for (int k = 0;; ++k) {
    __syncthreads();  // sh.next, sh.result and buf are free
    if (threadIdx.x == 0) {
      if (k == 0 && walked >= 0) {
        k = walked;
      } else {
        for (; k < count; ++k) {
          const std::int64_t e = base + (k + 1) * kBlock < n ? base + (k + 1) * kBlock : n;
          if (!(sh.running + sh.sums[k] <= threshold && e < n)) break;
          sh.running += sh.sums[k];
        }
      }
      sh.next = k;
      sh.result = -1;
    }
    __syncthreads();
    k = sh.next;
    if (k >= count) break;
    const std::int64_t b = base + k * kBlock, e = b + kBlock < n ? b + kBlock : n;
    fill_block(value, b, e, buf, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
               [] { __syncthreads(); });
    __syncthreads();
    const int found = block_threshold_scan(buf, static_cast<int>(e - b), threshold, sh);
    if (threadIdx.x == 0 && found >= 0) sh.result = static_cast<int>(b + found);
    __syncthreads();
    if (sh.result >= 0) return true;
  }
  if (base + kChunk < n) return false;
  __syncthreads();
  if (threadIdx.x == 0) sh.result = static_cast<int>(last_positive_of(value, n));
  __syncthreads();
  return true;
}

/// detail::sample_row of a row of at most one chunk whose block sums sh.sums already holds: the
/// row is read only in the scanned block.
template <class Value>
__device__ int sample_from_sums(const Value& value, std::int64_t n, float u, DrawShared& sh) {
  constexpr std::int64_t kBlock = specdec::detail::kBlockedSumBlock;
  const int count = static_cast<int>((n + kBlock - 1) / kBlock);
  // The running sums of the block sums in blocked_sum's order, once: the total, and every value
  // the walk's running sum takes, so the block it stops at is found side by side.
  __syncthreads();
  if (threadIdx.x == 0) {
    double running = 0.0;
    for (int k = 0; k < count; ++k) {
      sh.prefix[k] = running;
      running += sh.sums[k];
    }
    sh.prefix[count] = running;
    sh.next = count - 1;  // the walk stops at the last block at the latest
  }
  __syncthreads();
  const double threshold = u * sh.prefix[count];
  // The walk skips block k while its running sum after k (prefix[k + 1]) stays at or below the
  // threshold: it stops at the first block where that fails.
  for (int k = static_cast<int>(threadIdx.x); k + 1 < count; k += static_cast<int>(blockDim.x)) {
    if (!(sh.prefix[k + 1] <= threshold)) {
      atomicMin(&sh.next, k);
      break;
    }
  }
  __syncthreads();
  const int walked = sh.next;  // scan_chunk writes it after its first barrier
  if (threadIdx.x == 0) sh.running = sh.prefix[walked];
  scan_chunk(value, n, 0, count, threshold, sh, walked);
  const int token = sh.result;
  __syncthreads();  // sh.result and sh.sums are read before the next pass writes them
  return token;
}

/// detail::sample_row of value(0 .. n-1) with uniform u, bit for bit. A row of at most one chunk
/// is read once plus the scanned block (only the scanned block when `sums_ready`: sh.sums
/// already holds its block sums); a longer one twice (its block sums are recomputed).
template <class Value>
__device__ int exact_sample_row(const Value& value, std::int64_t n, float u, DrawShared& sh,
                                bool sums_ready = false) {
  constexpr std::int64_t kChunk = specdec::detail::kBlockedSumBlock * kDrawThreads;
  if (n <= kChunk) {
    if (!sums_ready) chunk_sums(value, n, 0, sh);
    return sample_from_sums(value, n, u, sh);
  }
  const double threshold = u * exact_row_sum(value, n, sh);
  __syncthreads();
  if (threadIdx.x == 0) sh.running = 0.0;
  for (std::int64_t base = 0; base < n; base += kChunk) {
    const int count = chunk_sums(value, n, base, sh);
    if (scan_chunk(value, n, base, count, threshold, sh)) break;
  }
  const int token = sh.result;
  __syncthreads();  // sh.result is read before the next call writes it
  return token;
}

}  // namespace specdec::backend::cuda_impl::detail
