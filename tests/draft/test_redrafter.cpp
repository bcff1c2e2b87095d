// SPDX-License-Identifier: MIT
// The ReDrafter head: forward pass, reference beam search, stochastic beam search, safetensors.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "specdec/draft/redrafter.hpp"
#include "specdec/io/redrafter_head.hpp"
#include "support/stats.hpp"

using namespace specdec;
using namespace specdec::io;
using Catch::Detail::Approx;

namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

std::vector<float> log_softmax_of(std::vector<float> z) {
  float m = z[0];
  for (float v : z) m = std::max(m, v);
  double s = 0.0;
  for (float v : z) s += std::exp(static_cast<double>(v - m));
  for (auto& v : z) v = static_cast<float>(v - m - std::log(s));
  return z;
}

/// H = 1, D = 2 (no projection), V = 3, one residual block, with an RNN.
ReDrafterHead tiny_head() {
  ReDrafterHead h;
  h.config = {.hidden = 1, .exit_dim = 2, .vocab = 3, .num_layers = 1, .rnn = true, .top_k = 50};
  h.embedding = Eigen::MatrixXf(3, 1);
  h.embedding << 0.5f, -1.0f, 2.0f;
  h.rnn_w = Eigen::MatrixXf::Constant(1, 1, 0.8f);
  h.rnn_u = Eigen::MatrixXf::Constant(1, 1, -0.3f);
  h.rnn_u_bias = Eigen::VectorXf::Constant(1, 0.1f);
  Eigen::MatrixXf a(2, 2);
  a << 0.2f, -0.4f, 0.7f, 0.1f;
  h.block_weights = {a};
  h.block_biases = {Eigen::Vector2f(0.05f, -0.2f)};
  h.vocab_proj = Eigen::MatrixXf(3, 2);
  h.vocab_proj << 1.0f, 0.5f, -0.5f, 2.0f, 0.3f, -1.0f;
  h.validate();
  return h;
}

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("specdec_test_" + name + ".safetensors");
}

void write_bytes(const std::filesystem::path& p, const std::string& header, std::size_t data_bytes,
                 std::uint64_t claimed_length = 0) {
  std::ofstream out(p, std::ios::binary);
  const std::uint64_t n = claimed_length ? claimed_length : header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  const std::vector<char> zeros(data_bytes, 0);
  out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}

}  // namespace

TEST_CASE("ReDrafter head forward pass matches a hand computation", "[draft][redrafter]") {
  const auto head = tiny_head();
  const std::vector<float> hidden = {0.6f};
  std::vector<float> state = {0.0f}, lp(3);
  // Step 1: s1 = SiLU(0.8 e(2) + (-0.3) 0 + 0.1), x = [h, s1], y = x + SiLU(A x + c), z = P y.
  redrafter_step(head, hidden, state, 2, lp);
  const float s1 = silu(0.8f * 2.0f + 0.1f);
  CHECK(state[0] == Approx(s1).epsilon(1e-6));
  const float x0 = 0.6f, x1 = s1;
  const float y0 = x0 + silu(0.2f * x0 - 0.4f * x1 + 0.05f);
  const float y1 = x1 + silu(0.7f * x0 + 0.1f * x1 - 0.2f);
  const auto expected =
      log_softmax_of({1.0f * y0 + 0.5f * y1, -0.5f * y0 + 2.0f * y1, 0.3f * y0 - 1.0f * y1});
  for (int i = 0; i < 3; ++i)
    CHECK(lp[static_cast<std::size_t>(i)] ==
          Approx(expected[static_cast<std::size_t>(i)]).margin(1e-5));
  // Step 2 uses the previous state: s2 = SiLU(0.8 e(0) - 0.3 s1 + 0.1).
  redrafter_step(head, hidden, state, 0, lp);
  CHECK(state[0] == Approx(silu(0.8f * 0.5f - 0.3f * s1 + 0.1f)).epsilon(1e-6));
}

TEST_CASE("ReDrafter head without RNN sums embeddings and projects its input",
          "[draft][redrafter]") {
  ReDrafterHead h;
  h.config = {.hidden = 1, .exit_dim = 1, .vocab = 2, .num_layers = 0, .rnn = false, .top_k = 0};
  h.embedding = Eigen::MatrixXf(2, 1);
  h.embedding << 1.5f, -0.5f;
  h.input_proj = Eigen::MatrixXf(1, 2);
  h.input_proj << 0.5f, 2.0f;
  h.input_proj_bias = Eigen::VectorXf::Constant(1, -0.25f);
  h.vocab_proj = Eigen::MatrixXf(2, 1);
  h.vocab_proj << 1.0f, -1.0f;
  h.validate();
  const std::vector<float> hidden = {0.2f};
  std::vector<float> state = {0.0f}, lp(2);
  redrafter_step(h, hidden, state, 0, lp);
  redrafter_step(h, hidden, state, 1, lp);
  CHECK(state[0] == Approx(1.0f));  // 1.5 + (-0.5)
  const float x = 0.5f * 0.2f + 2.0f * 1.0f - 0.25f;
  const auto expected = log_softmax_of({x, -x});
  CHECK(lp[0] == Approx(expected[0]).margin(1e-6));
  CHECK(lp[1] == Approx(expected[1]).margin(1e-6));
}

TEST_CASE("ReDrafter head keeps only the top-k logits", "[draft][redrafter]") {
  auto head = ReDrafterHead::random(
      {.hidden = 3, .exit_dim = 4, .vocab = 8, .num_layers = 2, .rnn = true, .top_k = 3}, 11);
  const std::vector<float> hidden = {0.1f, -0.2f, 0.3f};
  std::vector<float> state(3, 0.0f), lp(8);
  redrafter_step(head, hidden, state, 4, lp);
  int kept = 0;
  double mass = 0.0;
  for (float v : lp) {
    if (v > -1000.0f) {
      ++kept;
      mass += std::exp(static_cast<double>(v));
    } else {
      CHECK(v < -49000.0f);
    }
  }
  CHECK(kept == 3);
  CHECK(mass == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("ReDrafter beam search equals exhaustive search when W covers every prefix",
          "[draft][redrafter]") {
  const auto head = ReDrafterHead::random(
      {.hidden = 3, .exit_dim = 5, .vocab = 4, .num_layers = 1, .rnn = true}, 21, 1.0f);
  const std::vector<float> hidden = {0.3f, -0.1f, 0.8f};
  const Token init = 2;
  // Exhaustive: joint log-probability of every two-token draft.
  double best = -1e300;
  std::pair<int, int> arg;
  for (int a = 0; a < 4; ++a) {
    std::vector<float> s(3, 0.0f), lp1(4), lp2(4);
    redrafter_step(head, hidden, s, init, lp1);
    redrafter_step(head, hidden, s, a, lp2);
    for (int b = 0; b < 4; ++b) {
      const double v = lp1[static_cast<std::size_t>(a)] + lp2[static_cast<std::size_t>(b)];
      if (v > best) {
        best = v;
        arg = {a, b};
      }
    }
  }
  ReDrafterBeams beams;
  redrafter_beam_search(head, hidden, init, 16, 3, beams);
  CHECK(beams.token(0, 0) == init);
  CHECK(beams.token(0, 1) == arg.first);
  CHECK(beams.token(0, 2) == arg.second);
  CHECK(beams.beam_log_probs[0] == Approx(best).margin(1e-4));
  // Every beam's score is the sum of its rows at its tokens; beams are distinct and sorted.
  std::set<std::pair<int, int>> distinct;
  for (std::int32_t k = 0; k < 16; ++k) {
    double sum = 0.0;
    for (std::int32_t j = 0; j < 2; ++j)
      sum += beams.row(k, j, 4)[static_cast<std::size_t>(beams.token(k, j + 1))];
    CHECK(beams.beam_log_probs[static_cast<std::size_t>(k)] == Approx(sum).margin(1e-4));
    if (k > 0)
      CHECK(beams.beam_log_probs[static_cast<std::size_t>(k)] <=
            beams.beam_log_probs[static_cast<std::size_t>(k - 1)]);
    distinct.insert({beams.token(k, 1), beams.token(k, 2)});
  }
  CHECK(distinct.size() == 16);
}

TEST_CASE("ReDrafter beam search starts from beam 0 only", "[draft][redrafter]") {
  const auto head = ReDrafterHead::random(
      {.hidden = 2, .exit_dim = 4, .vocab = 6, .num_layers = 1, .rnn = true}, 5, 1.0f);
  const std::vector<float> hidden = {0.5f, -0.5f};
  ReDrafterBeams beams;
  redrafter_beam_search(head, hidden, 1, 3, 2, beams);
  // One step: the three beams are the three most probable first tokens, all distinct.
  std::vector<float> s(2, 0.0f), lp(6);
  redrafter_step(head, hidden, s, 1, lp);
  std::vector<int> order = {0, 1, 2, 3, 4, 5};
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return lp[static_cast<std::size_t>(a)] > lp[static_cast<std::size_t>(b)];
  });
  for (std::int32_t k = 0; k < 3; ++k)
    CHECK(beams.token(k, 1) == order[static_cast<std::size_t>(k)]);
}

TEST_CASE("ReDrafter stochastic beam search samples the head's sequences", "[draft][redrafter]") {
  const auto head = ReDrafterHead::random(
      {.hidden = 2, .exit_dim = 4, .vocab = 3, .num_layers = 1, .rnn = true}, 8, 1.0f);
  const std::vector<float> hidden = {0.2f, 0.9f};
  const Token init = 0;
  std::vector<double> expected(9);
  for (int a = 0; a < 3; ++a) {
    std::vector<float> s(2, 0.0f), lp1(3), lp2(3);
    redrafter_step(head, hidden, s, init, lp1);
    redrafter_step(head, hidden, s, a, lp2);
    for (int b = 0; b < 3; ++b)
      expected[static_cast<std::size_t>(a * 3 + b)] = std::exp(
          static_cast<double>(lp1[static_cast<std::size_t>(a)]) + lp2[static_cast<std::size_t>(b)]);
  }
  Workspace ws;
  DraftedTree out;
  std::vector<std::int64_t> counts(9, 0);
  for (std::uint32_t i = 0; i < 30000; ++i) {
    const RandomStream stream{.seed = 3, .position = i, .domain = Domain::kDraft};
    redrafter_stochastic_beam_search(head, hidden, init, 2, 2, stream, out, ws);
    out.tree.validate(3);
    // The best final beam (the first node at depth 2) is a sample of the head's 2-token draft.
    std::int32_t leaf = 0;
    while (out.tree.depths[static_cast<std::size_t>(leaf)] != 2) ++leaf;
    const auto parent = out.tree.parents[static_cast<std::size_t>(leaf)];
    ++counts[static_cast<std::size_t>(out.tree.tokens[static_cast<std::size_t>(parent)] * 3 +
                                      out.tree.tokens[static_cast<std::size_t>(leaf)])];
  }
  // False-failure probability 1e-6.
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("safetensors round trip keeps a ReDrafter head", "[draft][safetensors]") {
  const auto head = ReDrafterHead::random(
      {.hidden = 3, .exit_dim = 4, .vocab = 7, .num_layers = 2, .rnn = true}, 13);
  const std::vector<float> hidden = {0.1f, 0.2f, -0.3f};
  std::vector<float> s1(3, 0.0f), s2(3, 0.0f), lp1(7), lp2(7);
  redrafter_step(head, hidden, s1, 3, lp1);
  const auto path = temp_file("roundtrip");
  save_redrafter_head(path, head);
  const auto loaded = load_redrafter_head(path);
  CHECK(loaded.config.num_layers == 2);
  CHECK(loaded.config.rnn);
  CHECK(loaded.config.exit_dim == 4);
  CHECK(loaded.vocab_proj == head.vocab_proj);
  CHECK(loaded.input_proj == head.input_proj);
  redrafter_step(loaded, hidden, s2, 3, lp2);
  for (int i = 0; i < 7; ++i)
    CHECK(lp2[static_cast<std::size_t>(i)] == lp1[static_cast<std::size_t>(i)]);
  for (auto dtype : {TensorDType::kF16, TensorDType::kBF16}) {
    save_redrafter_head(path, head, dtype);
    const auto low = load_redrafter_head(path);
    const float tol = dtype == TensorDType::kF16 ? 2e-3f : 1.6e-2f;
    CHECK((low.vocab_proj - head.vocab_proj).cwiseAbs().maxCoeff() <=
          tol * head.vocab_proj.cwiseAbs().maxCoeff());
  }
  std::filesystem::remove(path);
}

TEST_CASE("safetensors bad files give clear errors", "[draft][safetensors][errors]") {
  const auto path = temp_file("bad");
  const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_bytes(path, good, 8);
  CHECK(read_safetensors(path).at("a").data.size() == 2);
  write_bytes(path, good, 4);  // truncated data
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("a.data_offsets"));
  write_bytes(path, R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8);
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("a.dtype"));
  write_bytes(path, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("a.data_offsets"));
  write_bytes(path, good, 8, 1000);  // header length beyond the file
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("beyond the file"));
  write_bytes(path, "{not json", 0);
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("malformed JSON"));
  {
    std::ofstream out(path, std::ios::binary);
    out.write("abc", 3);
  }
  CHECK_THROWS_WITH(read_safetensors(path), Catch::Contains("file:"));
  CHECK_THROWS_WITH(read_safetensors(temp_file("does_not_exist")), Catch::Contains("path:"));
  // A head tensor of the wrong shape.
  auto tensors = redrafter_head_tensors(ReDrafterHead::random(
      {.hidden = 2, .exit_dim = 4, .vocab = 5, .num_layers = 1, .rnn = true}, 1));
  tensors["rnn_u.weight"] = Tensor{{2, 3}, std::vector<float>(6, 0.0f)};
  write_safetensors(path, tensors);
  CHECK_THROWS_WITH(load_redrafter_head(path), Catch::Contains("rnn_u.weight"));
  tensors.erase("rnn_u.weight");
  write_safetensors(path, tensors);
  CHECK_THROWS_WITH(load_redrafter_head(path), Catch::Contains("rnn_u.weight: tensor is missing"));
  std::filesystem::remove(path);
}

TEST_CASE("ReDrafter entry points reject bad input", "[draft][redrafter][errors]") {
  const auto head = tiny_head();
  const std::vector<float> hidden = {0.6f};
  const std::vector<float> wrong = {0.6f, 0.1f};
  ReDrafterBeams beams;
  CHECK_THROWS_WITH(redrafter_beam_search(head, hidden, 0, 0, 3, beams), Catch::Contains("width:"));
  CHECK_THROWS_WITH(redrafter_beam_search(head, hidden, 0, 2, 1, beams),
                    Catch::Contains("length:"));
  CHECK_THROWS_WITH(redrafter_beam_search(head, wrong, 0, 2, 3, beams), Catch::Contains("hidden:"));
  CHECK_THROWS_WITH(redrafter_beam_search(head, hidden, 3, 2, 3, beams),
                    Catch::Contains("init_token:"));
  std::vector<float> state = {0.0f}, lp(3);
  CHECK_THROWS_WITH(redrafter_step(head, hidden, state, -1, lp), Catch::Contains("token:"));
  auto broken = head;
  broken.vocab_proj = Eigen::MatrixXf(2, 2);
  CHECK_THROWS_WITH(broken.validate(), Catch::Contains("vocab_proj:"));
  Workspace ws;
  DraftedTree out;
  CHECK_THROWS_WITH(
      redrafter_stochastic_beam_search(head, hidden, 0, 0, 2, RandomStream{}, out, ws),
      Catch::Contains("width:"));
}
