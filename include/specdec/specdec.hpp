// SPDX-License-Identifier: MIT
// Umbrella header: the CPU library (no CUDA headers, no toy models).
#pragma once

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/draft/draft.hpp"
