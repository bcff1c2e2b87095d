// SPDX-License-Identifier: MIT
// The CUDA backend's launchers (src/cuda/*.cu), compiled by g++ against the emulated runtime: the
// same source nvcc builds into specdec::cuda, so tests run whole calls (staging copies, launches,
// kernels) and the traffic ledger sees what each call costs.
#include "emulated_cuda.hpp"
// The emulation must come first: the launchers and kernels then see its built-ins and runtime.
#include "cuda/draft_batch.cu"
#include "cuda/fill_random.cu"
#include "cuda/row_statistics.cu"
#include "cuda/tree_mask_batch.cu"
#include "cuda/verify_batch.cu"
#include "cuda/verify_target_only.cu"
#include "cuda/verify_tree_batch.cu"
#include "cuda/warp_batch.cu"
