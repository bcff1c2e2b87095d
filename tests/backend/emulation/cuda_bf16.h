// SPDX-License-Identifier: MIT
// Host emulation (see emulated_cuda.hpp): bf16 through Eigen::bfloat16, which has the same bits.
#pragma once

#include <Eigen/Core>

#include "emulated_cuda.hpp"

using __nv_bfloat16 = Eigen::bfloat16;
inline float __bfloat162float(__nv_bfloat16 x) { return static_cast<float>(x); }
