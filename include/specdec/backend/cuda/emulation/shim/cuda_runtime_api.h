// SPDX-License-Identifier: MIT
// The host emulation (specdec/backend/cuda/emulation) in place of the toolkit's runtime API header.
#pragma once

#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"
