// SPDX-License-Identifier: MIT
// The engines' lossy chain rules for a ragged batch on any backend: vLLM's "synthetic" (CPU and
// CUDA) and "fly" (CPU).
#pragma once

#include <span>
#include <utility>

#include "specdec/backend/verify_batch.hpp"

namespace specdec {
namespace detail {

/// One specialisation per backend (backend/cpu/lossy_chain_batch.hpp, backend/cuda/verify_batch.hpp).
template <class Backend>
struct ChainBatchSyntheticImpl : NoBackendImpl<Backend> {};

/// Synthetic rates are probabilities (every one given, whether a chain reaches it or not).
inline void check_synthetic_rate_values(std::span<const float> rates) {
  for (std::size_t i = 0; i < rates.size(); ++i) {
    if (!(rates[i] >= 0.0f && rates[i] <= 1.0f)) {
      fail(ArgName("synthetic_acceptance_rates", static_cast<std::int64_t>(i)),
           "{} is outside [0, 1]", rates[i]);
    }
  }
}

}  // namespace detail

/// vLLM's synthetic rule (verify_chain_synthetic per sequence) for a ragged batch in
/// ChainBatchArgs' layout with `draft_rows` left empty: draft position i, reached, is accepted
/// with probability rates[i] whatever the rows hold; sequence b is verify_chain_synthetic of its
/// rows with `rates` and streams[b], bit for bit on both backends. Size the workspace as
/// verify_chain_batch's. Throws specdec::Error naming the bad argument (a rate outside [0, 1]; on
/// CUDA more than cuda_impl::kMaxSyntheticRates rates). A sequence with more draft tokens than
/// rates fails: an error naming it, or with a status buffer the code kChainTooLong (the CUDA
/// backend, whose device offsets are not read on the host, always reports it that way).
template <backend::BackendPolicy Backend, class Scratch>
void verify_chain_batch_synthetic(const Backend& backend, const ChainBatchArgs& args,
                                  std::span<const float> rates, Scratch&& workspace) {
  detail::check_synthetic_rate_values(rates);
  detail::ChainBatchSyntheticImpl<Backend>::run(backend, args, rates,
                                                std::forward<Scratch>(workspace));
}

}  // namespace specdec
