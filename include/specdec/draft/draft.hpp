// SPDX-License-Identifier: MIT
// Umbrella header for the drafters.
#pragma once

#include "specdec/draft/beam_search.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/draft/iid.hpp"
#include "specdec/draft/redrafter.hpp"
#include "specdec/draft/rsd_c.hpp"
#include "specdec/draft/stochastic_beam.hpp"
