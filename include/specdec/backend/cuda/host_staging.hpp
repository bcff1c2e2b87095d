// SPDX-License-Identifier: MIT
// What a CUDA entry point reports when a stream capture refuses the copy of its host arrays.
#pragma once

#include <cuda_runtime_api.h>

#include <initializer_list>
#include <string_view>
#include <utility>

#include "specdec/backend/cuda/error.hpp"
#include "specdec/backend/resident.hpp"
#include "specdec/core/error.hpp"

namespace specdec::detail {

/// A call's Resident array with its argument name.
struct NamedArray {
  std::string_view name;
  bool on_device = false;

  template <class T>
  NamedArray(std::string_view n, const Resident<T>& array) : name(n), on_device(array.on_device()) {}
};

/// The first of a call's Resident arrays that is host memory (the call copies it to the device),
/// or an empty name when every one is on the device.
inline std::string_view first_host_array(std::initializer_list<NamedArray> arrays) {
  for (const NamedArray& array : arrays) {
    if (!array.on_device) return array.name;
  }
  return {};
}

/// check_cuda for a call that copied its host arrays (`host_array` names the first; empty: none):
/// a copy of pageable host memory is refused while the stream is being captured, which is a
/// caller mistake with a fix (the array on the device), so it is a specdec::Error naming the host
/// array; any other failure is a CudaError.
inline void check_cuda_staged(cudaError_t code, std::string_view call,
                              std::string_view host_array) {
  if (!host_array.empty() &&
      (code == cudaErrorStreamCaptureUnsupported || code == cudaErrorStreamCaptureInvalidated)) {
    (void)cudaGetLastError();
    fail(host_array,
         "is host memory, which {} copies to the device, and a stream capture refuses that copy: "
         "a call captured in a CUDA graph takes its arrays on the device (on_device(data, size))",
         call);
  }
  check_cuda(code, call);
}

}  // namespace specdec::detail
