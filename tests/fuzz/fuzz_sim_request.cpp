// SPDX-License-Identifier: MIT
// Fuzzes specdec-sim's request parsing: the first byte picks verify or decode, the rest is the
// JSON text. The request is parsed and validated as the tool does, then stopped before the long
// computation. Bad input must end in specdec::Error (or a JSON type error the tool reports);
// anything else (another exception, a crash, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../../src/tools/sim_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool verify = (data[0] & 1) == 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  specdec::sim::Limits limits;
  limits.max_memory = std::uint64_t{64} << 20;
  limits.validate_only = true;
  try {
    const auto request = specdec::io::parse_json_strict(text, "input");
    (void)(verify ? specdec::sim::run_verify(request, limits)
                  : specdec::sim::run_decode(request, limits));
  } catch (const specdec::Error&) {
  } catch (const nlohmann::json::exception&) {
  }
  return 0;
}
