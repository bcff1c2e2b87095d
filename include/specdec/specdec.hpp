// SPDX-License-Identifier: MIT
// Umbrella header: the CPU library (no CUDA headers, no toy models).
#pragma once

#include "specdec/config.hpp"
#include "specdec/core/error.hpp"
#include "specdec/core/noise.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/sampling.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/core/warp.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/metrics.hpp"
#include "specdec/decode/redrafter.hpp"
#include "specdec/decode/sequence.hpp"
#include "specdec/draft/draft.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/tree/tree.hpp"
#include "specdec/verify/verify.hpp"
