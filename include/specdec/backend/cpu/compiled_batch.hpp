// SPDX-License-Identifier: MIT
// The CPU batch entries from logits, compiled once: with the specdec::batch library linked
// (SPECDEC_COMPILED_BATCH defined), a translation unit that calls them instantiates none of the
// row kernels behind them; the library holds them for float, Eigen::half and Eigen::bfloat16.
// Header-only use, the default, instantiates them where they are called.
#pragma once

#include <Eigen/Core>

#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/cpu/warp_batch.hpp"

// One line per entry and logit type: `extern template` here, the definitions in
// src/cpu/compiled_batch.cpp.
#define SPECDEC_CPU_BATCH_ENTRIES(PREFIX, T)                                                     \
  PREFIX void ChainBatchImpl<backend::Cpu>::run_logits<T>(                                       \
      const backend::Cpu&, const ChainBatchLogitsArgs<T>&, Workspace&);                          \
  PREFIX void ChainBatchTargetOnlyImpl<backend::Cpu>::run_logits<T>(                             \
      const backend::Cpu&, const ChainBatchLogitsArgs<T>&, Workspace&);                          \
  PREFIX void WarpBatchImpl<backend::Cpu>::run<T>(const backend::Cpu&, const WarpBatchArgs<T>&,  \
                                                  Workspace&);

#if defined(SPECDEC_COMPILED_BATCH)
namespace specdec::detail {
SPECDEC_CPU_BATCH_ENTRIES(extern template, float)
SPECDEC_CPU_BATCH_ENTRIES(extern template, Eigen::half)
SPECDEC_CPU_BATCH_ENTRIES(extern template, Eigen::bfloat16)
}  // namespace specdec::detail
#endif
