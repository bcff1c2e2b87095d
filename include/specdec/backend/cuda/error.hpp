// SPDX-License-Identifier: MIT
// CudaError: what the CUDA backend throws when the runtime reports a failure.
#pragma once

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace specdec {

/// A CUDA runtime failure (launch error, bad device pointer, ...): names the call and the code.
class CudaError : public std::runtime_error {
 public:
  CudaError(std::string_view call, cudaError_t code)
      : std::runtime_error(fmt::format("{}: CUDA error {} ({})", call, static_cast<int>(code),
                                       cudaGetErrorString(code))),
        code_(code) {}
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

namespace detail {

/// Throws CudaError for anything but cudaSuccess (and clears the sticky last error).
inline void check_cuda(cudaError_t code, std::string_view call) {
  if (code != cudaSuccess) {
    (void)cudaGetLastError();
    throw CudaError(call, code);
  }
}

}  // namespace detail
}  // namespace specdec
