// SPDX-License-Identifier: MIT
// Host emulation (see emulated_cuda.hpp): the runtime types the launcher declarations name.
#pragma once

#include "emulated_cuda.hpp"

using cudaError_t = int;
using cudaStream_t = void*;
