// SPDX-License-Identifier: MIT
// Launcher of the batched chain verification kernel (stage streams and warps, dispatch on the row
// type, one block per sequence).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/chain_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

namespace {

template <bool kLogits, class T>
void launch(const void* target, std::int64_t target_stride, const void* draft,
            std::int64_t draft_stride, std::int64_t batch, std::int64_t gamma, std::int64_t vocab,
            const std::int32_t* tokens, std::int64_t token_stride, const RandomStream* streams,
            const DeviceWarp& shared_warp, const DeviceWarp* warps, float* rows,
            std::int32_t* emitted, std::int64_t emitted_stride, std::int32_t* accepted,
            cudaStream_t stream) {
  detail::verify_chain_kernel<kLogits, T>
      <<<static_cast<unsigned int>(batch), kWarpThreads, 0, stream>>>(
          static_cast<const T*>(target), target_stride, static_cast<const T*>(draft), draft_stride,
          tokens, token_stride, static_cast<int>(gamma), static_cast<int>(vocab), streams,
          shared_warp, warps, rows, emitted, emitted_stride, accepted);
}

}  // namespace

cudaError_t verify_chain_batch(const void* target, std::int64_t target_stride, const void* draft,
                               std::int64_t draft_stride, DType dtype, bool from_logits,
                               std::int64_t batch, std::int64_t gamma, std::int64_t vocab,
                               const std::int32_t* tokens, std::int64_t token_stride,
                               const RandomStream* host_streams, const DeviceWarp* host_warps,
                               std::int64_t warp_count, std::int32_t* emitted,
                               std::int64_t emitted_stride, std::int32_t* accepted, void* workspace,
                               cudaStream_t stream) {
  auto* base = static_cast<unsigned char*>(workspace);
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(static_cast<std::size_t>(batch) * sizeof(RandomStream));
  auto* warps = reinterpret_cast<DeviceWarp*>(base);
  base += device_round_up(static_cast<std::size_t>(batch) * sizeof(DeviceWarp));
  auto* rows = reinterpret_cast<float*>(base);
  cudaError_t status =
      cudaMemcpyAsync(streams, host_streams, static_cast<std::size_t>(batch) * sizeof(RandomStream),
                      cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  const DeviceWarp shared_warp =
      host_warps != nullptr ? host_warps[0] : DeviceWarp{1.0f, 0, 1.0f, 0.0f};
  const DeviceWarp* row_warps = nullptr;
  if (from_logits && warp_count > 1) {
    status = cudaMemcpyAsync(warps, host_warps,
                             static_cast<std::size_t>(warp_count) * sizeof(DeviceWarp),
                             cudaMemcpyHostToDevice, stream);
    if (status != cudaSuccess) return status;
    row_warps = warps;
  }
  if (!from_logits) {
    if (dtype != DType::kF32) return cudaErrorInvalidValue;
    launch<false, float>(target, target_stride, draft, draft_stride, batch, gamma, vocab, tokens,
                         token_stride, streams, shared_warp, nullptr, nullptr, emitted,
                         emitted_stride, accepted, stream);
    return cudaGetLastError();
  }
  switch (dtype) {
    case DType::kF32:
      launch<true, float>(target, target_stride, draft, draft_stride, batch, gamma, vocab, tokens,
                          token_stride, streams, shared_warp, row_warps, rows, emitted,
                          emitted_stride, accepted, stream);
      break;
    case DType::kF16:
      launch<true, __half>(target, target_stride, draft, draft_stride, batch, gamma, vocab, tokens,
                           token_stride, streams, shared_warp, row_warps, rows, emitted,
                           emitted_stride, accepted, stream);
      break;
    case DType::kBF16:
      launch<true, __nv_bfloat16>(target, target_stride, draft, draft_stride, batch, gamma, vocab,
                                  tokens, token_stride, streams, shared_warp, row_warps, rows,
                                  emitted, emitted_stride, accepted, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace specdec::backend::cuda_impl
