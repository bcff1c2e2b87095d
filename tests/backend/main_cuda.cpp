// SPDX-License-Identifier: MIT
// Test runner of the CUDA backend tests: exits with 77 (reported by ctest as skipped) when no GPU
// is present; listing the tests works everywhere.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string_view>

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing = listing || std::string_view(argv[i]).starts_with("--list");
  int devices = 0;
  if (!listing && (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)) {
    std::puts("no CUDA device: skipped");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
