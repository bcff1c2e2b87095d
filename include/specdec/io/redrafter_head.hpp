// SPDX-License-Identifier: MIT
// Loading and saving a ReDrafter head as safetensors. This header needs nlohmann-json.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "specdec/core/error.hpp"
#include "specdec/draft/redrafter.hpp"
#include "specdec/io/safetensors.hpp"

namespace specdec::io {

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

}  // namespace specdec::io

namespace specdec::detail {

inline const io::Tensor& need(const io::TensorMap& m, const std::string& name) {
  const auto it = m.find(name);
  if (it == m.end()) fail(name, "tensor is missing from the file");
  return it->second;
}

/// NaN or infinite weights would reach the drafted rows as NaN: reject them when loading.
inline void check_finite_weights(const std::string& name, const io::Tensor& t) {
  for (std::size_t i = 0; i < t.data.size(); ++i) {
    if (!std::isfinite(t.data[i])) {
      fail(ArgName(name, static_cast<std::int64_t>(i)), "{} is not a finite weight", t.data[i]);
    }
  }
}

inline Eigen::MatrixXf to_matrix(const io::TensorMap& m, const std::string& name, std::int64_t rows,
                                 std::int64_t cols) {
  const auto& t = need(m, name);
  check_finite_weights(name, t);
  if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols) {
    fail(name, "has shape {} but [{}, {}] is expected", nlohmann::json(t.shape).dump(), rows, cols);
  }
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      t.data.data(), rows, cols);
}

inline Eigen::VectorXf to_vector(const io::TensorMap& m, const std::string& name, std::int64_t n) {
  const auto& t = need(m, name);
  check_finite_weights(name, t);
  if (t.shape.size() != 1 || t.shape[0] != n) {
    fail(name, "has shape {} but [{}] is expected", nlohmann::json(t.shape).dump(), n);
  }
  return Eigen::Map<const Eigen::VectorXf>(t.data.data(), n);
}

inline io::Tensor from_matrix(const Eigen::MatrixXf& m) {
  io::Tensor t{{m.rows(), m.cols()}, std::vector<float>(static_cast<std::size_t>(m.size()))};
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      t.data.data(), m.rows(), m.cols()) = m;
  return t;
}
inline io::Tensor from_vector(const Eigen::VectorXf& v) {
  return {{v.size()}, std::vector<float>(v.data(), v.data() + v.size())};
}

}  // namespace specdec::detail

namespace specdec::io {

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
    if (!embedding.allFinite()) detail::fail("embedding", "has a NaN or infinite entry");
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

}  // namespace specdec::io
