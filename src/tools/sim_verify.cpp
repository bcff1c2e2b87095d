// SPDX-License-Identifier: MIT
#include "sim_common.hpp"

namespace specdec::sim {

Json run_verify(const Json&) { throw UsageError("command", "verify is not implemented yet"); }

}  // namespace specdec::sim
