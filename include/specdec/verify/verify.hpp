// SPDX-License-Identifier: MIT
// Umbrella header of the verifiers: every node rule, chain, block and tree verification (with and
// without draft rows, from warped rows or from logits; the lossy and constrained forms), and the
// exact output distributions.
#pragma once

#include "specdec/verify/block.hpp"
#include "specdec/verify/block_logits.hpp"
#include "specdec/verify/cascade.hpp"
#include "specdec/verify/chain.hpp"
#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/common.hpp"
#include "specdec/verify/constrained_chain_rules.hpp"
#include "specdec/verify/constrained_draft_probs.hpp"
#include "specdec/verify/constrained_logits.hpp"
#include "specdec/verify/exact.hpp"
#include "specdec/verify/fly.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/lossy.hpp"
#include "specdec/verify/mtad.hpp"
#include "specdec/verify/multi_round.hpp"
#include "specdec/verify/recursive.hpp"
#include "specdec/verify/rejection.hpp"
#include "specdec/verify/rule.hpp"
#include "specdec/verify/sglang_tree.hpp"
#include "specdec/verify/spectr.hpp"
#include "specdec/verify/synthetic.hpp"
#include "specdec/verify/target_only.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/target_only_lossy.hpp"
#include "specdec/verify/tree.hpp"
#include "specdec/verify/tree_logits.hpp"
#include "specdec/verify/typical.hpp"
