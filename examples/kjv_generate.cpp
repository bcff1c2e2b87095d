// SPDX-License-Identifier: MIT
// Decodes King James Bible text with a trained pair of examples/models (the small pair: a 4-layer
// byte-level target, a 1-layer draft; --pair large, in kjv_large/: a 6-layer target of width 96,
// a 1-layer draft of width 32) run in C++ the way an engine runs them (kjv_model.hpp: a KV cache,
// one forward pass per draft tree with specdec's mask and positions; kjv_provider.hpp: the
// LogitsProvider, compacting the cache with specdec's indices), with every method, and reports
// tokens per target call and wall-clock tokens per second against plain decoding of the target.
//
// Usage: kjv_generate [--models DIR] [--pair small|large] [--prompt TEXT] [--tokens N]
//                     [--temperature T] [--seed S] [--methods a,b,...] [--repeats R]
//        kjv_generate --dump-logits target|draft [--prompt TEXT]      (rows after each prefix)
//        kjv_generate --dump-tree 'TOKENS;PARENTS;KEPT;NEXT' [--prompt TEXT]
// Bad input: one line on stderr, exit status 2.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kjv_model.hpp"
#include "kjv_options.hpp"
#include "kjv_provider.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/ngram_strategy.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"

namespace {

using specdec::DecodeOptions;
using specdec::DecodeResult;
using specdec::Method;
using specdec::Token;
using specdec::detail::fail;

// Every method's tree is at most this deep: the context must leave room for it.
constexpr std::int64_t kDeepestTree = 5;
constexpr const char* kAllMethods =
    "plain,sd,block_sd,specinfer,spectr,rsd_c,rsd_s,sequoia,eagle,ngram";

struct Settings : kjv::Settings {
  std::string pair = "small";  // "large": the pair in the models directory's kjv_large/
  std::string dump_logits;     // "target" or "draft"
  std::string dump_tree;
};

Settings parse_args(int argc, char** argv) {
  Settings s;
  s.prompt = "And God said, Let there be";
  s.tokens = 80;
  std::string methods = kAllMethods;
  // The options kjv_constrained does not take.
  const auto own_option = [&s](std::string_view flag, std::string_view value) {
    if (flag == "--pair") {
      if (value != "small" && value != "large")
        fail(flag, "'{}' is not small or large", specdec::io::escape_for_message(value));
      s.pair = value;
    } else if (flag == "--dump-logits") {
      if (value != "target" && value != "draft") fail(flag, "'{}' is not target or draft", value);
      s.dump_logits = value;
    } else if (flag == "--dump-tree") {
      s.dump_tree = value;
    } else {
      return false;
    }
    return true;
  };
  kjv::parse_options(argc, argv, "kjv_generate.cpp", s, methods, own_option);
  if (s.pair == "large") s.models += "/kjv_large";
  s.methods = kjv::parse_methods(methods, kAllMethods);
  return s;
}

// Printable ASCII as is, everything else escaped: one line that Python's unicode_escape reads.
std::string escaped(std::span<const Token> tokens) {
  std::string out;
  for (const Token t : tokens) {
    if (t == '\\') {
      out += "\\\\";
    } else if (t == '\n') {
      out += "\\n";
    } else if (t >= 0x20 && t < 0x7f) {
      out += static_cast<char>(t);
    } else {
      out += fmt::format("\\x{:02x}", t);
    }
  }
  return out;
}

void print_rows(const kjv::Matrix& rows, std::int64_t count) {
  for (std::int64_t r = 0; r < count; ++r) {
    std::string line;
    for (std::int64_t c = 0; c < rows.cols(); ++c)
      line += fmt::format("{}{:.9g}", c ? " " : "", rows(r, c));
    std::puts(line.c_str());
  }
}

std::vector<std::int32_t> parse_list(std::string_view name, std::string_view text) {
  std::vector<std::int32_t> out;
  if (text.empty()) return out;
  for (const auto& item : kjv::split(text, ',')) {
    out.push_back(kjv::parse_number<std::int32_t>(name, item, -1, 1 << 20));
  }
  return out;
}

// Scores a tree after the prompt through the provider (its first half, then all of it, so the
// second pass extends the cached tree), commits a path and a token, and scores the tree again
// after the longer context (the kept keys moved by kv_compaction): "# tree" and "# after commit"
// sections of rows.
void dump_tree(const kjv::Transformer& model, std::span<const Token> prompt,
               std::string_view spec) {
  const auto parts = kjv::split(spec, ';');
  if (parts.size() != 4) fail("--dump-tree", "'{}' is not TOKENS;PARENTS;KEPT;NEXT", spec);
  const auto tokens = parse_list("--dump-tree tokens", parts[0]);
  const auto parents = parse_list("--dump-tree parents", parts[1]);
  const auto kept = parse_list("--dump-tree kept", parts[2]);
  const auto next = kjv::parse_number<Token>("--dump-tree next", parts[3], 0, 1 << 20);
  if (tokens.size() != parents.size()) fail("--dump-tree", "tokens and parents differ in length");
  specdec::DraftTree tree, half;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (parents[i] >= static_cast<std::int32_t>(i))
      fail("--dump-tree parents", "{} is not an earlier node", parents[i]);
    tree.add(tokens[i], parents[i]);
    if (2 * i < tokens.size()) half.add(tokens[i], parents[i]);
  }
  kjv::ModelProvider provider(model);
  provider.reset(prompt);
  const auto score = [&](const specdec::DraftTree& t, const char* title, bool print) {
    const auto batch = specdec::TreeBatch::from_tree(t, provider.committed_length());
    kjv::Matrix rows(batch.rows(), model.config().vocab);
    provider.evaluate(batch, specdec::MatrixView<float>(rows.data(), batch.rows(), rows.cols()));
    if (print) {
      std::printf("# %s\n", title);
      print_rows(rows, batch.rows());
    }
    return batch;
  };
  score(half, "", false);
  const auto batch = score(tree, "tree", true);
  provider.commit(batch, kept, next);
  score(tree, "after commit", true);
}

// One method's decode of one sequence.
DecodeResult decode(const std::string& method, kjv::ModelProvider& target,
                    kjv::ModelProvider& draft, std::span<const Token> prompt,
                    const specdec::LoopOptions& loop, std::uint32_t sequence) {
  if (method == "sequoia" || method == "eagle") {
    specdec::TopKTreeOptions options;
    options =
        method == "sequoia"
            ? specdec::TopKTreeOptions{.shape = specdec::TreeShapePolicy::kSequoia,
                                       .width = 4,
                                       .depth = kDeepestTree,
                                       .budget = 16}
            : specdec::TopKTreeOptions{
                  .shape = specdec::TreeShapePolicy::kEagle2, .width = 3, .depth = 4, .budget = 12};
    return specdec::decode(target, specdec::TopKTreeStrategy<kjv::ModelProvider>(draft, options),
                           loop, prompt, sequence);
  }
  if (method == "ngram") {
    return specdec::decode(target,
                           specdec::NGramStrategy({.max_ngram = 4, .min_ngram = 2, .max_draft = 4}),
                           loop, prompt, sequence);
  }
  DecodeOptions o;
  o.warp = loop.warp;
  o.depth = 4;
  o.width = 2;
  o.max_new_tokens = loop.max_new_tokens;
  o.seed = loop.seed;
  if (method == "plain") o.method = Method::kAutoregressive;
  if (method == "sd") o.method = Method::kSd;
  if (method == "block_sd") o.method = Method::kSdBlock;
  if (method == "specinfer") o.method = Method::kSpecInfer;
  if (method == "spectr") o.method = Method::kSpecTr;
  if (method == "rsd_s") o.method = Method::kRsdS;
  if (method == "rsd_c") {
    o.method = Method::kRsdC;
    o.branching = {2, 2, 2};
  }
  return specdec::decode(target, draft, prompt, o, sequence);
}

std::string shape_of(const std::string& method) {
  if (method == "plain") return "-";
  if (method == "sequoia") return "budget 16, depth 5";
  if (method == "eagle") return "top-3, budget 12, depth 4";
  if (method == "ngram") return "2-4-grams, 4 drafts";
  if (method == "rsd_c") return "b=[2,2,2]";
  if (method == "sd" || method == "block_sd") return "L=4";
  return "K=2, L=4";
}

// Microseconds of one forward pass over `fed` new tokens after `context` cached ones (the median
// of 101), what a tree of fed - 1 nodes costs the target.
double pass_microseconds(const kjv::Transformer& model, std::int64_t context, std::int64_t fed) {
  kjv::KVCache cache(model.config(), context + fed);
  kjv::Transformer::Scratch scratch(model.config(), fed, context + fed);
  kjv::Matrix logits(fed, model.config().vocab);
  const std::vector<Token> tokens(static_cast<std::size_t>(fed), Token{'a'});
  std::vector<std::int32_t> positions;
  for (std::int64_t i = 0; i < fed; ++i)
    positions.push_back(static_cast<std::int32_t>(context + i));
  const std::vector<std::uint8_t> mask(static_cast<std::size_t>(fed * (context + fed)), 1);
  std::vector<double> times;
  for (int r = 0; r < 101; ++r) {
    cache.length = context;
    const auto start = std::chrono::steady_clock::now();
    model.forward(tokens, positions, mask, cache, scratch, logits);
    times.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::nth_element(times.begin(), times.begin() + 50, times.end());
  return times[50];
}

void print_pass_costs(const kjv::Transformer& target, const kjv::Transformer& draft,
                      std::int64_t context) {
  std::printf("\nforward pass after %lld cached tokens, microseconds (median of 101):\n",
              static_cast<long long>(context));
  std::printf("%-22s %8s %8s %8s %8s %8s\n", "new tokens", "1", "2", "5", "9", "17");
  for (const auto& [name, model] : {std::pair{"target", &target}, std::pair{"draft", &draft}}) {
    std::printf("%-22s", name);
    for (const std::int64_t fed : {1, 2, 5, 9, 17}) {
      std::printf(" %8.1f", pass_microseconds(*model, context, fed));
    }
    std::printf("\n");
  }
}

int run(const Settings& s) {
  const auto pair = kjv::read_pair(s.models);
  const auto& target = pair.target;
  const auto& draft = pair.draft;
  const auto context = pair.context();
  const auto prompt = kjv::encode_prompt(s.prompt, target.config().vocab, context, kDeepestTree);
  if (!s.dump_logits.empty()) {
    const auto& model = s.dump_logits == "target" ? target : draft;
    print_rows(model.prefix_logits(prompt), static_cast<std::int64_t>(prompt.size()));
    return 0;
  }
  if (!s.dump_tree.empty()) {
    dump_tree(target, prompt, s.dump_tree);
    return 0;
  }
  kjv::check_tokens_fit(s.tokens, prompt.size(), context, kDeepestTree);
  const auto describe = [](const char* name, const kjv::Config& c) {
    std::printf("%s: %lld layers, width %lld, %lld heads, %lld positions, vocabulary %lld\n", name,
                static_cast<long long>(c.layers), static_cast<long long>(c.width),
                static_cast<long long>(c.heads), static_cast<long long>(c.max_positions),
                static_cast<long long>(c.vocab));
  };
  describe("target", target.config());
  describe("draft ", draft.config());
  std::printf(
      "prompt \"%s\", %lld tokens x %lld sequences per method, temperature %g, seed %llu\n\n",
      escaped(prompt).c_str(), static_cast<long long>(s.tokens), static_cast<long long>(s.repeats),
      static_cast<double>(s.temperature), static_cast<unsigned long long>(s.seed));
  kjv::ModelProvider target_provider(target), draft_provider(draft);
  const specdec::LoopOptions loop{.warp = {.temperature = s.temperature},
                                  .max_new_tokens = static_cast<std::int32_t>(s.tokens),
                                  .seed = s.seed};
  // Plain decoding of the target first: every speed is relative to it.
  std::vector<std::string> methods = {"plain"};
  for (const auto& m : s.methods) {
    if (m != "plain") methods.push_back(m);
  }
  std::printf("%-10s %-26s %12s %12s %10s %9s\n", "method", "shape", "tokens/call", "draft/token",
              "tokens/s", "vs plain");
  double plain_speed = 0.0;
  for (const auto& method : methods) {
    specdec::DecodeMetrics total;
    std::string sample;
    for (std::int64_t r = 0; r < s.repeats; ++r) {
      const auto result = decode(method, target_provider, draft_provider, prompt, loop,
                                 static_cast<std::uint32_t>(r));
      total.merge(result.metrics);
      if (r == 0) sample = escaped(result.tokens);
    }
    const double speed = static_cast<double>(total.tokens_generated) / total.wall_seconds;
    if (method == "plain") plain_speed = speed;
    std::printf(
        "%-10s %-26s %12.3f %12.3f %10.0f %8.2fx\n", method.c_str(), shape_of(method).c_str(),
        total.block_efficiency(),
        static_cast<double>(total.draft_calls) / static_cast<double>(total.tokens_generated), speed,
        speed / plain_speed);
    std::printf("  text: %s\n", sample.c_str());
  }
  print_pass_costs(target, draft, static_cast<std::int64_t>(prompt.size()) + s.tokens / 2);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return kjv::exit_status("kjv_generate", [&] { return run(parse_args(argc, argv)); });
}
