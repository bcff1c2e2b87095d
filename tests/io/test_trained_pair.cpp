// SPDX-License-Identifier: MIT
// The trained pair of examples/models/ reads back through the safetensors reader: every tensor
// is there, shaped by its config, finite, with the checksum recorded when it was written.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "specdec/io/safetensors.hpp"

namespace {

const std::filesystem::path kTrainedModels = SPECDEC_MODELS_DIR;

nlohmann::json trained_pair_description() {
  std::ifstream in(kTrainedModels / "kjv_pair.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

}  // namespace

TEST_CASE("the trained pair's weights read back with their recorded checksums",
          "[io][safetensors]") {
  const auto description = trained_pair_description();
  for (const std::string name : {"target", "draft"}) {
    const auto& model = description.at("models").at(name);
    const auto tensors =
        specdec::io::read_safetensors(kTrainedModels / model.at("file").get<std::string>());
    const auto& checksums = model.at("checksums");
    CHECK(tensors.size() == checksums.size());
    for (const auto& [tensor, sum] : checksums.items()) {
      INFO(name << " " << tensor);
      REQUIRE(tensors.count(tensor) == 1);
      const auto& values = tensors.at(tensor).data;
      double total = 0;
      bool finite = true;
      for (const float v : values) {
        total += v;
        finite = finite && std::isfinite(v);
      }
      CHECK(finite);
      CHECK(total == Approx(sum.get<double>()).epsilon(1e-9).margin(1e-9));
    }
    // The shapes follow the config: [vocab, width] embeddings, [width] norms.
    const auto& config = model.at("config");
    const auto vocab = config.at("vocab").get<std::int64_t>();
    const auto width = config.at("width").get<std::int64_t>();
    CHECK(tensors.at("token_embedding.weight").shape == std::vector<std::int64_t>{vocab, width});
    CHECK(tensors.at("head.weight").shape == std::vector<std::int64_t>{vocab, width});
    CHECK(tensors.at("norm.weight").shape == std::vector<std::int64_t>{width});
    const auto layers = config.at("layers").get<int>();
    CHECK(tensors.count("blocks." + std::to_string(layers - 1) + ".qkv.weight") == 1);
    CHECK(tensors.count("blocks." + std::to_string(layers) + ".qkv.weight") == 0);
  }
}
