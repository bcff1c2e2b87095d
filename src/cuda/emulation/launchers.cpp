// SPDX-License-Identifier: MIT
// The CUDA backend's launchers (src/cuda/*.cu), compiled by the host compiler against the emulated
// runtime (specdec/backend/cuda/emulation): the same source nvcc builds into specdec::cuda, so a
// program linking specdec::cuda_emulation runs whole calls (staging copies, launches, kernels) on
// the CPU, and the traffic ledger sees what each call costs.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
// The emulation must come first: the launchers and kernels then see its built-ins and runtime.
#include "../draft_batch.cu"
#include "../fill_random.cu"
#include "../row_statistics.cu"
#include "../tree_mask_batch.cu"
#include "../verify_batch.cu"
#include "../verify_target_only.cu"
#include "../verify_tree_batch.cu"
#include "../warp_batch.cu"
