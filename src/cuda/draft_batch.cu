// SPDX-License-Identifier: MIT
// Launchers of the batched drafting kernels (stage the streams, dispatch on the row type and kind,
// one block per row, beam or sequence).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "specdec/backend/cuda/detail/draft_kernels.cuh"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::backend::cuda_impl {

namespace {

template <RowKind kind, class T>
void launch_top_k(const GumbelTopKParams& p, const RandomStream* streams, float* perturbed,
                  cudaStream_t stream) {
  detail::gumbel_top_k_kernel<kind, T>
      <<<static_cast<unsigned int>(p.row_count), kWarpThreads, 0, stream>>>(
          static_cast<const T*>(p.rows), p.row_stride, static_cast<int>(p.vocab),
          static_cast<int>(p.k), streams, perturbed, p.tokens, p.token_stride, p.values,
          p.value_stride, p.counts);
}

template <class T>
void launch_top_k(const GumbelTopKParams& p, const RandomStream* streams, float* perturbed,
                  cudaStream_t stream) {
  if (p.kind == RowKind::kProbabilities) {
    launch_top_k<RowKind::kProbabilities, T>(p, streams, perturbed, stream);
  } else {
    launch_top_k<RowKind::kLogWeights, T>(p, streams, perturbed, stream);
  }
}

}  // namespace

cudaError_t gumbel_top_k_batch(const GumbelTopKParams& params, void* workspace,
                               cudaStream_t stream) {
  auto* base = static_cast<unsigned char*>(workspace);
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(static_cast<std::size_t>(params.row_count) * sizeof(RandomStream));
  auto* perturbed = reinterpret_cast<float*>(base);
  const cudaError_t status =
      cudaMemcpyAsync(streams, params.host_streams,
                      static_cast<std::size_t>(params.row_count) * sizeof(RandomStream),
                      cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  switch (params.dtype) {
    case DType::kF32:
      launch_top_k<float>(params, streams, perturbed, stream);
      break;
    case DType::kF16:
      launch_top_k<__half>(params, streams, perturbed, stream);
      break;
    case DType::kBF16:
      launch_top_k<__nv_bfloat16>(params, streams, perturbed, stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t stochastic_beam_level_batch(const BeamLevelParams& params, void* workspace,
                                        cudaStream_t stream) {
  const std::int64_t batch = params.batch, width = params.width, vocab = params.vocab;
  const auto b = static_cast<std::size_t>(batch), w = static_cast<std::size_t>(width);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(b * sizeof(RandomStream));
  auto* perturbed = reinterpret_cast<float*>(base);
  base += device_round_up(b * w * static_cast<std::size_t>(vocab) * sizeof(float));
  auto* candidates = reinterpret_cast<specdec::detail::BeamCandidate*>(base);
  base += device_round_up(b * w * w * sizeof(specdec::detail::BeamCandidate));
  auto* children = reinterpret_cast<std::int32_t*>(base);
  const cudaError_t status = cudaMemcpyAsync(streams, params.host_streams, b * sizeof(RandomStream),
                                             cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  detail::beam_expand_kernel<<<static_cast<unsigned int>(batch * width), kWarpThreads, 0, stream>>>(
      params.matrices, static_cast<int>(width), static_cast<int>(vocab), streams, perturbed,
      candidates, children);
  detail::beam_select_kernel<<<static_cast<unsigned int>(batch), detail::kBeamSelectThreads, 0,
                               stream>>>(params.matrices, static_cast<int>(width), candidates,
                                         children);
  return cudaGetLastError();
}

}  // namespace specdec::backend::cuda_impl
