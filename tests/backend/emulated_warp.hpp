// SPDX-License-Identifier: MIT
// The CUDA warp launcher run whole on the emulation over rows of fp32 logits held in named ledger
// regions ("logits", "warped", "workspace"), so a test reads what the call moved per region.
#pragma once

#include <cstdint>
#include <vector>

#include "specdec/backend/cuda/emulation/region_buffer.hpp"
#include "specdec/backend/cuda/launchers.hpp"

namespace specdec::test {

struct EmulatedWarpCall {
  EmulatedWarpCall(const std::vector<float>& rows_of_logits, std::int64_t rows, std::int64_t vocab)
      : logits("logits", rows_of_logits),
        warped("warped", static_cast<std::size_t>(rows * vocab)),
        workspace("workspace", backend::cuda_impl::warp_workspace_size(rows, vocab)),
        rows_(rows),
        vocab_(vocab) {}

  /// The warp of every row with one shared warp, or one per row.
  cudaError_t run(const std::vector<backend::cuda_impl::DeviceWarp>& warps) {
    const backend::cuda_impl::WarpBatchParams p{.logits = logits.get(),
                                                .dtype = backend::cuda_impl::DType::kF32,
                                                .rows = rows_,
                                                .cols = vocab_,
                                                .logits_stride = vocab_,
                                                .warped = warped.get(),
                                                .warped_stride = vocab_,
                                                .warps = warps};
    return backend::cuda_impl::warp_logits_batch(p, workspace.get(), nullptr);
  }

  emulation::RegionBuffer<float> logits, warped;
  emulation::RegionBuffer<unsigned char> workspace;
  std::int64_t rows_, vocab_;
};

}  // namespace specdec::test
