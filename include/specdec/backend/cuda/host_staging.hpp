// SPDX-License-Identifier: MIT
// What a CUDA entry point reports when a stream capture refuses the copy of its host arrays.
#pragma once

#include <cuda_runtime_api.h>

#include <string_view>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/core/error.hpp"

namespace specdec::detail {

/// check_cuda for a call that copied host arrays (`staged`): a copy of pageable host memory is
/// refused while the stream is being captured, which is a caller mistake with a fix (the device
/// fields), so it is a specdec::Error naming the host array; any other failure is a CudaError.
inline void check_cuda_staged(cudaError_t code, std::string_view call, bool staged,
                              std::string_view host_name, std::string_view device_names) {
  if (staged &&
      (code == cudaErrorStreamCaptureUnsupported || code == cudaErrorStreamCaptureInvalidated)) {
    (void)cudaGetLastError();
    fail(host_name,
         "is host memory, which {} copies to the device, and a stream capture refuses that copy: "
         "a call captured in a CUDA graph takes {}",
         call, device_names);
  }
  check_cuda(code, call);
}

}  // namespace specdec::detail
