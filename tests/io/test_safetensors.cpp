// SPDX-License-Identifier: MIT
// Hostile safetensors files: every size read from a file is checked before it is used.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "specdec/io/redrafter_head.hpp"
#include "specdec/io/safetensors.hpp"

using namespace specdec;
using namespace specdec::io;

namespace {

/// A safetensors image: the 8-byte header length, the header, `data_bytes` zero bytes.
std::vector<char> image(const std::string& header, std::size_t data_bytes) {
  std::vector<char> bytes(8 + header.size() + data_bytes, 0);
  const std::uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

TensorMap parse(const std::string& header, std::size_t data_bytes) {
  return parse_safetensors(image(header, data_bytes));
}

std::string tensor(const std::string& name, const std::string& shape, const std::string& offsets) {
  std::string out = "\"";
  out.append(name).append("\":{\"dtype\":\"F32\",\"shape\":").append(shape);
  return out.append(",\"data_offsets\":").append(offsets).append("}");
}

/// The header object of the given entries.
std::string object(std::initializer_list<std::string> entries) {
  std::string out = "{";
  for (const auto& entry : entries) out.append(out.size() > 1 ? "," : "").append(entry);
  return out.append("}");
}

}  // namespace

TEST_CASE("safetensors shapes whose size overflows are rejected", "[io][safetensors]") {
  // 3 x 6148914691236517206 wraps to 2 in int64: the file used to load as two floats.
  CHECK_THROWS_WITH(parse(object({tensor("a", "[3,6148914691236517206]", "[0,8]")}), 8),
                    Catch::StartsWith("a.shape: ") && Catch::Contains("overflows"));
  // 2^62 floats are 2^64 bytes, which wraps to the 0 bytes the offsets claim.
  CHECK_THROWS_WITH(parse(object({tensor("a", "[4611686018427387904]", "[0,0]")}), 0),
                    Catch::StartsWith("a.shape: ") && Catch::Contains("overflows"));
  CHECK_THROWS_WITH(parse(object({tensor("a", "[9223372036854775808]", "[0,0]")}), 0),
                    Catch::StartsWith("a.shape[0]: "));
  // The writer checks the shape as well.
  const TensorMap huge = {{"a", Tensor{{3, 6148914691236517206}, {0.0f, 0.0f}}}};
  const auto path = std::filesystem::temp_directory_path() / "specdec_test_io_huge.safetensors";
  CHECK_THROWS_WITH(write_safetensors(path, huge), Catch::StartsWith("a: "));
  CHECK_THROWS_WITH((Tensor{{-1, 2}, {}}.numel()), Catch::StartsWith("shape: "));
}

TEST_CASE("safetensors shapes and offsets must be non-negative integers", "[io][safetensors]") {
  for (const std::string shape : {"[1.5]", "[1e300]", "[-2]", "[\"2\"]", "[true]", "2"}) {
    CAPTURE(shape);
    CHECK_THROWS_WITH(parse(object({tensor("a", shape, "[0,8]")}), 8),
                      Catch::StartsWith("a.shape"));
  }
  for (const std::string offsets :
       {"[0,8.0]", "[0.5,8]", "[0,1e300]", "[-8,0]", "[0]", "[0,8,8]", "{}"}) {
    CAPTURE(offsets);
    CHECK_THROWS_WITH(parse(object({tensor("a", "[2]", offsets)}), 8),
                      Catch::StartsWith("a.data_offsets"));
  }
  CHECK_THROWS_WITH(parse(R"({"a":[1,2]})", 0), Catch::StartsWith("a: "));
}

TEST_CASE("safetensors tensors must tile the data section", "[io][safetensors]") {
  const auto a = tensor("a", "[2]", "[0,8]");
  CHECK(parse(object({a, tensor("b", "[1]", "[8,12]")}), 12).size() == 2);
  CHECK(parse(object({a, tensor("e", "[0]", "[8,8]")}), 8).size() == 2);
  CHECK_THROWS_WITH(parse(object({a, tensor("b", "[1]", "[4,8]")}), 8),
                    Catch::StartsWith("file: tensors overlap"));
  CHECK_THROWS_WITH(parse(object({a, tensor("b", "[2]", "[0,8]")}), 8),
                    Catch::StartsWith("file: tensors overlap"));
  CHECK_THROWS_WITH(parse(object({a, tensor("b", "[1]", "[12,16]")}), 16),
                    Catch::StartsWith("file: data bytes [8, 12) belong to no tensor"));
  CHECK_THROWS_WITH(parse(object({a}), 12),
                    Catch::StartsWith("file: data bytes [8, 12) belong to no tensor"));
  CHECK_THROWS_WITH(parse(object({tensor("a", "[2]", "[4,12]")}), 12),
                    Catch::StartsWith("file: data bytes [0, 4) belong to no tensor"));
  CHECK_THROWS_WITH(parse(object({a, a}), 8), Catch::Contains("appears twice"));
}

TEST_CASE("safetensors names are escaped in messages", "[io][safetensors]") {
  try {
    (void)parse(object({tensor("a\\nb", "[1.5]", "[0,4]")}), 4);
    FAIL("a fractional dimension was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    CHECK_THAT(e.what(), Catch::StartsWith("a\\u000ab.shape[0]: "));
  }
}

TEST_CASE("reading a directory or a missing file is an Error", "[io][safetensors]") {
  CHECK_THROWS_WITH(read_safetensors(std::filesystem::temp_directory_path()),
                    Catch::StartsWith("path: ") && Catch::Contains("not a regular file"));
  CHECK_THROWS_WITH(read_safetensors(std::filesystem::temp_directory_path() / "specdec_no_such"),
                    Catch::StartsWith("path: "));
}

TEST_CASE("a ReDrafter head with NaN or infinite weights is rejected", "[io][safetensors]") {
  const auto head = ReDrafterHead::random(
      {.hidden = 2, .exit_dim = 4, .vocab = 5, .num_layers = 1, .rnn = true}, 1);
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    for (const std::string name : {"rnn_w.weight", "rnn_u.bias", "lm_head.0.linear.weight",
                                   "lm_head.1.weight", "embed_tokens.weight"}) {
      CAPTURE(name, bad);
      auto tensors = redrafter_head_tensors(head);
      tensors.at(name).data.back() = bad;
      CHECK_THROWS_WITH(redrafter_head_from_tensors(tensors), Catch::StartsWith(name + "["));
    }
    Eigen::MatrixXf embedding = head.embedding;
    embedding(1, 1) = bad;
    CHECK_THROWS_WITH(redrafter_head_from_tensors(redrafter_head_tensors(head), embedding),
                      Catch::StartsWith("embedding: "));
  }
}
