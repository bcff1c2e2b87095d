// SPDX-License-Identifier: MIT
// Safetensors reading and writing (F32, F16, BF16), converted to and from float32.
// This header needs nlohmann-json; the core headers do not.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec/core/checked.hpp"
#include "specdec/core/error.hpp"
#include "specdec/io/json.hpp"

namespace specdec::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts are not supported");

/// One tensor of a safetensors file, converted to float32 (row-major, as stored).
struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;

  /// The product of the dimensions; throws specdec::Error naming `shape` when it passes int64.
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) {
      if (d < 0) detail::fail("shape", "has a negative dimension {}", d);
      n = detail::checked_mul<std::int64_t>("shape", n, d);
    }
    return n;
  }
};

using TensorMap = std::map<std::string, Tensor>;

/// Storage type of the tensors write_safetensors writes.
enum class TensorDType { kF32, kF16, kBF16 };

}  // namespace specdec::io

namespace specdec::detail {

inline std::size_t dtype_size(io::TensorDType d) { return d == io::TensorDType::kF32 ? 4 : 2; }
inline const char* dtype_name(io::TensorDType d) {
  return d == io::TensorDType::kF32 ? "F32" : d == io::TensorDType::kF16 ? "F16" : "BF16";
}

inline std::vector<char> read_file(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    fail("path", "'{}' is not a regular file", io::escape_for_message(path.string()));
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("path", "cannot open '{}'", io::escape_for_message(path.string()));
  const auto end = static_cast<std::streamoff>(in.tellg());
  if (end < 0) fail("path", "cannot read '{}'", io::escape_for_message(path.string()));
  const auto size = static_cast<std::size_t>(end);
  std::vector<char> bytes(size);
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    fail("path", "cannot read '{}'", io::escape_for_message(path.string()));
  }
  return bytes;
}

}  // namespace specdec::detail

namespace specdec::io {

/// Parses a safetensors image: an 8-byte little-endian header length N, N bytes of JSON
/// ({name: {"dtype", "shape", "data_offsets": [begin, end]}}, plus an optional "__metadata__"),
/// then the raw data (offsets relative to its start). F32, F16 and BF16 tensors are converted to
/// float. Throws specdec::Error for a truncated file, a header length beyond the file, bad JSON or
/// a repeated name, an unsupported dtype, shapes or offsets that are not non-negative integers, a
/// shape whose size overflows, offsets that disagree with the shape, and tensors that overlap or
/// leave gaps in the data section (which must be covered exactly, as the format requires).
inline TensorMap parse_safetensors(std::span<const char> bytes) {
  if (bytes.size() < 8)
    detail::fail("file", "has {} bytes, fewer than the 8-byte header length", bytes.size());
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > bytes.size() - 8) {
    detail::fail("file", "header length {} runs beyond the file ({} bytes)", header_size,
                 bytes.size());
  }
  const auto header = parse_json_strict(
      std::string_view(bytes.data() + 8, static_cast<std::size_t>(header_size)), "file");
  if (!header.is_object()) detail::fail("file", "header is not a JSON object");
  const char* data = bytes.data() + 8 + header_size;
  const std::uint64_t data_size = bytes.size() - 8 - header_size;
  // A non-negative integer of the header: no truncation of 1.5, no conversion of 1e300 or -1.
  const auto read_count = [](const nlohmann::json& value, const std::string& name) {
    if (!value.is_number_unsigned()) {
      detail::fail(name, "{} is not a non-negative integer", escape_for_message(value.dump()));
    }
    return value.get<std::uint64_t>();
  };
  TensorMap out;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;  // [begin, end) of every tensor
  for (const auto& [key, info] : header.items()) {
    if (key == "__metadata__") continue;
    const auto name = escape_for_message(key);
    try {
      if (!info.is_object())
        detail::fail(name, "must be an object with dtype, shape, data_offsets");
      const auto dtype = info.at("dtype").get<std::string>();
      std::uint64_t elem = 0;
      if (dtype == "F32")
        elem = 4;
      else if (dtype == "F16" || dtype == "BF16")
        elem = 2;
      else
        detail::fail(name + ".dtype", "'{}' is not supported (F32, F16, BF16)",
                     escape_for_message(dtype));
      Tensor t;
      const auto& shape = info.at("shape");
      if (!shape.is_array()) detail::fail(name + ".shape", "must be an array of integers");
      for (std::size_t i = 0; i < shape.size(); ++i) {
        const auto dim_name = fmt::format("{}.shape[{}]", name, i);
        t.shape.push_back(
            detail::checked_narrow<std::int64_t>(dim_name, read_count(shape[i], dim_name)));
      }
      std::uint64_t n = 1;
      for (auto d : t.shape) {
        n = detail::checked_mul<std::uint64_t>(name + ".shape", n, static_cast<std::uint64_t>(d));
      }
      const auto& offsets = info.at("data_offsets");
      if (!offsets.is_array() || offsets.size() != 2) {
        detail::fail(name + ".data_offsets", "must be [begin, end]");
      }
      const auto begin = read_count(offsets[0], name + ".data_offsets[0]");
      const auto end = read_count(offsets[1], name + ".data_offsets[1]");
      if (begin > end || end > data_size) {
        detail::fail(name + ".data_offsets", "[{}, {}] is not a range within the {} data bytes",
                     begin, end, data_size);
      }
      const auto bytes_needed = detail::checked_mul<std::uint64_t>(name + ".shape", n, elem);
      if (end - begin != bytes_needed) {
        detail::fail(name + ".data_offsets", "span {} bytes but shape and dtype need {}",
                     end - begin, bytes_needed);
      }
      spans.emplace_back(begin, end);
      t.data.resize(static_cast<std::size_t>(n));  // n * elem <= data_size: the size is real
      const char* src = data + begin;
      for (std::size_t i = 0; i < t.data.size(); ++i) {
        if (elem == 4) {
          std::memcpy(&t.data[i], src + 4 * i, 4);
        } else if (dtype == "F16") {
          Eigen::half h;
          std::memcpy(&h, src + 2 * i, 2);
          t.data[i] = static_cast<float>(h);
        } else {
          Eigen::bfloat16 b;
          std::memcpy(&b, src + 2 * i, 2);
          t.data[i] = static_cast<float>(b);
        }
      }
      out.emplace(key, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      detail::fail(name, "malformed header entry: {}", escape_for_message(e.what()));
    }
  }
  // The tensors must tile the data section: sorted by begin, each starts where the last ended.
  std::sort(spans.begin(), spans.end());
  std::uint64_t covered = 0;
  for (const auto& [begin, end] : spans) {
    if (begin < covered) {
      detail::fail("file", "tensors overlap at data bytes [{}, {})", begin, covered);
    }
    if (begin > covered)
      detail::fail("file", "data bytes [{}, {}) belong to no tensor", covered, begin);
    covered = end;
  }
  if (covered != data_size) {
    detail::fail("file", "data bytes [{}, {}) belong to no tensor", covered, data_size);
  }
  return out;
}

/// Reads a safetensors file (see parse_safetensors).
inline TensorMap read_safetensors(const std::filesystem::path& path) {
  const auto bytes = detail::read_file(path);
  return parse_safetensors(bytes);
}

/// Writes `tensors` as a safetensors file, every tensor stored as `dtype` (converted from float
/// with round-to-nearest-even). The header is padded with spaces to a multiple of 8 bytes.
inline void write_safetensors(const std::filesystem::path& path, const TensorMap& tensors,
                              TensorDType dtype = TensorDType::kF32) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<char> data;
  const auto elem = detail::dtype_size(dtype);
  for (const auto& [name, t] : tensors) {
    std::int64_t numel = 0;
    try {
      numel = t.numel();
    } catch (const Error& e) {
      detail::fail(escape_for_message(name), "{}", e.what());
    }
    if (!std::in_range<std::int64_t>(t.data.size()) ||
        static_cast<std::int64_t>(t.data.size()) != numel) {
      detail::fail(escape_for_message(name), "has {} values but shape needs {}", t.data.size(),
                   numel);
    }
    const auto begin = data.size();
    data.resize(begin + t.data.size() * elem);
    char* dst = data.data() + begin;
    for (std::size_t i = 0; i < t.data.size(); ++i) {
      if (dtype == TensorDType::kF32) {
        std::memcpy(dst + 4 * i, &t.data[i], 4);
      } else if (dtype == TensorDType::kF16) {
        const Eigen::half h(t.data[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      } else {
        const Eigen::bfloat16 b(t.data[i]);
        std::memcpy(dst + 2 * i, &b, 2);
      }
    }
    header[name] = {{"dtype", detail::dtype_name(dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t n = text.size();
  std::ofstream out(path, std::ios::binary);
  if (!out) detail::fail("path", "cannot create '{}'", path.string());
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) detail::fail("path", "cannot write '{}'", path.string());
}

}  // namespace specdec::io
