// SPDX-License-Identifier: MIT
// Fuzzes the safetensors reader and the ReDrafter head loader on arbitrary bytes: either a
// specdec::Error or tensors whose data matches their shapes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "fuzz_input.hpp"
#include "specdec/io/redrafter_head.hpp"
#include "specdec/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  specdec::io::TensorMap tensors;
  try {
    tensors = specdec::io::parse_safetensors(bytes);
  } catch (const specdec::Error&) {
    return 0;
  }
  for (const auto& [name, tensor] : tensors) {
    if (static_cast<std::int64_t>(tensor.data.size()) != tensor.numel())
      finding("fuzz_safetensors:1");
  }
  try {
    (void)specdec::io::redrafter_head_from_tensors(tensors);
  } catch (const specdec::Error&) {
  }
  return 0;
}
