// SPDX-License-Identifier: MIT
// The trained pair's transformer (examples/python/model.py's architecture) in C++ with Eigen, run
// the way an engine runs one: new tokens, their position ids and a mask over cached + new tokens,
// with a KV cache. Any config of that architecture loads; sizes come from kjv_pair.json.
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/io/json.hpp"
#include "specdec/io/safetensors.hpp"
#include "specdec/provider/logits_provider.hpp"

namespace kjv {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vector = Eigen::Matrix<float, 1, Eigen::Dynamic>;

/// model.py's Config, less what only initialises random weights (seed, logit_scale,
/// residual_scale).
struct Config {
  std::int64_t vocab = 0;
  std::int64_t width = 0;  // model dimension
  std::int64_t heads = 0;
  std::int64_t layers = 0;
  std::int64_t max_positions = 0;

  std::int64_t head_width() const { return width / heads; }

  /// Throws specdec::Error naming `name.field` unless every size is >= 1 and heads divides width.
  void validate(const std::string& name) const {
    const std::pair<const char*, std::int64_t> sizes[] = {{"vocab", vocab},
                                                          {"width", width},
                                                          {"heads", heads},
                                                          {"layers", layers},
                                                          {"max_positions", max_positions}};
    for (const auto& [field, value] : sizes) {
      if (value < 1 || value > (std::int64_t{1} << 20)) {
        specdec::detail::fail(name + "." + field, "{} is outside [1, 2^20]", value);
      }
    }
    if (width % heads != 0) {
      specdec::detail::fail(name + ".heads", "{} does not divide the width {}", heads, width);
    }
  }
};

/// Keys and values of every layer, [capacity, width] each (the heads side by side); slots
/// [0, length) hold the tokens fed so far, in the order they were fed.
struct KVCache {
  std::vector<Matrix> keys, values;
  std::int64_t length = 0;

  KVCache() = default;
  KVCache(const Config& config, std::int64_t capacity)
      : keys(static_cast<std::size_t>(config.layers), Matrix::Zero(capacity, config.width)),
        values(keys) {}

  std::int64_t capacity() const { return keys.empty() ? 0 : keys.front().rows(); }

  /// Copies slot source[t] to slot destination[t] in every layer, in order (specdec's
  /// kv_compaction gives destination <= source, so no slot is overwritten before it is read).
  void move(std::span<const std::int32_t> source, std::span<const std::int32_t> destination) {
    for (std::size_t t = 0; t < source.size(); ++t) {
      if (source[t] == destination[t]) continue;
      for (std::size_t layer = 0; layer < keys.size(); ++layer) {
        keys[layer].row(destination[t]) = keys[layer].row(source[t]);
        values[layer].row(destination[t]) = values[layer].row(source[t]);
      }
    }
  }
};

/// A pre-norm transformer: token + learned position embeddings, `layers` blocks (attention over
/// the cache, then a GELU MLP of width 4 x width), a final LayerNorm and a bias-free head.
class Transformer {
 public:
  /// Reads `path` (a safetensors file written by model.py's GPT.save) for `config`. Throws
  /// specdec::Error naming the file's tensor that is missing or misshaped, or the file itself.
  Transformer(const Config& config, const std::filesystem::path& path) : config_(config) {
    config_.validate("config");
    const auto tensors = specdec::io::read_safetensors(path);
    const auto file = specdec::io::escape_for_message(path.filename().string());
    std::size_t used = 0;
    const auto take = [&](const std::string& name, std::int64_t rows, std::int64_t cols) {
      const auto found = tensors.find(name);
      if (found == tensors.end()) specdec::detail::fail(file, "has no tensor {}", name);
      const auto& shape = found->second.shape;
      const bool fits = cols == 0 ? shape == std::vector<std::int64_t>{rows}
                                  : shape == std::vector<std::int64_t>{rows, cols};
      if (!fits) {
        specdec::detail::fail(file, "{} has shape [{}], the config needs [{}{}{}]", name,
                              fmt::join(shape, ", "), rows, cols ? ", " : "",
                              cols ? std::to_string(cols) : "");
      }
      ++used;
      return Matrix(Eigen::Map<const Matrix>(found->second.data.data(), rows, cols ? cols : 1));
    };
    const auto w = config_.width;
    token_embedding_ = take("token_embedding.weight", config_.vocab, w);
    position_embedding_ = take("position_embedding.weight", config_.max_positions, w);
    for (std::int64_t l = 0; l < config_.layers; ++l) {
      const auto prefix = "blocks." + std::to_string(l) + ".";
      Block b;
      b.attention_norm = {take(prefix + "attention_norm.weight", w, 0).transpose(),
                          take(prefix + "attention_norm.bias", w, 0).transpose()};
      b.qkv = {take(prefix + "qkv.weight", 3 * w, w).transpose(),
               take(prefix + "qkv.bias", 3 * w, 0).transpose()};
      b.attention_out = {take(prefix + "attention_out.weight", w, w).transpose(),
                         take(prefix + "attention_out.bias", w, 0).transpose()};
      b.mlp_norm = {take(prefix + "mlp_norm.weight", w, 0).transpose(),
                    take(prefix + "mlp_norm.bias", w, 0).transpose()};
      b.mlp_in = {take(prefix + "mlp.0.weight", 4 * w, w).transpose(),
                  take(prefix + "mlp.0.bias", 4 * w, 0).transpose()};
      b.mlp_out = {take(prefix + "mlp.2.weight", w, 4 * w).transpose(),
                   take(prefix + "mlp.2.bias", w, 0).transpose()};
      blocks_.push_back(std::move(b));
    }
    norm_ = {take("norm.weight", w, 0).transpose(), take("norm.bias", w, 0).transpose()};
    head_ = take("head.weight", config_.vocab, w).transpose();
    if (used != tensors.size()) {
      specdec::detail::fail(file, "holds {} tensors; a {}-layer model has {}", tensors.size(),
                            config_.layers, used);
    }
  }

  const Config& config() const { return config_; }

  /// Scratch of forward passes over up to `rows` new tokens after up to `keys` cache slots in all:
  /// sized once, so that later passes allocate nothing.
  struct Scratch {
    Matrix x, normed, qkv, attended, hidden, scores;
    Scratch(const Config& c, std::int64_t rows, std::int64_t keys)
        : x(rows, c.width),
          normed(rows, c.width),
          qkv(rows, 3 * c.width),
          attended(rows, c.width),
          hidden(rows, 4 * c.width),
          scores(rows, keys) {}
  };

  /// Logits [n, vocab] (into the first n rows of `logits`) of n new tokens at position ids
  /// `positions`; `mask` holds n rows of cache.length + n bytes, nonzero where new token i may
  /// attend to that slot (the cache's slots, then the new tokens). Appends the new tokens' keys
  /// and values at slots cache.length .. cache.length + n - 1. The caller checks sizes and ids.
  void forward(std::span<const specdec::Token> tokens, std::span<const std::int32_t> positions,
               std::span<const std::uint8_t> mask, KVCache& cache, Scratch& s,
               Matrix& logits) const {
    const auto n = static_cast<std::int64_t>(tokens.size());
    const auto start = cache.length, total = start + n, w = config_.width;
    auto x = s.x.topRows(n);
    for (std::int64_t i = 0; i < n; ++i) {
      x.row(i) = token_embedding_.row(tokens[static_cast<std::size_t>(i)]) +
                 position_embedding_.row(positions[static_cast<std::size_t>(i)]);
    }
    const auto hw = config_.head_width();
    const float scale = 1.0f / std::sqrt(static_cast<float>(hw));
    for (std::size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      layer_norm(x, b.attention_norm, s.normed.topRows(n));
      b.qkv.apply(s.normed.topRows(n), s.qkv.topRows(n));
      cache.keys[l].middleRows(start, n) = s.qkv.block(0, w, n, w);
      cache.values[l].middleRows(start, n) = s.qkv.block(0, 2 * w, n, w);
      for (std::int64_t h = 0; h < config_.heads; ++h) {
        auto scores = s.scores.topLeftCorner(n, total);
        scores.noalias() =
            s.qkv.block(0, h * hw, n, hw) * cache.keys[l].block(0, h * hw, total, hw).transpose();
        for (std::int64_t i = 0; i < n; ++i) {
          const std::uint8_t* allowed = mask.data() + i * total;
          float top = -std::numeric_limits<float>::infinity();
          for (std::int64_t j = 0; j < total; ++j) {
            scores(i, j) =
                allowed[j] ? scores(i, j) * scale : -std::numeric_limits<float>::infinity();
            top = std::max(top, scores(i, j));
          }
          float sum = 0.0f;
          for (std::int64_t j = 0; j < total; ++j)
            sum += scores(i, j) = std::exp(scores(i, j) - top);
          scores.row(i) /= sum;
        }
        s.attended.block(0, h * hw, n, hw).noalias() =
            scores * cache.values[l].block(0, h * hw, total, hw);
      }
      b.attention_out.apply_add(s.attended.topRows(n), x);
      layer_norm(x, b.mlp_norm, s.normed.topRows(n));
      b.mlp_in.apply(s.normed.topRows(n), s.hidden.topRows(n));
      s.hidden.topRows(n) = s.hidden.topRows(n).unaryExpr(
          [](float v) { return 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f)); });
      b.mlp_out.apply_add(s.hidden.topRows(n), x);
    }
    cache.length = total;
    layer_norm(x, norm_, s.normed.topRows(n));
    logits.topRows(n).noalias() = s.normed.topRows(n) * head_;
  }

  /// Logits [n, vocab] after every prefix of `tokens` (n of them), from an empty cache with a
  /// causal mask: plain left-to-right scoring, the reference cached passes are checked against.
  Matrix prefix_logits(std::span<const specdec::Token> tokens) const {
    const auto n = static_cast<std::int64_t>(tokens.size());
    KVCache cache(config_, n);
    Scratch scratch(config_, n, n);
    Matrix logits(n, config_.vocab);
    std::vector<std::int32_t> positions;
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(n * n), 0);
    for (std::int64_t i = 0; i < n; ++i) {
      positions.push_back(static_cast<std::int32_t>(i));
      std::fill_n(mask.begin() + i * n, i + 1, std::uint8_t{1});
    }
    forward(tokens, positions, mask, cache, scratch, logits);
    return logits;
  }

 private:
  struct Norm {
    Vector weight, bias;
  };
  struct Linear {
    Matrix weight;  // [in, out]: the transpose of torch's, so rows multiply on the left
    Vector bias;
    template <class In, class Out>
    void apply(const In& in, Out out) const {
      out.noalias() = in * weight;
      out.rowwise() += bias;
    }
    template <class In, class Out>
    void apply_add(const In& in, Out& out) const {
      out.noalias() += in * weight;
      out.rowwise() += bias;
    }
  };
  struct Block {
    Norm attention_norm;
    Linear qkv, attention_out;
    Norm mlp_norm;
    Linear mlp_in, mlp_out;
  };

  // torch.nn.LayerNorm: biased variance, eps 1e-5.
  template <class In, class Out>
  static void layer_norm(const In& in, const Norm& norm, Out out) {
    for (Eigen::Index i = 0; i < in.rows(); ++i) {
      const float mean = in.row(i).mean();
      const float variance = (in.row(i).array() - mean).square().mean();
      out.row(i) = ((in.row(i).array() - mean) / std::sqrt(variance + 1e-5f))
                       .matrix()
                       .cwiseProduct(norm.weight) +
                   norm.bias;
    }
  }

  Config config_;
  Matrix token_embedding_, position_embedding_;
  std::vector<Block> blocks_;
  Norm norm_;
  Matrix head_;  // [width, vocab]
};

/// One model of kjv_pair.json: its config and weights file, read from `directory`.
struct PairEntry {
  Config config;
  std::filesystem::path weights;
};

/// Reads `directory`/kjv_pair.json's entry `name` ("target" or "draft"). Throws specdec::Error
/// naming the file or the missing field.
inline PairEntry read_pair_entry(const std::filesystem::path& directory, const std::string& name) {
  const auto path = directory / "kjv_pair.json";
  const auto bytes = specdec::detail::read_file(path);
  const auto json =
      specdec::io::parse_json_strict(std::string_view(bytes.data(), bytes.size()), "kjv_pair.json");
  const auto field = [&](const nlohmann::json& object, const std::string& key,
                         const std::string& where) -> const nlohmann::json& {
    if (!object.is_object() || !object.contains(key)) {
      specdec::detail::fail("kjv_pair.json", "has no field {}.{}", where, key);
    }
    return object.at(key);
  };
  const auto& entry = field(field(json, "models", ""), name, "models");
  const auto& config = field(entry, "config", "models." + name);
  PairEntry out;
  const auto where = "models." + name + ".config";
  const auto number = [&](const char* key) {
    const auto& value = field(config, key, where);
    if (!value.is_number_integer()) {
      specdec::detail::fail("kjv_pair.json", "{}.{} is not an integer", where, key);
    }
    return value.get<std::int64_t>();
  };
  out.config = {number("vocab"), number("width"), number("heads"), number("layers"),
                number("max_positions")};
  out.config.validate("kjv_pair.json " + where);
  const auto& file = field(entry, "file", "models." + name);
  if (!file.is_string())
    specdec::detail::fail("kjv_pair.json", "models.{}.file is not a string", name);
  out.weights = directory / file.get<std::string>();
  return out;
}

/// The trained pair of a models directory: the target and the draft, of one vocabulary.
struct ModelPair {
  Transformer target, draft;

  /// The positions both models hold.
  std::int64_t context() const {
    return std::min(target.config().max_positions, draft.config().max_positions);
  }
};

/// Reads both models of `directory`/kjv_pair.json (read_pair_entry's errors; a specdec::Error
/// naming the draft when the vocabularies differ).
inline ModelPair read_pair(const std::filesystem::path& directory) {
  const auto target = read_pair_entry(directory, "target");
  const auto draft = read_pair_entry(directory, "draft");
  ModelPair pair{Transformer(target.config, target.weights),
                 Transformer(draft.config, draft.weights)};
  specdec::provider::check_same_vocabulary(pair.draft.config().vocab, pair.target.config().vocab);
  return pair;
}

}  // namespace kjv
