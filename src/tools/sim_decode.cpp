// SPDX-License-Identifier: MIT
#include "sim_common.hpp"

namespace specdec::sim {

Json run_decode(const Json&) { throw UsageError("command", "decode is not implemented yet"); }

}  // namespace specdec::sim
