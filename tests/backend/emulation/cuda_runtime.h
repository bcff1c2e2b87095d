// SPDX-License-Identifier: MIT
// Host emulation (see emulated_cuda.hpp): the runtime header the launchers include.
#pragma once

#include "cuda_runtime_api.h"
