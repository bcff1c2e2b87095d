// SPDX-License-Identifier: MIT
// Umbrella header for draft trees: structure, masks, positions, dynamic tree attention, KV
// compaction, engine exporters, and shapes chosen from measured acceptance.
#pragma once

#include "specdec/tree/acceptance.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/tree/dynamic_tree.hpp"
#include "specdec/tree/exporters.hpp"
#include "specdec/tree/kv_compaction.hpp"
#include "specdec/tree/select.hpp"
#include "specdec/tree/sequoia.hpp"
#include "specdec/tree/sibling_lists.hpp"
#include "specdec/tree/tree_mask.hpp"
#include "specdec/tree/tree_paths.hpp"
#include "specdec/tree/tree_view.hpp"
