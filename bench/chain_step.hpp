// SPDX-License-Identifier: MIT
// The chain step an engine calls, timed through either public entry on the same batch: from
// logits (verify_chain_batch_logits) or from warped rows (verify_chain_batch).
#pragma once

#include <benchmark/benchmark.h>

#include "specdec/backend/verify_batch.hpp"
#include "specdec/core/workspace.hpp"

namespace specdec::bench {

/// verify_chain_batch_logits on `logits` once per iteration, or (`from_logits` false)
/// verify_chain_batch on `rows`, the same batch as warped rows.
template <class Backend>
void time_chain_step(benchmark::State& state, const Backend& backend, bool from_logits,
                     const ChainBatchLogitsArgs<float>& logits, const ChainBatchArgs& rows,
                     Workspace& ws) {
  for (auto _ : state) {
    if (from_logits) {
      verify_chain_batch_logits(backend, logits, ws);
    } else {
      verify_chain_batch(backend, rows, ws);
    }
    benchmark::DoNotOptimize(logits.emitted.data());
  }
}

}  // namespace specdec::bench
