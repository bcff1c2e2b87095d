// SPDX-License-Identifier: MIT
// Forwarding header: what core/warp_stats.hpp held is in core/logit_statistics.hpp (the statistics
// pass), core/warped_row.hpp (entries and rows from the statistics), core/rough_bounds.hpp,
// core/tile_sum.hpp, core/row_gather.hpp, core/top_k.hpp and core/top_p.hpp. Include those.
#pragma once

#include "specdec/core/logit_statistics.hpp"
#include "specdec/core/rough_bounds.hpp"
#include "specdec/core/row_gather.hpp"
#include "specdec/core/warp_scratch.hpp"
#include "specdec/core/warped_row.hpp"
