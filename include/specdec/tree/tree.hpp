// SPDX-License-Identifier: MIT
// Umbrella header for draft trees: structure, masks, positions, dynamic tree attention, KV
// compaction and engine exporters.
#pragma once

#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/tree/exporters.hpp"
#include "specdec/tree/kv_compaction.hpp"
#include "specdec/tree/tree_mask.hpp"
#include "specdec/tree/tree_paths.hpp"
#include "specdec/tree/tree_view.hpp"
