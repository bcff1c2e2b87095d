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
void launch_top_k(const void* rows, std::int64_t row_count, std::int64_t vocab,
                  std::int64_t row_stride, std::int64_t k, const RandomStream* streams,
                  float* perturbed, std::int32_t* tokens, std::int64_t token_stride, float* values,
                  std::int64_t value_stride, std::int32_t* counts, cudaStream_t stream) {
  detail::gumbel_top_k_kernel<kind, T>
      <<<static_cast<unsigned int>(row_count), kWarpThreads, 0, stream>>>(
          static_cast<const T*>(rows), row_stride, static_cast<int>(vocab), static_cast<int>(k),
          streams, perturbed, tokens, token_stride, values, value_stride, counts);
}

template <class T>
void launch_top_k(bool probabilities, const void* rows, std::int64_t row_count, std::int64_t vocab,
                  std::int64_t row_stride, std::int64_t k, const RandomStream* streams,
                  float* perturbed, std::int32_t* tokens, std::int64_t token_stride, float* values,
                  std::int64_t value_stride, std::int32_t* counts, cudaStream_t stream) {
  if (probabilities) {
    launch_top_k<RowKind::kProbabilities, T>(rows, row_count, vocab, row_stride, k, streams,
                                             perturbed, tokens, token_stride, values, value_stride,
                                             counts, stream);
  } else {
    launch_top_k<RowKind::kLogWeights, T>(rows, row_count, vocab, row_stride, k, streams, perturbed,
                                          tokens, token_stride, values, value_stride, counts,
                                          stream);
  }
}

}  // namespace

cudaError_t gumbel_top_k_batch(const void* rows, DType dtype, bool probabilities,
                               std::int64_t row_count, std::int64_t vocab, std::int64_t row_stride,
                               std::int64_t k, const RandomStream* host_streams,
                               std::int32_t* tokens, std::int64_t token_stride, float* values,
                               std::int64_t value_stride, std::int32_t* counts, void* workspace,
                               cudaStream_t stream) {
  auto* base = static_cast<unsigned char*>(workspace);
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(static_cast<std::size_t>(row_count) * sizeof(RandomStream));
  auto* perturbed = reinterpret_cast<float*>(base);
  const cudaError_t status = cudaMemcpyAsync(
      streams, host_streams, static_cast<std::size_t>(row_count) * sizeof(RandomStream),
      cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  switch (dtype) {
    case DType::kF32:
      launch_top_k<float>(probabilities, rows, row_count, vocab, row_stride, k, streams, perturbed,
                          tokens, token_stride, values, value_stride, counts, stream);
      break;
    case DType::kF16:
      launch_top_k<__half>(probabilities, rows, row_count, vocab, row_stride, k, streams, perturbed,
                           tokens, token_stride, values, value_stride, counts, stream);
      break;
    case DType::kBF16:
      launch_top_k<__nv_bfloat16>(probabilities, rows, row_count, vocab, row_stride, k, streams,
                                  perturbed, tokens, token_stride, values, value_stride, counts,
                                  stream);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t stochastic_beam_level_batch(const BeamLevelArgs& args, std::int64_t batch,
                                        std::int64_t width, std::int64_t vocab,
                                        const RandomStream* host_streams, void* workspace,
                                        cudaStream_t stream) {
  const auto b = static_cast<std::size_t>(batch), w = static_cast<std::size_t>(width);
  auto* base = static_cast<unsigned char*>(workspace);
  auto* streams = reinterpret_cast<RandomStream*>(base);
  base += device_round_up(b * sizeof(RandomStream));
  auto* perturbed = reinterpret_cast<float*>(base);
  base += device_round_up(b * w * static_cast<std::size_t>(vocab) * sizeof(float));
  auto* candidates = reinterpret_cast<specdec::detail::BeamCandidate*>(base);
  base += device_round_up(b * w * w * sizeof(specdec::detail::BeamCandidate));
  auto* children = reinterpret_cast<std::int32_t*>(base);
  const cudaError_t status = cudaMemcpyAsync(streams, host_streams, b * sizeof(RandomStream),
                                             cudaMemcpyHostToDevice, stream);
  if (status != cudaSuccess) return status;
  detail::beam_expand_kernel<<<static_cast<unsigned int>(batch * width), kWarpThreads, 0, stream>>>(
      args, static_cast<int>(width), static_cast<int>(vocab), streams, perturbed, candidates,
      children);
  detail::beam_select_kernel<<<static_cast<unsigned int>(batch), detail::kBeamSelectThreads, 0,
                               stream>>>(args, static_cast<int>(width), candidates, children);
  return cudaGetLastError();
}

}  // namespace specdec::backend::cuda_impl
