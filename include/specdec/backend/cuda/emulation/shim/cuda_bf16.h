// SPDX-License-Identifier: MIT
// The host emulation (specdec/backend/cuda/emulation) in place of the toolkit's header:
// bf16 through Eigen::bfloat16, which has the same bits.
#pragma once

#include <Eigen/Core>

#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"

using __nv_bfloat16 = Eigen::bfloat16;
inline float __bfloat162float(__nv_bfloat16 x) { return static_cast<float>(x); }
