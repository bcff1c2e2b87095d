// SPDX-License-Identifier: MIT
// Safetensors reading and writing (F32, F16, BF16), and loading / saving a ReDrafter head.
// This header needs nlohmann-json; the core headers do not.
#pragma once

#include <Eigen/Core>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/draft/redrafter.hpp"

namespace specdec {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; big-endian hosts are not supported");

/// One tensor of a safetensors file, converted to float32 (row-major, as stored).
struct Tensor {
  std::vector<std::int64_t> shape;
  std::vector<float> data;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

using TensorMap = std::map<std::string, Tensor>;

/// Storage type of the tensors save_safetensors writes.
enum class TensorDType { kF32, kF16, kBF16 };

namespace detail {

inline std::size_t dtype_size(TensorDType d) { return d == TensorDType::kF32 ? 4 : 2; }
inline const char* dtype_name(TensorDType d) {
  return d == TensorDType::kF32 ? "F32" : d == TensorDType::kF16 ? "F16" : "BF16";
}

inline std::vector<char> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail("path", "cannot open '{}'", path.string());
  const auto size = static_cast<std::size_t>(in.tellg());
  std::vector<char> bytes(size);
  in.seekg(0);
  if (size > 0 && !in.read(bytes.data(), static_cast<std::streamsize>(size))) {
    fail("path", "cannot read '{}'", path.string());
  }
  return bytes;
}

}  // namespace detail

/// Parses a safetensors image: an 8-byte little-endian header length N, N bytes of JSON
/// ({name: {"dtype", "shape", "data_offsets": [begin, end]}}, plus an optional "__metadata__"),
/// then the raw data (offsets relative to its start). F32, F16 and BF16 tensors are converted to
/// float. Throws specdec::Error for a truncated file, a header length beyond the file, bad JSON,
/// an unsupported dtype, or offsets that disagree with the shape or leave the data section.
inline TensorMap parse_safetensors(std::span<const char> bytes) {
  if (bytes.size() < 8)
    detail::fail("file", "has {} bytes, fewer than the 8-byte header length", bytes.size());
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  if (header_size > bytes.size() - 8) {
    detail::fail("file", "header length {} runs beyond the file ({} bytes)", header_size,
                 bytes.size());
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8,
                                   bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  } catch (const nlohmann::json::exception& e) {
    detail::fail("file", "header is not valid JSON: {}", e.what());
  }
  if (!header.is_object()) detail::fail("file", "header is not a JSON object");
  const char* data = bytes.data() + 8 + header_size;
  const std::uint64_t data_size = bytes.size() - 8 - header_size;
  TensorMap out;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      const auto dtype = info.at("dtype").get<std::string>();
      std::size_t elem = 0;
      if (dtype == "F32")
        elem = 4;
      else if (dtype == "F16" || dtype == "BF16")
        elem = 2;
      else
        detail::fail(name + ".dtype", "'{}' is not supported (F32, F16, BF16)", dtype);
      Tensor t;
      t.shape = info.at("shape").get<std::vector<std::int64_t>>();
      for (auto d : t.shape) {
        if (d < 0) detail::fail(name + ".shape", "has a negative dimension {}", d);
      }
      const auto offsets = info.at("data_offsets").get<std::vector<std::uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        detail::fail(name + ".data_offsets", "must be [begin, end] within the {} data bytes",
                     data_size);
      }
      const auto n = static_cast<std::uint64_t>(t.numel());
      if (offsets[1] - offsets[0] != n * elem) {
        detail::fail(name + ".data_offsets", "span {} bytes but shape and dtype need {}",
                     offsets[1] - offsets[0], n * elem);
      }
      t.data.resize(static_cast<std::size_t>(n));
      const char* src = data + offsets[0];
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
      out.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& e) {
      detail::fail(name, "malformed header entry: {}", e.what());
    }
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
    if (static_cast<std::int64_t>(t.data.size()) != t.numel()) {
      detail::fail(name, "has {} values but shape needs {}", t.data.size(), t.numel());
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

/// Tensor names of a ReDrafter head (the reference module's parameter names; PyTorch Linear
/// weights are [out, in]):
///   rnn_w.weight [H, H], rnn_u.weight [H, H], rnn_u.bias [H]        (rnn heads only)
///   input_proj.weight [D, 2H], input_proj.bias [D]                  (only when D != 2H)
///   lm_head.{i}.linear.weight [D, D], lm_head.{i}.linear.bias [D]   (residual block i)
///   lm_head.{n}.weight [V, D]                                       (n = num_layers)
///   embed_tokens.weight [V, H]  the target's input embedding table (if not supplied separately)
namespace redrafter_names {
inline constexpr const char* kEmbedding = "embed_tokens.weight";
}

namespace detail {

inline const Tensor& need(const TensorMap& m, const std::string& name) {
  const auto it = m.find(name);
  if (it == m.end()) fail(name, "tensor is missing from the file");
  return it->second;
}

inline Eigen::MatrixXf to_matrix(const TensorMap& m, const std::string& name, std::int64_t rows,
                                 std::int64_t cols) {
  const auto& t = need(m, name);
  if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
    fail(name, "has shape {} but [{}, {}] is expected", nlohmann::json(t.shape).dump(), rows, cols);
  }
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      t.data.data(), rows, cols);
}

inline Eigen::VectorXf to_vector(const TensorMap& m, const std::string& name, std::int64_t n) {
  const auto& t = need(m, name);
  if (t.shape.size() != 1 || t.shape[0] != n) {
    fail(name, "has shape {} but [{}] is expected", nlohmann::json(t.shape).dump(), n);
  }
  return Eigen::Map<const Eigen::VectorXf>(t.data.data(), n);
}

inline Tensor from_matrix(const Eigen::MatrixXf& m) {
  Tensor t{{m.rows(), m.cols()}, std::vector<float>(static_cast<std::size_t>(m.size()))};
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      t.data.data(), m.rows(), m.cols()) = m;
  return t;
}
inline Tensor from_vector(const Eigen::VectorXf& v) {
  return {{v.size()}, std::vector<float>(v.data(), v.data() + v.size())};
}

}  // namespace detail

/// Builds a head from its tensors (names above). The shape is inferred: H from the embedding,
/// V and D from lm_head.{n}.weight, num_layers from the residual blocks present, rnn from
/// rnn_w.weight. `embedding` (V x H) overrides embed_tokens.weight when non-empty.
/// Throws specdec::Error naming a missing tensor or one of the wrong shape.
inline ReDrafterHead redrafter_head_from_tensors(const TensorMap& tensors,
                                                 const Eigen::MatrixXf& embedding = {},
                                                 std::int32_t top_k = 50) {
  ReDrafterHead h;
  auto& c = h.config;
  c.top_k = top_k;
  std::int32_t layers = 0;
  while (tensors.count(fmt::format("lm_head.{}.linear.weight", layers))) ++layers;
  c.num_layers = layers;
  const auto& out_name = fmt::format("lm_head.{}.weight", layers);
  const auto& proj = detail::need(tensors, out_name);
  if (proj.shape.size() != 2) detail::fail(out_name, "must be a matrix [V, D]");
  c.vocab = proj.shape[0];
  c.exit_dim = proj.shape[1];
  if (embedding.size() > 0) {
    h.embedding = embedding;
  } else {
    const auto& e = detail::need(tensors, redrafter_names::kEmbedding);
    if (e.shape.size() != 2) detail::fail(redrafter_names::kEmbedding, "must be a matrix [V, H]");
    h.embedding = detail::to_matrix(tensors, redrafter_names::kEmbedding, e.shape[0], e.shape[1]);
  }
  c.hidden = h.embedding.cols();
  if (h.embedding.rows() != c.vocab) {
    detail::fail("embedding", "has {} rows but the head's vocabulary is {}", h.embedding.rows(),
                 c.vocab);
  }
  c.rnn = tensors.count("rnn_w.weight") > 0;
  if (c.rnn) {
    h.rnn_w = detail::to_matrix(tensors, "rnn_w.weight", c.hidden, c.hidden);
    h.rnn_u = detail::to_matrix(tensors, "rnn_u.weight", c.hidden, c.hidden);
    h.rnn_u_bias = detail::to_vector(tensors, "rnn_u.bias", c.hidden);
  }
  if (c.has_input_projection()) {
    h.input_proj = detail::to_matrix(tensors, "input_proj.weight", c.exit_dim, 2 * c.hidden);
    h.input_proj_bias = detail::to_vector(tensors, "input_proj.bias", c.exit_dim);
  }
  for (std::int32_t i = 0; i < layers; ++i) {
    h.block_weights.push_back(detail::to_matrix(tensors, fmt::format("lm_head.{}.linear.weight", i),
                                                c.exit_dim, c.exit_dim));
    h.block_biases.push_back(
        detail::to_vector(tensors, fmt::format("lm_head.{}.linear.bias", i), c.exit_dim));
  }
  h.vocab_proj = detail::to_matrix(tensors, out_name, c.vocab, c.exit_dim);
  h.validate();
  return h;
}

/// Reads a head from a safetensors file (see redrafter_head_from_tensors).
inline ReDrafterHead load_redrafter_head(const std::filesystem::path& path,
                                         const Eigen::MatrixXf& embedding = {},
                                         std::int32_t top_k = 50) {
  return redrafter_head_from_tensors(read_safetensors(path), embedding, top_k);
}

/// The head's tensors under the names above (embedding included).
inline TensorMap redrafter_head_tensors(const ReDrafterHead& h) {
  h.validate();
  TensorMap m;
  m[redrafter_names::kEmbedding] = detail::from_matrix(h.embedding);
  if (h.config.rnn) {
    m["rnn_w.weight"] = detail::from_matrix(h.rnn_w);
    m["rnn_u.weight"] = detail::from_matrix(h.rnn_u);
    m["rnn_u.bias"] = detail::from_vector(h.rnn_u_bias);
  }
  if (h.config.has_input_projection()) {
    m["input_proj.weight"] = detail::from_matrix(h.input_proj);
    m["input_proj.bias"] = detail::from_vector(h.input_proj_bias);
  }
  for (std::size_t i = 0; i < h.block_weights.size(); ++i) {
    m[fmt::format("lm_head.{}.linear.weight", i)] = detail::from_matrix(h.block_weights[i]);
    m[fmt::format("lm_head.{}.linear.bias", i)] = detail::from_vector(h.block_biases[i]);
  }
  m[fmt::format("lm_head.{}.weight", h.block_weights.size())] = detail::from_matrix(h.vocab_proj);
  return m;
}

/// Writes a head (embedding included) as a safetensors file.
inline void save_redrafter_head(const std::filesystem::path& path, const ReDrafterHead& h,
                                TensorDType dtype = TensorDType::kF32) {
  write_safetensors(path, redrafter_head_tensors(h), dtype);
}

}  // namespace specdec
