// SPDX-License-Identifier: MIT
// The specdec::batch library: the CPU batch entries from logits instantiated once for each logit
// type (include/specdec/backend/cpu/compiled_batch.hpp declares them extern).
#include "specdec/backend/cpu/compiled_batch.hpp"

namespace specdec::detail {
SPECDEC_CPU_BATCH_ENTRIES(template, float)
SPECDEC_CPU_BATCH_ENTRIES(template, Eigen::half)
SPECDEC_CPU_BATCH_ENTRIES(template, Eigen::bfloat16)
}  // namespace specdec::detail
