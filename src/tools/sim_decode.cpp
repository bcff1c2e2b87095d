// SPDX-License-Identifier: MIT
// specdec-sim decode: decode many independent sequences with any method on toy models (explicit
// Markov tables or seeded n-gram models) and report the metrics and, optionally, a histogram of
// the generated sequences. Besides the built-in methods and ReDrafter: the top-k tree drafter
// and its shape policies, prompt lookup (n-gram), and SD chains whose length a controller sets.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim_common.hpp"
#include "specdec/backend/cpu/thread_pool.hpp"
#include "specdec/decode/chain_length_strategy.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/ngram_strategy.hpp"
#include "specdec/decode/redrafter_strategy.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "specdec/toy/markov_head.hpp"
#include "specdec/toy/providers.hpp"

namespace specdec::sim {
namespace {

constexpr std::int64_t kMaxRuns = 10000000;
constexpr std::int64_t kMaxNewTokens = 1000000;

/// A V x V transition table at `json` (named `field` in errors).
toy::MarkovModel parse_table(const Json& json, const std::string& field) {
  const auto name = field + ".transition";
  if (!json.is_object()) throw UsageError(field, "must be an object with a \"transition\" table");
  for (const auto& [key, value] : json.items()) {
    if (key != "transition") throw UsageError(field + "." + key, "unknown field");
  }
  const Json* rows = find(json, "transition");
  if (!rows) throw UsageError(name, "is required");
  if (!rows->is_array() || rows->empty()) {
    throw UsageError(name, "must be a non-empty array of rows (row v = next-token distribution)");
  }
  const auto vocab = rows->size();
  std::vector<float> flat;
  flat.reserve(vocab * vocab);
  for (std::size_t v = 0; v < vocab; ++v) {
    const auto row_name = fmt::format("{}[{}]", name, v);
    const Json& row = (*rows)[v];
    if (!row.is_array()) throw UsageError(row_name, "must be an array of numbers");
    check_length(row_name, row.size(), vocab);
    std::vector<float> values;
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (!row[i].is_number()) {
        throw UsageError(fmt::format("{}[{}]", row_name, i), "must be a number");
      }
      values.push_back(row[i].get<float>());
    }
    check_probability_row(row_name, std::span<const float>(values));
    flat.insert(flat.end(), values.begin(), values.end());
  }
  return toy::MarkovModel(static_cast<std::int64_t>(vocab), std::move(flat));
}

/// The pair of toy models a request describes.
struct Models {
  std::optional<toy::MarkovModel> markov_target, markov_draft;
  std::optional<toy::NGramModel> ngram_target, ngram_draft;
};

Models parse_model(const Json& request, bool needs_draft) {
  const Json* model = find(request, "model");
  if (!model) throw UsageError("model", "is required");
  if (!model->is_object()) throw UsageError("model", "must be an object with a \"kind\"");
  const Json* kind_json = find(*model, "kind");
  if (!kind_json || !kind_json->is_string()) {
    throw UsageError("model.kind", "is required: \"markov_table\" or \"ngram\"");
  }
  const std::string kind = kind_json->get<std::string>();
  Models models;
  if (kind == "markov_table") {
    for (const auto& [key, value] : model->items()) {
      if (key != "kind" && key != "target" && key != "draft") {
        throw UsageError("model." + key, "unknown field");
      }
    }
    const Json* target = find(*model, "target");
    if (!target) throw UsageError("model.target", "is required");
    models.markov_target = parse_table(*target, "model.target");
    const Json* draft = find(*model, "draft");
    if (!draft && needs_draft) throw UsageError("model.draft", "is required");
    models.markov_draft = draft ? parse_table(*draft, "model.draft") : *models.markov_target;
    if (models.markov_draft->vocab_size() != models.markov_target->vocab_size()) {
      throw UsageError("model.draft", fmt::format("has {} tokens, the target has {}",
                                                  models.markov_draft->vocab_size(),
                                                  models.markov_target->vocab_size()));
    }
    return models;
  }
  if (kind == "ngram") {
    static const std::set<std::string> known = {
        "kind", "vocab", "order", "seed", "concentration", "draft_noise", "draft_temperature"};
    for (const auto& [key, value] : model->items()) {
      if (!known.count(key)) throw UsageError("model." + key, "unknown field");
      const bool integer = key == "vocab" || key == "order" || key == "seed";
      if (key != "kind" && !(integer ? value.is_number_integer() : value.is_number())) {
        throw UsageError("model." + key, integer ? "must be an integer" : "must be a number");
      }
    }
    toy::NGramModel::Config config;
    const auto vocab = get_integer(*model, "vocab", config.vocab);
    if (vocab < 1 || vocab > 1000000) {
      throw UsageError("model.vocab", fmt::format("{} is outside [1, 10^6]", vocab));
    }
    config.vocab = vocab;
    const auto order = get_integer(*model, "order", config.order);
    if (order < 1 || order > 64) {
      throw UsageError("model.order", fmt::format("{} is outside [1, 64]", order));
    }
    config.order = static_cast<int>(order);
    const auto seed = get_integer(*model, "seed", 1);
    if (seed < 0) throw UsageError("model.seed", fmt::format("{} must be >= 0", seed));
    config.seed = static_cast<std::uint64_t>(seed);
    config.concentration = get_number(*model, "concentration", config.concentration);
    // Below 0.05 every Gamma draw of a row can underflow to 0 (a row of NaN); above 10^6 the rows
    // are uniform to float precision anyway.
    if (!(config.concentration >= 0.05 && config.concentration <= 1e6)) {
      throw UsageError("model.concentration",
                       fmt::format("{} is outside [0.05, 10^6]", config.concentration));
    }
    const double noise = get_number(*model, "draft_noise", 0.3);
    if (!(noise >= 0.0 && noise <= 1.0)) {
      throw UsageError("model.draft_noise", fmt::format("{} is outside [0, 1]", noise));
    }
    const double temperature = get_number(*model, "draft_temperature", 1.0);
    if (!(temperature > 0.0) || !std::isfinite(temperature)) {
      throw UsageError("model.draft_temperature",
                       fmt::format("{} must be finite and > 0", temperature));
    }
    models.ngram_target.emplace(config);
    models.ngram_draft.emplace(toy::NGramModel::draft_of(
        *models.ngram_target, static_cast<float>(noise), static_cast<float>(temperature)));
    return models;
  }
  throw UsageError("model.kind", "unknown kind '" + kind + "' (expected markov_table or ngram)");
}

DecodeOptions parse_options(const Json& request, Method method) {
  DecodeOptions o;
  o.method = method;
  o.warp.temperature = get_temperature(request);
  o.warp.top_k = static_cast<std::int32_t>(get_integer_in(request, "top_k", 0, 0, INT32_MAX));
  o.warp.top_p = static_cast<float>(get_number(request, "top_p", 1.0));
  const auto depth = get_integer(request, "depth", 4);
  const auto width = get_integer(request, "width", 2);
  if (depth < 1 || depth > 4096)
    throw UsageError("depth", fmt::format("{} is outside [1, 4096]", depth));
  if (width < 1 || width > 4096)
    throw UsageError("width", fmt::format("{} is outside [1, 4096]", width));
  o.depth = static_cast<std::int32_t>(depth);
  o.width = static_cast<std::int32_t>(width);
  if (const Json* b = find(request, "branching")) {
    if (!b->is_array()) throw UsageError("branching", "must be an array of integers");
    for (std::size_t l = 0; l < b->size(); ++l) {
      const Json& f = (*b)[l];
      if (!f.is_number_integer() || f.get<std::int64_t>() < 1 || f.get<std::int64_t>() > 1 << 20) {
        throw UsageError(fmt::format("branching[{}]", l), "must be an integer >= 1");
      }
      o.branching.push_back(static_cast<std::int32_t>(f.get<std::int64_t>()));
    }
  } else if (method == Method::kRsdC) {
    throw UsageError("branching", "is required for rsd_c");
  }
  o.tau = static_cast<float>(get_number(request, "tau", 0.5));
  o.mtad_beam_search = get_bool(request, "beam_search", false);
  o.spectr_gamma = static_cast<float>(get_number(request, "gamma", 0.0));
  const float alpha = static_cast<float>(get_number(request, "alpha", 0.0));
  if (method == Method::kCascade) {
    o.cascade = Cascade{parse_deferral(get_string(request, "rule", "chow")), alpha};
  }
  o.lossy.alpha = method == Method::kLossy ? alpha : 0.0f;
  o.lossy.beta = static_cast<float>(get_number(request, "beta", 1.0));
  o.lossy.greedy = method == Method::kLossy && o.warp.temperature == 0.0f;  // as in verify
  const auto max_new = get_integer(request, "max_new_tokens", 32);
  if (max_new < 0 || max_new > kMaxNewTokens) {
    throw UsageError("max_new_tokens",
                     fmt::format("{} is outside [0, {}]", max_new, kMaxNewTokens));
  }
  o.max_new_tokens = static_cast<std::int32_t>(max_new);
  const auto end = get_integer(request, "end_token", kNoToken);
  if (end < kNoToken || end > (std::int64_t{1} << 31) - 1) {
    throw UsageError("end_token", fmt::format("{} is not a token (-1 = none)", end));
  }
  o.end_token = static_cast<Token>(end);
  const auto seed = get_integer(request, "seed", 0);
  if (seed < 0) throw UsageError("seed", fmt::format("{} must be >= 0", seed));
  o.seed = static_cast<std::uint64_t>(seed);
  return o;
}

std::vector<Token> parse_prompt(const Json& request) {
  const Json* p = find(request, "prompt");
  if (!p) throw UsageError("prompt", "is required");
  if (!p->is_array()) throw UsageError("prompt", "must be an array of tokens");
  std::vector<Token> prompt;
  for (std::size_t i = 0; i < p->size(); ++i) {
    const Json& t = (*p)[i];
    if (!t.is_number_integer() || t.get<std::int64_t>() < 0 ||
        t.get<std::int64_t>() > (std::int64_t{1} << 31) - 1) {
      throw UsageError(fmt::format("prompt[{}]", i), "must be a token (an integer >= 0)");
    }
    prompt.push_back(static_cast<Token>(t.get<std::int64_t>()));
  }
  return prompt;
}

/// Per-thread results, merged in a fixed order (sums and counts: independent of the threads).
struct Partial {
  DecodeMetrics metrics;
  std::map<std::string, std::int64_t> histogram;
};

/// Runs every sequence with a Decoder over the target model and the strategy that
/// `make_strategy(draft provider)` builds (one per thread; each strategy starts afresh at every
/// sequence, so the results do not depend on the thread count).
template <class Model, class MakeStrategy>
void run_all(const Model& target_model, const Model& draft_model, const std::vector<Token>& prompt,
             const LoopOptions& loop, const MakeStrategy& make_strategy, std::int64_t runs,
             bool histogram, int threads, const Limits& limits, std::vector<Partial>& partials) {
  using Provider = toy::ModelProvider<Model>;
  using Strategy = decltype(make_strategy(std::declval<Provider&>()));
  using RunDecoder = Decoder<Provider, Strategy>;
  auto& pool = backend::default_thread_pool();
  const int n = pool.resolve(runs, threads);
  partials.assign(static_cast<std::size_t>(n), Partial{});
  // Validate once on this thread (a bad request fails with its field name before any work).
  {
    Provider target(target_model), draft(draft_model);
    RunDecoder decoder(target, make_strategy(draft), loop);
    decoder.reset(prompt, 0);
  }
  if (limits.validate_only) return;
  Progress progress("decode", "tokens", runs * loop.max_new_tokens, limits.progress_seconds);
  std::vector<std::optional<Provider>> targets(static_cast<std::size_t>(n)),
      drafts(static_cast<std::size_t>(n));
  std::vector<std::optional<RunDecoder>> decoders(static_cast<std::size_t>(n));
  pool.run(runs, threads, [&](std::int64_t task, int slot) {
    const auto s = static_cast<std::size_t>(slot);
    if (!decoders[s]) {
      targets[s].emplace(target_model);
      drafts[s].emplace(draft_model);
      decoders[s].emplace(*targets[s], make_strategy(*drafts[s]), loop);
    }
    auto& decoder = *decoders[s];
    decoder.reset(prompt, static_cast<std::uint32_t>(task));
    std::int64_t reported = 0;
    while (!decoder.finished()) {
      decoder.step();
      const auto generated = static_cast<std::int64_t>(decoder.generated().size());
      progress.advance(generated - reported);
      reported = generated;
    }
    progress.advance(loop.max_new_tokens - reported);  // a run that stopped at end_token
    partials[s].metrics.merge(decoder.metrics());
    if (histogram) {
      std::string key;
      for (auto t : decoder.generated())
        key.append(key.empty() ? "" : " ").append(std::to_string(t));
      ++partials[s].histogram[key];
    }
  });
}

ReDrafterVerification parse_verification(const std::string& name) {
  if (name == "exact") return ReDrafterVerification::kExact;
  if (name == "greedy") return ReDrafterVerification::kGreedy;
  if (name == "typical") return ReDrafterVerification::kTypical;
  if (name == "parity") return ReDrafterVerification::kParity;
  throw UsageError("verification",
                   "unknown mode '" + name + "' (expected exact, greedy, typical or parity)");
}

/// ReDrafter on a Markov table: the target exposes its probabilities as the hidden state and the
/// head is toy::markov_head of the draft table, so the draft rows are exactly that table.
void run_redrafter(const toy::MarkovModel& target_model, const toy::MarkovModel& draft_model,
                   const std::vector<Token>& prompt, const ReDrafterOptions& options,
                   std::int64_t runs, bool histogram, int threads, const Limits& limits,
                   std::vector<Partial>& partials) {
  const auto head = toy::markov_head(draft_model, target_model.vocab_size());
  const auto make_provider = [&] {
    return toy::MarkovProvider(target_model, {.hidden_size = 0, .hidden_probabilities = true});
  };
  auto& pool = backend::default_thread_pool();
  const int n = pool.resolve(runs, threads);
  partials.assign(static_cast<std::size_t>(n), Partial{});
  {
    auto provider = make_provider();  // a bad request fails here, before any parallel work
    ReDrafterOptions check = options;
    check.max_new_tokens = 0;
    decode_redrafter(provider, head, prompt, check, 0);
  }
  if (limits.validate_only) return;
  Progress progress("decode", "tokens", runs * options.max_new_tokens, limits.progress_seconds);
  std::vector<std::optional<toy::MarkovProvider>> providers(static_cast<std::size_t>(n));
  pool.run(runs, threads, [&](std::int64_t task, int slot) {
    const auto s = static_cast<std::size_t>(slot);
    if (!providers[s]) providers[s].emplace(make_provider());
    const auto result =
        decode_redrafter(*providers[s], head, prompt, options, static_cast<std::uint32_t>(task));
    partials[s].metrics.merge(result.metrics);
    progress.advance(options.max_new_tokens);
    if (histogram) {
      std::string key;
      for (auto t : result.tokens) key.append(key.empty() ? "" : " ").append(std::to_string(t));
      ++partials[s].histogram[key];
    }
  });
}

/// The drafter a request names besides the built-in methods.
enum class Drafter { kMethod, kReDrafter, kTopKTree, kNGram };

/// Draft-tree nodes of one step: what the rows of a step scale with.
double tree_nodes(Drafter drafter, const DecodeOptions& o, const TopKTreeOptions& topk) {
  const double depth = o.depth, width = o.width;
  if (drafter == Drafter::kReDrafter) return width * depth;
  if (drafter == Drafter::kTopKTree) {
    return static_cast<double>(topk.max_tree_size());
  }
  switch (o.method) {
    case Method::kAutoregressive:
      return 0.0;
    case Method::kRsdC: {
      double level = 1.0, nodes = 0.0;
      for (auto b : o.branching) nodes += (level *= b);
      return nodes;
    }
    case Method::kSpecInfer:
    case Method::kSpecTr:
    case Method::kRsdS:
    case Method::kMtad:
      return width * depth;
    default:
      return depth;
  }
}

/// Rejects a request whose estimated memory passes --max-memory, before anything is allocated.
/// The model (docs/decoding.md): per thread, 8 rows of V floats per tree node and for the root
/// (target and draft rows, raw and warped, and the drafter's scratch) plus 16 bytes per context
/// token; a histogram adds 12 bytes per generated token of every run.
void check_memory(Drafter drafter, const DecodeOptions& o, const TopKTreeOptions& topk,
                  std::int64_t vocab, std::int64_t prompt_length, std::int64_t runs,
                  bool histogram, int workers, const Limits& limits) {
  const double nodes = tree_nodes(drafter, o, topk);
  const double rows_bytes = 8.0 * (nodes + 1.0) * static_cast<double>(vocab) * sizeof(float);
  const double context_bytes =
      16.0 * (static_cast<double>(prompt_length) + o.max_new_tokens + nodes + 1.0);
  const double per_thread = rows_bytes + context_bytes;
  const double histogram_bytes =
      histogram ? 12.0 * static_cast<double>(runs) * (o.max_new_tokens + 1.0) : 0.0;
  const double total = per_thread * workers + histogram_bytes;
  if (total <= static_cast<double>(limits.max_memory)) return;
  // A planned tree's size comes from verify_cost when the request gives one.
  const bool sized_by_costs = drafter == Drafter::kTopKTree &&
                              topk.shape == TreeShapePolicy::kSequoiaPlanned &&
                              !topk.verify_cost.empty();
  const char* field = histogram_bytes > per_thread * workers ? "histogram"
                      : sized_by_costs                       ? "verify_cost"
                      : drafter == Drafter::kTopKTree && topk.shape != TreeShapePolicy::kFixed
                          ? "budget"
                      : o.method == Method::kRsdC && drafter == Drafter::kMethod ? "branching"
                      : nodes > o.depth                                            ? "width"
                                                                                   : "depth";
  throw UsageError(field, fmt::format("the request needs about {:.3g} bytes ({:.0f} tree nodes x "
                                      "{} tokens per thread, {} threads), above the budget of {} "
                                      "bytes (--max-memory)",
                                      total, nodes, vocab, workers, limits.max_memory));
}

/// An optional array of numbers (empty when absent).
std::vector<double> get_numbers(const Json& request, const char* field) {
  const Json* v = find(request, field);
  if (!v) return {};
  if (!v->is_array() || v->empty()) throw UsageError(field, "must be a non-empty array of numbers");
  std::vector<double> out;
  out.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number()) throw UsageError(fmt::format("{}[{}]", field, i), "must be a number");
    out.push_back((*v)[i].get<double>());
  }
  return out;
}

/// The top-k tree drafter's options: "width" is k, "depth" the deepest level, "shape", "budget"
/// and "min_gain" the shape policy's; sequoia_planned's "verify_cost" (per tree size) and
/// "draft_cost_ratio" (per draft level). Errors name the request's fields.
TopKTreeOptions parse_topk_tree(const Json& request, const DecodeOptions& o, std::int64_t vocab,
                                double cost_ratio) {
  TopKTreeOptions topk;
  topk.shape = parse_tree_shape_policy(get_string(request, "shape", "fixed"));
  const auto widest = std::min<std::int64_t>(vocab, 64);
  if (o.width > widest) {
    throw UsageError("width", fmt::format("{} children per node is outside [1, {}]", o.width,
                                          widest));
  }
  if (o.depth > 64) throw UsageError("depth", fmt::format("{} is outside [1, 64]", o.depth));
  topk.width = o.width;
  topk.depth = o.depth;
  const auto budget = get_integer(request, "budget", topk.budget);
  if (budget < 0 || budget > 1024) {
    throw UsageError("budget", fmt::format("{} is outside [0, 1024]", budget));
  }
  topk.budget = static_cast<std::int32_t>(budget);
  topk.min_gain = get_number(request, "min_gain", topk.min_gain);
  topk.verify_cost = get_numbers(request, "verify_cost");
  if (find(request, "verify_cost") && topk.shape != TreeShapePolicy::kSequoiaPlanned) {
    throw UsageError("verify_cost", "is for \"shape\": \"sequoia_planned\" only");
  }
  topk.draft_cost_per_level = cost_ratio;
  try {
    topk.validate(vocab);
  } catch (const Error& e) {
    // The strategy's field names as the request spells them.
    if (e.argument() != "draft_cost_per_level") throw;
    throw UsageError("draft_cost_ratio", e.problem());
  }
  return topk;
}

/// Prompt lookup's options: "ngram" is the longest suffix matched, "depth" the most tokens drafted.
NGramOptions parse_ngram(const Json& request, const DecodeOptions& o) {
  NGramOptions ngram;
  const auto n = get_integer(request, "ngram", ngram.max_ngram);
  if (n < 1 || n > 1024) throw UsageError("ngram", fmt::format("{} is outside [1, 1024]", n));
  ngram.max_ngram = static_cast<std::int32_t>(n);
  ngram.max_draft = o.depth;
  return ngram;
}

/// An SD chain whose length the controller named by "length" sets: "depth" is the longest chain,
/// "threshold" the cumulative stop's threshold or the heuristic's confidence threshold,
/// "draft_cost_ratio" the goodput controller's draft cost (one verification costing 1).
ChainLengthOptions parse_chain_length(const Json& request, const DecodeOptions& o,
                                      double cost_ratio) {
  auto chain = ChainLengthOptions::up_to(parse_length_policy(get_string(request, "length", "")),
                                         o.depth, cost_ratio);
  chain.draft_warp = o.warp;
  if (find(request, "threshold")) {
    const double threshold = get_number(request, "threshold", 0.0);
    if (!(threshold >= 0.0 && threshold <= 1.0)) {
      throw UsageError("threshold", fmt::format("{} is outside [0, 1]", threshold));
    }
    chain.with_threshold(threshold);
  }
  return chain;
}

}  // namespace

Json run_decode(const Json& request, const Limits& limits) {
  check_known_fields(request, {"method",
                               "model",
                               "prompt",
                               "max_new_tokens",
                               "runs",
                               "seed",
                               "depth",
                               "width",
                               "branching",
                               "alpha",
                               "beta",
                               "tau",
                               "beam_search",
                               "gamma",
                               "rule",
                               "temperature",
                               "top_k",
                               "top_p",
                               "draft_cost_ratio",
                               "histogram",
                               "end_token",
                               "threads",
                               "verification",
                               "epsilon",
                               "delta",
                               "shape",
                               "budget",
                               "min_gain",
                               "ngram",
                               "length",
                               "threshold",
                               "verify_cost"});
  const std::string method_text = require_string(request, "method");
  const Drafter drafter = method_text == "redrafter"   ? Drafter::kReDrafter
                          : method_text == "topk_tree" ? Drafter::kTopKTree
                          : method_text == "ngram"     ? Drafter::kNGram
                                                       : Drafter::kMethod;
  const bool redrafter = drafter == Drafter::kReDrafter;
  // The other drafters share the warp, depth, width, length and seed fields with the chain
  // methods.
  const Method method = drafter == Drafter::kMethod ? parse_method(method_text) : Method::kSd;
  const auto prompt = parse_prompt(request);
  const DecodeOptions options = parse_options(request, method);
  const Models models = parse_model(request, uses_draft(method) && drafter != Drafter::kNGram);
  const std::int64_t vocab =
      models.markov_target ? models.markov_target->vocab_size() : models.ngram_target->vocab_size();
  const double cost_ratio = get_number(request, "draft_cost_ratio", 0.0);
  if (!(cost_ratio >= 0.0) || !std::isfinite(cost_ratio)) {
    throw UsageError("draft_cost_ratio", fmt::format("{} must be finite and >= 0", cost_ratio));
  }
  const TopKTreeOptions topk = drafter == Drafter::kTopKTree
                                   ? parse_topk_tree(request, options, vocab, cost_ratio)
                                   : TopKTreeOptions{};
  const NGramOptions ngram = drafter == Drafter::kNGram ? parse_ngram(request, options)
                                                        : NGramOptions{};
  const bool controlled = find(request, "length") != nullptr;
  if (controlled && !(drafter == Drafter::kMethod && method == Method::kSd)) {
    throw UsageError("length", "sets the chain length of method sd only");
  }
  ReDrafterOptions redrafter_options;
  if (redrafter) {
    if (!models.markov_target) {
      throw UsageError("model.kind",
                       "redrafter runs on \"markov_table\" models (the draft table "
                       "becomes the drafter head)");
    }
    redrafter_options.verification =
        parse_verification(get_string(request, "verification", "exact"));
    redrafter_options.warp = options.warp;
    redrafter_options.width = options.width;
    redrafter_options.depth = options.depth;
    redrafter_options.typical.epsilon =
        static_cast<float>(get_number(request, "epsilon", redrafter_options.typical.epsilon));
    redrafter_options.typical.delta =
        static_cast<float>(get_number(request, "delta", redrafter_options.typical.delta));
    redrafter_options.max_new_tokens = options.max_new_tokens;
    redrafter_options.end_token = options.end_token;
    redrafter_options.seed = options.seed;
  }
  const auto runs = get_integer(request, "runs", 1);
  if (runs < 1 || runs > kMaxRuns) {
    throw UsageError("runs", fmt::format("{} is outside [1, {}]", runs, kMaxRuns));
  }
  const ChainLengthOptions chain =
      controlled ? parse_chain_length(request, options, cost_ratio) : ChainLengthOptions{};
  const bool histogram = get_bool(request, "histogram", false);
  const auto threads = get_integer(request, "threads", 0);
  if (threads < 0 || threads > 1024) {
    throw UsageError("threads", fmt::format("{} is outside [0, 1024] (0 = all)", threads));
  }

  const int workers = backend::default_thread_pool().resolve(runs, static_cast<int>(threads));
  check_memory(drafter, options, topk, vocab, static_cast<std::int64_t>(prompt.size()), runs,
               histogram, workers, limits);

  const auto start = std::chrono::steady_clock::now();
  std::vector<Partial> partials;
  if (redrafter) {
    run_redrafter(*models.markov_target, *models.markov_draft, prompt, redrafter_options, runs,
                  histogram, static_cast<int>(threads), limits, partials);
  } else {
    const auto run = [&](const auto& target_model, const auto& draft_model) {
      const auto go = [&](const auto& make_strategy) {
        run_all(target_model, draft_model, prompt, options.loop(), make_strategy, runs, histogram,
                static_cast<int>(threads), limits, partials);
      };
      if (drafter == Drafter::kTopKTree) {
        go([&](auto& draft) { return TopKTreeStrategy(draft, topk); });
      } else if (drafter == Drafter::kNGram) {
        go([&](auto& /*draft*/) { return NGramStrategy(ngram); });
      } else if (controlled) {
        go([&](auto& draft) { return ChainLengthStrategy(draft, chain); });
      } else {
        go([&](auto& draft) {
          return MethodStrategy<std::remove_reference_t<decltype(draft)>>(draft, options);
        });
      }
    };
    if (models.markov_target) {
      run(*models.markov_target, *models.markov_draft);
    } else {
      run(*models.ngram_target, *models.ngram_draft);
    }
  }
  if (limits.validate_only) return {};
  DecodeMetrics metrics;
  std::map<std::string, std::int64_t> counts;
  for (const auto& p : partials) {
    metrics.merge(p.metrics);
    for (const auto& [key, count] : p.histogram) counts[key] += count;
  }
  metrics.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Json response;
  response["method"] = method_text;
  if (drafter == Drafter::kTopKTree) response["shape"] = std::string(tree_shape_policy_name(topk.shape));
  if (controlled) response["length"] = std::string(length_policy_name(chain.policy));
  response["runs"] = runs;
  response["tokens"] = metrics.tokens_generated;
  response["target_calls"] = metrics.target_calls;
  response["draft_calls"] = metrics.draft_calls;
  response["block_efficiency"] = metrics.block_efficiency();
  response["mbsu"] = metrics.mbsu(metrics.mean_draft_calls(), cost_ratio);
  response["mean_target_budget"] = metrics.mean_target_budget();
  response["accept_per_level"] = metrics.acceptance_rates();
  response["wall_seconds"] = metrics.wall_seconds;
  if (histogram) {
    Json h = Json::object();
    for (const auto& [key, count] : counts) h[key] = count;
    response["histogram"] = h;
  }
  return response;
}

}  // namespace specdec::sim
