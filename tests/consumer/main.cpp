// SPDX-License-Identifier: MIT
// Proves the installed package works: find_package(specdec) and one call into the library.
#include <cstdio>
#include <specdec/specdec.hpp>
#include <vector>

int main() {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  std::vector<float> warped(logits.size());
  specdec::Workspace ws;
  specdec::warp_logits<float>({.temperature = 0.0f}, logits, warped, ws);
  std::printf("greedy picks token %d\n", warped[2] == 1.0f ? 2 : -1);
  return warped[2] == 1.0f ? 0 : 1;
}
