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
cudaError_t launch_top_k(const GumbelTopKParams& p, const RandomStream* streams, float* perturbed,
                         cudaStream_t stream) {
  return detail::launch(detail::gumbel_top_k_kernel<kind, T>,
                        static_cast<unsigned int>(p.row_count), kWarpThreads, stream,
                        static_cast<const T*>(p.rows), p.row_stride, static_cast<int>(p.vocab),
                        static_cast<int>(p.k), streams, perturbed, p.tokens, p.token_stride,
                        p.values, p.value_stride, p.counts);
}

template <class T>
cudaError_t launch_top_k(const GumbelTopKParams& p, const RandomStream* streams, float* perturbed,
                         cudaStream_t stream) {
  if (p.kind == RowKind::kProbabilities) {
    return launch_top_k<RowKind::kProbabilities, T>(p, streams, perturbed, stream);
  }
  return launch_top_k<RowKind::kLogWeights, T>(p, streams, perturbed, stream);
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
      return launch_top_k<float>(params, streams, perturbed, stream);
    case DType::kF16:
      return launch_top_k<__half>(params, streams, perturbed, stream);
    case DType::kBF16:
      return launch_top_k<__nv_bfloat16>(params, streams, perturbed, stream);
    default:
      return cudaErrorInvalidValue;
  }
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
  cudaError_t status = cudaMemcpyAsync(streams, params.host_streams, b * sizeof(RandomStream),
                                       cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  const detail::BeamLevelViews views(params.matrices);
  status =
      detail::launch(detail::beam_expand_kernel, static_cast<unsigned int>(batch * width),
                     kWarpThreads, stream, views, static_cast<int>(width), static_cast<int>(vocab),
                     static_cast<const RandomStream*>(streams), perturbed, candidates, children);
  if (status != cudaSuccess) return status;
  return detail::launch(detail::beam_select_kernel, static_cast<unsigned int>(batch),
                        detail::kBeamSelectThreads, stream, views, static_cast<int>(width),
                        static_cast<const specdec::detail::BeamCandidate*>(candidates),
                        static_cast<const std::int32_t*>(children));
}

}  // namespace specdec::backend::cuda_impl
