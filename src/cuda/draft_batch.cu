// SPDX-License-Identifier: MIT
// Launchers of the batched drafting kernels (stage the streams unless they are device-resident,
// zero the row split's counters, dispatch on the row type and kind, split every row over blocks
// of whole tiles).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "specdec/backend/cuda/detail/draft_kernels.cuh"
#include "specdec/backend/cuda/detail/staging.cuh"
#include "specdec/backend/cuda/launchers.hpp"
#include "specdec/backend/cuda/row_split.hpp"

namespace specdec::backend::cuda_impl {

namespace {

/// The SMs a row split is planned for: the device's, at most kMaxSplitSms (what the workspace
/// sizes assume).
cudaError_t draft_split_sms(int* sms) {
  int device = 0;
  cudaError_t status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  status = cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device);
  if (status != cudaSuccess) return status;
  *sms = std::clamp(*sms, 1, kMaxSplitSms);
  return cudaSuccess;
}

/// The per-block lists of a row split in the workspace, and their counters' address (to zero;
/// null for the caller's zeroed counters).
struct DraftLists {
  detail::TopKLists lists;
  unsigned int* counters;
};

/// Carves the per-block lists of `rows` rows split `blocks_per_row` ways, k entries each, from
/// `base` (advanced past them), as top_k_lists_size counts them; their counters the caller's
/// zeroed `counters` when not null.
DraftLists carve_draft_lists(unsigned char*& base, std::int64_t rows, std::int64_t blocks_per_row,
                             std::int64_t k, unsigned int* zeroed) {
  const auto blocks = static_cast<std::size_t>(rows * blocks_per_row);
  const auto entries = blocks * static_cast<std::size_t>(k);
  detail::TopKLists lists;
  auto* values = reinterpret_cast<float*>(base);
  base += device_round_up(entries * sizeof(float));
  auto* ids = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up(entries * sizeof(std::int32_t));
  auto* counts = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up(blocks * sizeof(std::int32_t));
  auto* counters = reinterpret_cast<unsigned int*>(base);
  base += device_round_up(static_cast<std::size_t>(rows) * sizeof(unsigned int));
  lists.values = values;
  lists.ids = ids;
  lists.counts = counts;
  lists.counters = zeroed != nullptr ? zeroed : counters;
  return {lists, zeroed != nullptr ? nullptr : counters};
}

/// Zeroes the counters of a split of more than one block per row (a memset, capturable), unless
/// they are the caller's zeroed ones (null): the kernels leave them at 0.
cudaError_t zero_draft_counters(const RowSplit& split, std::int64_t rows, unsigned int* counters,
                                cudaStream_t stream) {
  if (split.blocks_per_row == 1 || counters == nullptr) return cudaSuccess;
  return cudaMemsetAsync(counters, 0, static_cast<std::size_t>(rows) * sizeof(unsigned int),
                         stream);
}

/// Whether every group of four entries of every row is 16-byte aligned (fp32 rows).
bool draft_groups_aligned(const void* rows, std::int64_t stride_bytes) {
  return reinterpret_cast<std::uintptr_t>(rows) % 16 == 0 && stride_bytes % 16 == 0;
}

template <RowKind kind, class T>
cudaError_t launch_top_k(const GumbelTopKParams& p, const RowSplit& split,
                         const RandomStream* streams, const detail::TopKLists& lists,
                         cudaStream_t stream) {
  const bool vec = std::is_same_v<T, float> &&
                   draft_groups_aligned(p.rows, p.row_stride * static_cast<std::int64_t>(sizeof(T)));
  return detail::launch(
      detail::gumbel_top_k_kernel<kind, T>,
      dim3(static_cast<unsigned int>(p.row_count), static_cast<unsigned int>(split.blocks_per_row)),
      kWarpThreads, stream, static_cast<const T*>(p.rows), p.row_stride,
      detail::SplitRow{.n = static_cast<int>(p.vocab),
                       .tiles_per_block = static_cast<int>(split.tiles_per_block),
                       .vec = vec},
      static_cast<int>(p.k), streams, lists,
      detail::TopKOutputs{.tokens = p.tokens,
                          .token_stride = p.token_stride,
                          .values = p.values,
                          .value_stride = p.value_stride,
                          .counts = p.counts});
}

template <class T>
cudaError_t launch_top_k(const GumbelTopKParams& p, const RowSplit& split,
                         const RandomStream* streams, const detail::TopKLists& lists,
                         cudaStream_t stream) {
  if (p.kind == RowKind::kProbabilities) {
    return launch_top_k<RowKind::kProbabilities, T>(p, split, streams, lists, stream);
  }
  return launch_top_k<RowKind::kLogWeights, T>(p, split, streams, lists, stream);
}

}  // namespace

cudaError_t gumbel_top_k_batch(const GumbelTopKParams& params, void* workspace,
                               cudaStream_t stream) {
  int sms = 0;
  cudaError_t status = draft_split_sms(&sms);
  if (status != cudaSuccess) return status;
  const RowSplit split = draft_row_split(params.row_count, params.vocab, sms);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* staging = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(static_cast<std::size_t>(params.row_count) * sizeof(RandomStream));
  const DraftLists split_lists =
      carve_draft_lists(base, params.row_count, split.blocks_per_row, params.k, params.counters);
  const RandomStream* streams = nullptr;
  status = detail::stage(params.streams, staging, stream, &streams);
  if (status != cudaSuccess) return status;
  status = zero_draft_counters(split, params.row_count, split_lists.counters, stream);
  if (status != cudaSuccess) return status;
  switch (params.dtype) {
    case DType::kF32:
      return launch_top_k<float>(params, split, streams, split_lists.lists, stream);
    case DType::kF16:
      return launch_top_k<__half>(params, split, streams, split_lists.lists, stream);
    case DType::kBF16:
      return launch_top_k<__nv_bfloat16>(params, split, streams, split_lists.lists, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t stochastic_beam_level_batch(const BeamLevelParams& params, void* workspace,
                                        cudaStream_t stream) {
  const std::int64_t batch = params.batch, width = params.width, vocab = params.vocab;
  const auto b = static_cast<std::size_t>(batch), w = static_cast<std::size_t>(width);
  int sms = 0;
  cudaError_t status = draft_split_sms(&sms);
  if (status != cudaSuccess) return status;
  const RowSplit split = draft_row_split(batch * width, vocab, sms);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* staging = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(b * sizeof(RandomStream));
  auto* candidates = reinterpret_cast<specdec::detail::BeamCandidate*>(base);
  base += device_round_up(b * w * w * sizeof(specdec::detail::BeamCandidate));
  auto* children = reinterpret_cast<std::int32_t*>(base);
  base += device_round_up(b * w * sizeof(std::int32_t));
  const DraftLists split_lists =
      carve_draft_lists(base, batch * width, split.blocks_per_row, width, params.counters);
  const RandomStream* streams = nullptr;
  status = detail::stage(params.streams, staging, stream, &streams);
  if (status != cudaSuccess) return status;
  status = zero_draft_counters(split, batch * width, split_lists.counters, stream);
  if (status != cudaSuccess) return status;
  const detail::BeamLevelViews views(params.matrices);
  const bool vec = draft_groups_aligned(params.matrices.draft_rows,
                                  params.matrices.draft_stride * static_cast<std::int64_t>(4));
  status =
      detail::launch(detail::beam_expand_kernel,
                     dim3(static_cast<unsigned int>(batch * width),
                          static_cast<unsigned int>(split.blocks_per_row)),
                     kWarpThreads, stream, views, static_cast<int>(width),
                     detail::SplitRow{.n = static_cast<int>(vocab),
                                      .tiles_per_block = static_cast<int>(split.tiles_per_block),
                                      .vec = vec},
                     streams, split_lists.lists, candidates, children);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::beam_select_kernel, static_cast<unsigned int>(batch),
                        detail::kBeamSelectThreads, stream, views, static_cast<int>(width),
                        static_cast<const specdec::detail::BeamCandidate*>(candidates),
                        static_cast<const std::int32_t*>(children));
}

}  // namespace specdec::backend::cuda_impl
