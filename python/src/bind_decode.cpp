// SPDX-License-Identifier: MIT
// decode, decode_batch and Decoder from Python: each builds the library's strategy (AnyStrategy
// over the options: DecodeOptions' method, TopKTreeOptions, NGramOptions or ChainLengthOptions)
// and runs the library's loop with the GIL released; and ReDrafter's decode_redrafter.
//
// The drafter keywords of earlier versions (drafter=, shape=, budget=, ...) still build those
// options, from DecodeOptions' width and depth and the library's defaults; their errors name the
// keywords.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.hpp"
#include "decode_providers.hpp"
#include "specdec/decode/any_strategy.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/redrafter_strategy.hpp"

namespace specdec::python {

namespace {

using P = AnyLogitsProvider;
using AnyDecoder = Decoder<P, AnyStrategy<P>>;

/// The drafter keywords of decode, decode_batch and Decoder (None = not given): the earlier
/// spelling of a strategy's options. options.width is the top-k tree's k, options.depth its
/// depth, the n-gram drafter's most draft tokens and a controlled chain's longest length.
struct DrafterKeywords {
  std::optional<std::string> drafter;  // "topk_tree", "ngram" or None
  std::optional<std::string> shape;
  std::optional<std::int32_t> budget;
  std::optional<double> min_gain;
  std::optional<std::vector<double>> verify_cost;  // sequoia_planned's cost per tree size
  std::optional<std::int32_t> ngram;
  std::optional<std::string> length;  // a length controller's name or None
  std::optional<double> threshold;
  std::optional<double> draft_cost_ratio;

  bool any() const {
    return drafter || shape || budget || min_gain || verify_cost || ngram || length ||
           threshold || draft_cost_ratio;
  }

  /// A drafter or a length controller is named: errors are renamed to the keywords.
  bool renames() const { return drafter.has_value() || length.has_value(); }

  /// The options these keywords name over `options`. Throws specdec::Error naming drafter,
  /// length, shape or verify_cost for a combination that does not exist.
  StrategyOptions strategy(const DecodeOptions& options) const {
    if (drafter && *drafter != "topk_tree" && *drafter != "ngram") {
      throw Error("drafter",
                  fmt::format("'{}' is not a drafter (topk_tree, ngram or None)", *drafter));
    }
    if (length && (drafter || options.method != Method::kSd)) {
      throw Error("length", "sets the chain length of Method.SD only (and no drafter)");
    }
    if (verify_cost && !(drafter == "topk_tree" && shape == "sequoia_planned")) {
      throw Error("verify_cost", "is for drafter='topk_tree', shape='sequoia_planned' only");
    }
    if (drafter == "topk_tree") {
      TopKTreeOptions tree{.width = options.width, .depth = options.depth};
      if (shape) tree.shape = parse_tree_shape_policy(*shape);
      if (budget) tree.budget = *budget;
      if (min_gain) tree.min_gain = *min_gain;
      if (verify_cost) tree.verify_cost = *verify_cost;
      if (draft_cost_ratio) tree.draft_cost_per_level = *draft_cost_ratio;
      return tree;
    }
    if (drafter == "ngram") {
      NGramOptions lookup{.max_draft = options.depth};
      if (ngram) lookup.max_ngram = *ngram;
      return lookup;
    }
    if (length) {
      auto chain = ChainLengthOptions::up_to(parse_length_policy(*length), options.depth);
      if (draft_cost_ratio) chain.goodput.draft_cost = *draft_cost_ratio;
      if (threshold) chain.with_threshold(*threshold);
      chain.draft_warp = options.warp;
      return chain;
    }
    return options;
  }
};

/// The strategy a call names: `strategy` (None = options.method) or the drafter keywords, not
/// both. Throws specdec::Error("strategy") for an object of another type.
StrategyOptions strategy_arg(py::handle strategy, const DecodeOptions& options,
                             const DrafterKeywords& keywords) {
  if (strategy.is_none()) return keywords.strategy(options);
  if (keywords.any()) {
    throw Error("strategy", "is given with drafter keywords: pass one or the other");
  }
  if (py::isinstance<TopKTreeOptions>(strategy)) return strategy.cast<TopKTreeOptions>();
  if (py::isinstance<NGramOptions>(strategy)) return strategy.cast<NGramOptions>();
  if (py::isinstance<ChainLengthOptions>(strategy)) return strategy.cast<ChainLengthOptions>();
  if (py::isinstance<DecodeOptions>(strategy)) return strategy.cast<DecodeOptions>();
  throw Error("strategy",
              fmt::format("is a {}; expected TopKTreeOptions, NGramOptions, ChainLengthOptions, "
                          "DecodeOptions or None",
                          py::repr(py::type::handle_of(strategy)).cast<std::string>()));
}

/// Runs `body`, renaming a strategy option the error names to the keyword the Python caller
/// typed (options.width, options.depth for max_draft / max_length, ...), when `renames`.
template <class F>
auto with_keyword_names(bool renames, F&& body) {
  if (!renames) return body();
  try {
    return body();
  } catch (const Error& e) {
    const std::string& name = e.argument();
    const auto dot = name.find('.');
    const std::string field = dot == std::string::npos ? name : name.substr(dot + 1);
    const bool nested = dot != std::string::npos;
    std::string renamed = name;
    if (name == "width") renamed = "options.width";
    if (name == "depth") renamed = "options.depth";
    if (name == "max_draft" || (nested && (field == "max_length" || field == "initial"))) {
      renamed = "options.depth";
    }
    if (name == "max_ngram") renamed = "ngram";
    if (nested && (field == "threshold" || field == "confidence_threshold")) renamed = "threshold";
    if ((nested && field == "draft_cost") || name == "draft_cost_per_level") {
      renamed = "draft_cost_ratio";
    }
    if (renamed == name) throw;
    throw Error(renamed, e.problem());
  }
}

/// Decoder for Python: the providers (kept alive through their Python objects) and the
/// library's Decoder over them and the strategy the call names.
class PyDecoder {
 public:
  PyDecoder(py::object target, py::object draft, const DecodeOptions& options,
            const StrategyOptions& strategy, bool renames)
      : target_obj_(std::move(target)),
        draft_obj_(std::move(draft)),
        providers_(target_obj_, draft_obj_, strategy, errors_),
        renames_(renames) {
    run_unlocked(errors_, [&] {
      with_keyword_names(renames_, [&] {
        decoder_.emplace(providers_.target, AnyStrategy<P>(providers_.draft_provider(), strategy),
                         options.loop());
      });
    });
  }

  void reset(py::handle prompt, std::uint32_t sequence) {
    const auto tokens = prompt_arg(prompt);
    run_unlocked(errors_, [&] {
      with_keyword_names(renames_, [&] { decoder_->reset(tokens, sequence); });
    });
  }
  py::object step() {
    std::vector<Token> emitted;
    run_unlocked(errors_, [&] {
      const auto span = decoder_->step();
      emitted.assign(span.begin(), span.end());
    });
    return output_from<Token>(emitted, ArrayKind::numpy);
  }
  DecodeResult run() {
    return run_unlocked(errors_, [&] { return decoder_->run(); });
  }
  bool finished() const { return decoder_->finished(); }
  py::object generated() const {
    return output_from<Token>(decoder_->generated(), ArrayKind::numpy);
  }
  const DecodeMetrics& metrics() const { return decoder_->metrics(); }
  std::int64_t vocab_size() const { return decoder_->vocab_size(); }

 private:
  ProviderErrors errors_;
  py::object target_obj_, draft_obj_;
  Providers providers_;
  bool renames_;
  std::optional<AnyDecoder> decoder_;
};

constexpr const char* kStrategyDoc =
    "strategy: the strategy's options, with the library's defaults: None (options.method),\n"
    "TopKTreeOptions (the top-k tree drafter and its shape policies), NGramOptions (prompt\n"
    "lookup; `draft` may be None) or ChainLengthOptions (an SD chain whose length a controller\n"
    "sets). With one of them, only options' warp, max_new_tokens, end_token and seed apply.\n"
    "The drafter keywords of earlier versions build the same options (not with `strategy`):\n"
    "  drafter='topk_tree' -> TopKTreeOptions(width=options.width, depth=options.depth,\n"
    "    shape=parse_tree_shape_policy(shape), budget, min_gain, verify_cost,\n"
    "    draft_cost_per_level=draft_cost_ratio);\n"
    "  drafter='ngram' -> NGramOptions(max_ngram=ngram, max_draft=options.depth);\n"
    "  length=name (Method.SD only) -> ChainLengthOptions(parse_length_policy(name),\n"
    "    options.depth, draft_cost=draft_cost_ratio, threshold=threshold,\n"
    "    draft_warp=options.warp).\n"
    "A keyword left None takes the library's default. Bad values raise specdec.Error naming\n"
    "the keyword (drafter, shape, budget, min_gain, verify_cost, ngram, length, threshold,\n"
    "draft_cost_ratio, options.width, options.depth).";

/// The strategy and drafter keywords, in the order every binding takes them.
#define SPECDEC_STRATEGY_PY_ARGS                                                               \
  py::kw_only(), py::arg("strategy") = py::none(), py::arg("drafter") = py::none(),            \
      py::arg("shape") = py::none(), py::arg("budget") = py::none(),                           \
      py::arg("min_gain") = py::none(), py::arg("verify_cost") = py::none(),                   \
      py::arg("ngram") = py::none(), py::arg("length") = py::none(),                           \
      py::arg("threshold") = py::none(), py::arg("draft_cost_ratio") = py::none()

/// The C++ parameters SPECDEC_STRATEGY_PY_ARGS binds.
#define SPECDEC_STRATEGY_PARAMS                                                                \
  py::handle strategy, std::optional<std::string> drafter, std::optional<std::string> shape,  \
      std::optional<std::int32_t> budget, std::optional<double> min_gain,                      \
      std::optional<std::vector<double>> verify_cost, std::optional<std::int32_t> ngram,       \
      std::optional<std::string> length, std::optional<double> threshold,                      \
      std::optional<double> draft_cost_ratio

#define SPECDEC_STRATEGY_KEYWORDS                                                              \
  DrafterKeywords {                                                                            \
    drafter, shape, budget, min_gain, verify_cost, ngram, length, threshold, draft_cost_ratio  \
  }

void bind_decoding(py::module_& m) {
  m.def(
      "decode",
      [](py::object target, py::object draft, py::handle prompt, const DecodeOptions& options,
         std::uint32_t sequence, SPECDEC_STRATEGY_PARAMS) {
        const DrafterKeywords keywords = SPECDEC_STRATEGY_KEYWORDS;
        const StrategyOptions chosen = strategy_arg(strategy, options, keywords);
        const auto tokens = prompt_arg(prompt);
        ProviderErrors errors;
        Providers providers(target, draft, chosen, errors);
        return run_unlocked(errors, [&] {
          return with_keyword_names(keywords.renames(), [&] {
            return decode(providers.target, AnyStrategy<P>(providers.draft_provider(), chosen),
                          options.loop(), std::span<const Token>(tokens), sequence);
          });
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("prompt"), py::arg("options"),
      py::arg("sequence") = 0, SPECDEC_STRATEGY_PY_ARGS,
      (std::string(
           "Generates from `prompt` with a built-in method or `strategy`. `target` and `draft` "
           "are providers: a\ntoy provider (MarkovProvider, NGramProvider: runs without the GIL) "
           "or any object with the\nLogitsProvider methods (see specdec.LogitsProvider); "
           "`draft` may be None for\nMethod.AUTOREGRESSIVE. The same options.seed and `sequence` "
           "give the same tokens. The GIL\nis released while the loop runs and taken back for "
           "each Python provider call; an\nexception raised by a provider propagates unchanged. "
           "Bad provider rows raise\nspecdec.Error naming target.logits / draft.logits.\n") +
       kStrategyDoc)
          .c_str());

  m.def(
      "decode_batch",
      [](const py::sequence& targets, const py::sequence& drafts, const py::sequence& prompts,
         const DecodeOptions& options, int threads, SPECDEC_STRATEGY_PARAMS) {
        const DrafterKeywords keywords = SPECDEC_STRATEGY_KEYWORDS;
        const StrategyOptions chosen = strategy_arg(strategy, options, keywords);
        if (threads < 0) throw Error("threads", fmt::format("{} must be >= 0 (0 = all)", threads));
        const auto count = prompts.size();
        if (targets.size() != count) {
          throw Error("targets",
                      fmt::format("has {} providers; prompts has {}", targets.size(), count));
        }
        if (drafts.size() != count) {
          throw Error("drafts",
                      fmt::format("has {} providers; prompts has {}", drafts.size(), count));
        }
        ProviderErrors errors;
        std::vector<std::vector<Token>> prompt_list;
        std::vector<Providers> providers;
        prompt_list.reserve(count);
        providers.reserve(count);
        for (std::size_t i = 0; i < count; ++i) {
          try {
            prompt_list.push_back(prompt_arg(prompts[i]));
            if (prompt_list.back().empty()) {
              throw Error("prompt", "is empty: the root of every step is the last committed token");
            }
            providers.emplace_back(targets[i], drafts[i], chosen, errors);
            // Checked here so that a bad token is named by its sequence (decoding names none).
            const Array checked = token_arg(prompts[i], "prompt", 1);
            check_vocab_tokens(checked, "prompt",
                               targets[i].attr("vocab_size")().cast<std::int64_t>());
          } catch (const Error& e) {
            // "prompt[3]" -> "prompts[i][3]": the argument as this function names it.
            const auto& name = e.argument();
            const auto end = std::min(name.find_first_of("[."), name.size());
            throw Error(fmt::format("{}s[{}]{}", name.substr(0, end), i, name.substr(end)),
                        e.problem());
          }
        }
        return run_unlocked(errors, [&] {
          return with_keyword_names(keywords.renames(), [&] {
            return decode_batch(
                [&](std::size_t i) -> P& { return providers[i].target; },
                [&](std::size_t i) { return AnyStrategy<P>(providers[i].draft_provider(), chosen); },
                prompt_list, options.loop(), backend::cpu.with_threads(threads));
          });
        });
      },
      py::arg("targets"), py::arg("drafts"), py::arg("prompts"), py::arg("options"),
      py::arg("threads") = 0, SPECDEC_STRATEGY_PY_ARGS,
      (std::string("Decodes prompts[i] with targets[i] and drafts[i] as sequence i, on the CPU "
                   "thread pool\n(`threads`, 0 = every hardware thread); result i equals "
                   "decode(targets[i], drafts[i],\nprompts[i], options, sequence=i, strategy=...). "
                   "Toy providers run in parallel; Python\nproviders take the GIL for each call. "
                   "Each provider belongs to one sequence.\n") +
       kStrategyDoc)
          .c_str());

  py::class_<PyDecoder>(m, "Decoder",
                        "One sequence's decoding loop, step by step: reset(prompt), then step()\n"
                        "until finished() (or run()). Holds its providers for its lifetime.")
      .def(py::init([](py::object target, py::object draft, const DecodeOptions& options,
                       SPECDEC_STRATEGY_PARAMS) {
             const DrafterKeywords keywords = SPECDEC_STRATEGY_KEYWORDS;
             const StrategyOptions chosen = strategy_arg(strategy, options, keywords);
             return std::make_unique<PyDecoder>(std::move(target), std::move(draft), options,
                                                chosen, keywords.renames());
           }),
           py::arg("target"), py::arg("draft"), py::arg("options"), SPECDEC_STRATEGY_PY_ARGS,
           (std::string("A decoder of options.method, or of `strategy` (as decode's):\n") +
            kStrategyDoc)
               .c_str())
      .def("reset", &PyDecoder::reset, py::arg("prompt"), py::arg("sequence") = 0,
           "Starts sequence `sequence` from `prompt` (resets the providers and the metrics).")
      .def("step", &PyDecoder::step,
           "One draft -> evaluate -> verify -> commit step; returns the tokens it emitted (int32,\n"
           "empty once finished).")
      .def("run", &PyDecoder::run, "Steps until finished; returns the DecodeResult.")
      .def("finished", &PyDecoder::finished)
      .def("generated", &PyDecoder::generated, "The tokens generated since reset (int32).")
      .def("metrics", &PyDecoder::metrics, py::return_value_policy::copy)
      .def("vocab_size", &PyDecoder::vocab_size);
}

#undef SPECDEC_STRATEGY_KEYWORDS
#undef SPECDEC_STRATEGY_PARAMS
#undef SPECDEC_STRATEGY_PY_ARGS

void bind_redrafter_decoding(py::module_& m) {
  py::enum_<ReDrafterVerification>(m, "ReDrafterVerification",
                                   "How a ReDrafter step is drafted and verified.")
      .value("EXACT", ReDrafterVerification::kExact,
             "stochastic beam search + recursive rejection (lossless)")
      .value("GREEDY", ReDrafterVerification::kGreedy, "beam search + greedy matching")
      .value("TYPICAL", ReDrafterVerification::kTypical, "beam search + typical acceptance")
      .value("PARITY", ReDrafterVerification::kParity,
             "the reference's per-beam rule (not lossless)");

  const ReDrafterOptions redrafter{};  // the library's defaults
  py::class_<ReDrafterOptions>(m, "ReDrafterOptions", "Options of decode_redrafter.")
      .def(py::init([](ReDrafterVerification verification, const Warp& warp, std::int32_t width,
                       std::int32_t depth, py::object typical, std::int32_t max_new_tokens,
                       Token end_token, std::uint64_t seed) {
             ReDrafterOptions o;
             o.verification = verification;
             o.warp = warp;
             o.width = width;
             o.depth = depth;
             if (!typical.is_none()) o.typical = typical.cast<Typical>();
             o.max_new_tokens = max_new_tokens;
             o.end_token = end_token;
             o.seed = seed;
             return o;
           }),
           py::kw_only(), py::arg("verification") = redrafter.verification,
           py::arg("warp") = redrafter.warp, py::arg("width") = redrafter.width,
           py::arg("depth") = redrafter.depth, py::arg("typical") = py::none(),
           py::arg("max_new_tokens") = redrafter.max_new_tokens,
           py::arg("end_token") = redrafter.end_token, py::arg("seed") = redrafter.seed,
           "typical: a Typical rule for ReDrafterVerification.TYPICAL (None = Typical()).")
      SPECDEC_FIELDS(ReDrafterOptions, verification, warp, width, depth, typical, max_new_tokens,
                                       end_token, seed)
      .def("validate", &ReDrafterOptions::validate, py::arg("vocab"));

  m.def(
      "decode_redrafter",
      [](py::object target, const ReDrafterHead& head, py::handle prompt,
         const ReDrafterOptions& options, std::uint32_t sequence) {
        const auto tokens = prompt_arg(prompt);
        ProviderErrors errors;
        AnyLogitsProvider provider = provider_arg(target, "target", errors);
        return run_unlocked(errors, [&] {
          return decode_redrafter(provider, head, std::span<const Token>(tokens), options,
                                  sequence);
        });
      },
      py::arg("target"), py::arg("head"), py::arg("prompt"), py::arg("options"),
      py::arg("sequence") = 0,
      "Generates from `prompt` with ReDrafter: the head drafts from the target's hidden states,\n"
      "so `target` needs hidden_size() and evaluate_with_hidden(batch, logits, hidden) (a toy\n"
      "provider with ProviderOptions(hidden_size=...), or a Python provider).");
}

}  // namespace

void bind_decode(py::module_& m) {
  bind_parts(m, {bind_tree_batch, bind_decode_options, bind_toys,
                 bind_decoding, bind_redrafter_decoding});
}

}  // namespace specdec::python
