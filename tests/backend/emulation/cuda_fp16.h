// SPDX-License-Identifier: MIT
// Host emulation (see emulated_cuda.hpp): fp16 through Eigen::half, which has the same bits.
#pragma once

#include <Eigen/Core>

#include "emulated_cuda.hpp"

using __half = Eigen::half;
inline float __half2float(__half x) { return static_cast<float>(x); }
