// SPDX-License-Identifier: MIT
// The host emulation (specdec/backend/cuda/emulation) in place of the toolkit's header:
// fp16 through Eigen::half, which has the same bits.
#pragma once

#include <Eigen/Core>

#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"

using __half = Eigen::half;
inline float __half2float(__half x) { return static_cast<float>(x); }
