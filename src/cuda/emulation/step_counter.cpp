// SPDX-License-Identifier: MIT
// The step counter of the latency model: code compiled with -fsanitize-coverage=trace-pc (the
// kernels of specdec::cuda_emulation_timed) calls this at every basic block it enters; inside an
// emulated thread that is one step of its clock. Compiled without the flag, or it would call
// itself.
#include "specdec/backend/cuda/emulation/emulated_cuda.hpp"

extern "C" void __sanitizer_cov_trace_pc() {
  specdec::emulation::ThreadTrace* t = specdec::emulation::trace;
  if (t != nullptr && specdec::emulation::latency.on) specdec::emulation::clock_step(t->clock);
}
