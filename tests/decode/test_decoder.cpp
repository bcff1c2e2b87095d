// SPDX-License-Identifier: MIT
// Decoder: determinism, thread independence, metrics, stopping and bad input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <string>

#include "decode/toy_tables.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/toy/providers.hpp"

using namespace specdec;
using specdec::test::markov_draft;
using specdec::test::markov_target;

TEST_CASE("decode runs every method end to end") {
  for (auto m : kAllMethods) {
    auto target = markov_target();
    auto draft = markov_draft();
    DecodeOptions o;
    o.method = m;
    o.depth = 3;
    o.width = 2;
    o.branching = {2, 2};
    o.max_new_tokens = 20;
    o.cascade.alpha = 0.3f;
    o.lossy.alpha = 0.2f;
    const std::vector<Token> prompt{1};
    const auto r = decode(target, draft, prompt, o, 7);
    INFO(method_name(m));
    CHECK(r.tokens.size() == 20);
    CHECK(r.metrics.tokens_generated == 20);
    CHECK(r.metrics.target_calls >= 1);
    for (auto t : r.tokens) CHECK((t >= 0 && t < 4));
  }
}

TEST_CASE("At temperature 0 every method reproduces greedy target decoding") {
  const std::vector<Token> prompt{1};
  DecodeOptions o;
  o.warp.temperature = 0.0f;
  o.max_new_tokens = 30;
  o.method = Method::kAutoregressive;
  auto t0 = markov_target(), d0 = markov_draft();
  const auto greedy = decode(t0, d0, prompt, o).tokens;
  for (auto m : kAllMethods) {
    auto target = markov_target();
    auto draft = markov_draft();
    o.method = m;
    o.depth = 3;
    o.branching = {2, 2};
    o.cascade.alpha = 0.3f;  // defer iff max draft < 0.7: always for these tables
    o.lossy.alpha = 0.2f;
    o.seed = 11;
    INFO(method_name(m));
    CHECK(decode(target, draft, prompt, o, 2).tokens == greedy);
  }
}

namespace {

DecodeOptions sd_options() {
  DecodeOptions o;
  o.method = Method::kRsdS;
  o.depth = 3;
  o.width = 2;
  o.max_new_tokens = 25;
  o.seed = 42;
  return o;
}

/// A Markov provider whose `evaluate` spoils one entry of row `row` with `value`.
struct SpoiledProvider {
  toy::MarkovProvider inner = markov_target();
  std::int64_t row = 0;
  float value = 0.0f;
  std::int64_t vocab = 4;

  std::int64_t vocab_size() const { return vocab; }
  std::span<const Token> context() const { return inner.context(); }
  std::int64_t committed_length() const { return inner.committed_length(); }
  void reset(std::span<const Token> prompt) { inner.reset(prompt); }
  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    inner.evaluate(batch, logits);
    if (row < logits.rows) logits.row(row)[1] = value;
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept, Token next) {
    inner.commit(batch, kept, next);
  }
};

void check_error(const std::function<void()>& f, const std::string& name) {
  try {
    f();
    FAIL("no specdec::Error thrown");
  } catch (const Error& e) {
    CHECK_THAT(std::string(e.what()), Catch::StartsWith(name));
  }
}

}  // namespace

TEST_CASE("Same seed and sequence give the same tokens") {
  const std::vector<Token> prompt{3, 1};
  for (auto m : kAllMethods) {
    auto o = sd_options();
    o.method = m;
    o.branching = {2, 1};
    auto t1 = markov_target(), d1 = markov_draft(), t2 = markov_target(), d2 = markov_draft();
    const auto a = decode(t1, d1, prompt, o, 3);
    const auto b = decode(t2, d2, prompt, o, 3);
    INFO(method_name(m));
    CHECK(a.tokens == b.tokens);
    CHECK(a.metrics.target_calls == b.metrics.target_calls);
  }
}

TEST_CASE("Different sequence ids give different tokens") {
  const std::vector<Token> prompt{3, 1};
  auto t = markov_target(), d = markov_draft();
  const auto a = decode(t, d, prompt, sd_options(), 0);
  const auto b = decode(t, d, prompt, sd_options(), 1);
  CHECK(a.tokens != b.tokens);
}

TEST_CASE("decode_batch does not depend on the thread count") {
  std::vector<std::vector<Token>> prompts;
  for (Token i = 0; i < 12; ++i) prompts.push_back({i % 4, (i * 3) % 4});
  for (auto m : {Method::kSd, Method::kSpecTr, Method::kRsdC, Method::kMtad}) {
    auto o = sd_options();
    o.method = m;
    o.branching = {2, 2};
    const auto make_target = [](std::size_t) { return markov_target(); };
    const auto make_draft = [](std::size_t) { return markov_draft(); };
    const auto one =
        decode_batch(make_target, make_draft, prompts, o, backend::cpu.with_threads(1));
    const auto four =
        decode_batch(make_target, make_draft, prompts, o, backend::cpu.with_threads(4));
    const auto all = decode_batch(make_target, make_draft, prompts, o);
    REQUIRE(one.size() == prompts.size());
    CHECK(decode_batch(make_target, make_draft, std::span<const std::vector<Token>>{}, o).empty());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      auto t = markov_target(), d = markov_draft();
      const auto single = decode(t, d, prompts[i], o, static_cast<std::uint32_t>(i));
      INFO(method_name(m) << " sequence " << i);
      CHECK(one[i].tokens == single.tokens);
      CHECK(four[i].tokens == single.tokens);
      CHECK(all[i].tokens == single.tokens);
      CHECK(four[i].metrics.target_calls == single.metrics.target_calls);
    }
  }
}

TEST_CASE("Metrics count tokens calls budget and acceptance") {
  auto t = markov_target(), d = markov_draft();
  auto o = sd_options();
  o.method = Method::kSpecInfer;
  o.width = 3;
  o.depth = 2;
  o.max_new_tokens = 30;
  const std::vector<Token> prompt{0};
  const auto r = decode(t, d, prompt, o);
  const auto& m = r.metrics;
  CHECK(m.tokens_generated == 30);
  CHECK(m.target_calls == t.calls());
  CHECK(m.draft_calls == d.calls());
  CHECK(m.draft_calls == 2 * m.target_calls);  // one draft call per level
  CHECK(m.target_tree_tokens == 6 * m.target_calls);
  CHECK(m.block_efficiency() == Catch::Detail::Approx(30.0 / m.target_calls));
  CHECK(m.levels() == 2);
  CHECK(m.acceptance_rate(1) > 0.0);
  CHECK(m.wall_seconds >= 0.0);
  // Autoregressive: one target call per token, no draft call.
  o.method = Method::kAutoregressive;
  const auto ar = decode(t, d, prompt, o);
  CHECK(ar.metrics.target_calls == 30);
  CHECK(ar.metrics.draft_calls == 0);
  CHECK(ar.metrics.block_efficiency() == Catch::Detail::Approx(1.0));
}

TEST_CASE("Decoding stops after the end token") {
  auto t = markov_target(), d = markov_draft();
  auto o = sd_options();
  o.end_token = 3;
  o.max_new_tokens = 200;
  const std::vector<Token> prompt{0};
  const auto r = decode(t, d, prompt, o, 1);
  REQUIRE(!r.tokens.empty());
  CHECK(r.tokens.back() == 3);
  CHECK(std::count(r.tokens.begin(), r.tokens.end(), 3) == 1);
  CHECK(r.metrics.tokens_generated == static_cast<std::int64_t>(r.tokens.size()));
  o.max_new_tokens = 0;
  CHECK(decode(t, d, prompt, o).tokens.empty());
}

TEST_CASE("The Decoder steps and reuses its buffers") {
  auto t = markov_target(), d = markov_draft();
  auto o = sd_options();
  o.max_new_tokens = 1000;
  Decoder decoder(t, d, o);
  const std::vector<Token> prompt{2};
  decoder.reset(prompt, 4);
  std::vector<Token> stepped;
  while (!decoder.finished()) {
    const auto emitted = decoder.step();
    CHECK((emitted.size() >= 1 && emitted.size() <= 4));
    stepped.insert(stepped.end(), emitted.begin(), emitted.end());
  }
  CHECK(decoder.step().empty());
  auto t2 = markov_target(), d2 = markov_draft();
  CHECK(decode(t2, d2, prompt, o, 4).tokens == stepped);
}

TEST_CASE("Bad options name the field") {
  auto t = markov_target(), d = markov_draft();
  const std::vector<Token> prompt{0};
  const auto with = [&](auto change) {
    return [&, change] {
      auto o = sd_options();
      change(o);
      decode(t, d, prompt, o);
    };
  };
  check_error(with([](DecodeOptions& o) { o.depth = 0; }), "depth");
  check_error(with([](DecodeOptions& o) { o.width = 0; }), "width");
  check_error(with([](DecodeOptions& o) {
                o.method = Method::kRsdC;
                o.branching = {};
              }),
              "branching");
  check_error(with([](DecodeOptions& o) {
                o.method = Method::kRsdC;
                o.branching = {2, 0};
              }),
              "branching[1]");
  check_error(with([](DecodeOptions& o) {
                o.method = Method::kRsdC;
                o.branching = {5};
              }),
              "branching[0]");
  check_error(with([](DecodeOptions& o) { o.tau = 1.5f; }), "tau");
  check_error(with([](DecodeOptions& o) { o.warp.top_p = 0.0f; }), "top_p");
  check_error(with([](DecodeOptions& o) { o.warp.temperature = -1.0f; }), "temperature");
  check_error(with([](DecodeOptions& o) { o.max_new_tokens = -1; }), "max_new_tokens");
  check_error(with([](DecodeOptions& o) { o.end_token = 4; }), "end_token");
  check_error(with([](DecodeOptions& o) { o.spectr_gamma = -1.0f; }), "spectr_gamma");
  check_error(with([](DecodeOptions& o) {
                o.method = Method::kLossy;
                o.lossy.alpha = 1.0f;
              }),
              "lossy.alpha");
  check_error(with([](DecodeOptions& o) {
                o.method = Method::kCascade;
                o.cascade.alpha = 2.0f;
              }),
              "cascade");
  check_error(with([](DecodeOptions& o) { o.method = static_cast<Method>(42); }), "method");
  check_error([] { parse_method("beam"); }, "method");
  for (auto m : kAllMethods) CHECK(parse_method(method_name(m)) == m);
}

TEST_CASE("Bad prompts and vocabularies name the argument") {
  auto t = markov_target(), d = markov_draft();
  const auto o = sd_options();
  check_error([&] { decode(t, d, std::span<const Token>{}, o); }, "prompt");
  const std::vector<Token> outside{0, 4};
  check_error([&] { decode(t, d, outside, o); }, "prompt[1]");
  const std::vector<Token> negative{-1};
  check_error([&] { decode(t, d, negative, o); }, "prompt[0]");
  toy::MarkovProvider small(toy::MarkovModel::from_rows({{0.5f, 0.5f}, {0.5f, 0.5f}}));
  const std::vector<Token> prompt{0};
  check_error([&] { decode(t, small, prompt, o); }, "draft");
  Decoder decoder(t, d, o);
  check_error([&] { decoder.step(); }, "decoder");
}

TEST_CASE("Bad provider rows name the provider") {
  const std::vector<Token> prompt{0};
  const auto o = sd_options();
  {
    SpoiledProvider target;
    target.row = 1;
    target.value = std::numeric_limits<float>::quiet_NaN();
    auto d = markov_draft();
    check_error([&] { decode(target, d, prompt, o); }, "target.logits[1][1]");
  }
  {
    SpoiledProvider draft;
    draft.value = std::numeric_limits<float>::infinity();
    auto t = markov_target();
    check_error([&] { decode(t, draft, prompt, o); }, "draft.logits[0][1]");
  }
  {
    SpoiledProvider target;
    target.vocab = 0;
    auto d = markov_draft();
    check_error([&] { decode(target, d, prompt, o); }, "target");
  }
}
