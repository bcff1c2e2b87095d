// SPDX-License-Identifier: MIT
// The options of a decoding run: the built-in methods (DecodeOptions), the other strategies'
// options (the C++ TopKTreeOptions, NGramOptions, ChainLengthOptions, with the library's
// defaults), results and metrics.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <optional>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "decode_providers.hpp"
#include "specdec/decode/any_strategy.hpp"
#include "specdec/decode/decoder.hpp"

namespace specdec::python {

namespace {

/// The strategies' options with the library's defaults (read from default-constructed options,
/// never spelled here).
void bind_strategy_options(py::module_& m) {
  py::enum_<TreeShapePolicy>(m, "TreeShapePolicy", "How TopKTreeOptions shapes each step's tree.")
      .value("FIXED", TreeShapePolicy::kFixed, "the full width-ary tree of depth levels")
      .value("SEQUOIA", TreeShapePolicy::kSequoia,
             "Sequoia's tree of `budget` nodes from the acceptance measured so far")
      .value("EAGLE2", TreeShapePolicy::kEagle2, "EAGLE-2: expand, then rerank to `budget`")
      .value("SPECEXEC", TreeShapePolicy::kSpecExec, "best-first growth to `budget` nodes")
      .value("OPT_TREE", TreeShapePolicy::kOptTree,
             "EAGLE-2's expansion, nodes of path probability >= min_gain")
      .value("SEQUOIA_PLANNED", TreeShapePolicy::kSequoiaPlanned,
             "Sequoia's hardware-aware plan from verify_cost and draft_cost_per_level");
  m.def("parse_tree_shape_policy", &parse_tree_shape_policy, py::arg("name"),
        "The TreeShapePolicy named `name` ('fixed', 'sequoia', 'eagle2', 'specexec', 'opt_tree',\n"
        "'sequoia_planned').");

  const TopKTreeOptions tree{};
  py::class_<TopKTreeOptions>(
      m, "TopKTreeOptions",
      "The top-k tree drafter (C++ TopKTreeStrategy): each node's children are the draft's top\n"
      "`width` tokens, to `depth` levels, in the shape `shape` names; verified against the target\n"
      "alone (lossless). Defaults are the library's.")
      .def(py::init([](TreeShapePolicy shape, std::int32_t width, std::int32_t depth,
                       std::int32_t budget, double min_gain, std::vector<double> verify_cost,
                       double draft_cost_per_level) {
             return TopKTreeOptions{.shape = shape,
                                    .width = width,
                                    .depth = depth,
                                    .budget = budget,
                                    .min_gain = min_gain,
                                    .verify_cost = std::move(verify_cost),
                                    .draft_cost_per_level = draft_cost_per_level};
           }),
           py::kw_only(), py::arg("shape") = tree.shape, py::arg("width") = tree.width,
           py::arg("depth") = tree.depth, py::arg("budget") = tree.budget,
           py::arg("min_gain") = tree.min_gain, py::arg("verify_cost") = tree.verify_cost,
           py::arg("draft_cost_per_level") = tree.draft_cost_per_level)
      SPECDEC_FIELDS(TopKTreeOptions, shape, width, depth, budget, min_gain, verify_cost,
                                      draft_cost_per_level)
      .def("validate", &TopKTreeOptions::validate, py::arg("vocab"),
           "Raises specdec.Error naming the first field that is bad for `vocab`.")
      .def("max_tree_size", &TopKTreeOptions::max_tree_size,
           "The most nodes a step's tree may have under this shape.");

  const NGramOptions ngram{};
  py::class_<NGramOptions>(
      m, "NGramOptions",
      "Prompt lookup (C++ NGramStrategy): the continuation of an earlier occurrence of the last\n"
      "max_ngram tokens (then fewer, down to min_ngram), at most max_draft tokens; no draft\n"
      "model. Defaults are the library's.")
      .def(py::init([](std::int32_t max_ngram, std::int32_t min_ngram, std::int32_t max_draft) {
             return NGramOptions{
                 .max_ngram = max_ngram, .min_ngram = min_ngram, .max_draft = max_draft};
           }),
           py::kw_only(), py::arg("max_ngram") = ngram.max_ngram,
           py::arg("min_ngram") = ngram.min_ngram, py::arg("max_draft") = ngram.max_draft)
      SPECDEC_FIELDS(NGramOptions, max_ngram, min_ngram, max_draft)
      .def("validate", &NGramOptions::validate,
           "Raises specdec.Error naming the first bad field.");

  py::enum_<LengthPolicy>(m, "LengthPolicy", "Which controller sets a chain's length each step.")
      .value("CUMULATIVE", LengthPolicy::kCumulative,
             "stop once 1 - prod(draft probabilities) passes the threshold")
      .value("HEURISTIC", LengthPolicy::kHeuristic, "+2 / -1 per step, confidence stop")
      .value("BATCH_AVERAGE", LengthPolicy::kBatchAverage, "average accepted + headroom")
      .value("GOODPUT", LengthPolicy::kGoodput, "the length maximising tokens per unit of cost");
  m.def("parse_length_policy", &parse_length_policy, py::arg("name"),
        "The LengthPolicy named `name` ('cumulative', 'heuristic', 'batch_average', 'goodput').");

  py::class_<ChainLengthOptions>(
      m, "ChainLengthOptions",
      "Speculative sampling whose chain length a controller sets each step (C++\n"
      "ChainLengthStrategy), as ChainLengthOptions::up_to builds it: chains of at most\n"
      "max_length tokens, every controller's own defaults (its initial length cut to\n"
      "max_length), `draft_cost` the goodput controller's cost of one draft pass (one\n"
      "verification costing 1; None = the library's), `threshold` the cumulative stop's or the\n"
      "heuristic confidence threshold (None = each one's own), `draft_warp` the draft rows' warp.")
      .def(py::init([](LengthPolicy policy, std::int32_t max_length,
                       std::optional<double> draft_cost, std::optional<double> threshold,
                       const Warp& draft_warp) {
             auto o = draft_cost ? ChainLengthOptions::up_to(policy, max_length, *draft_cost)
                                 : ChainLengthOptions::up_to(policy, max_length);
             if (threshold) o.with_threshold(*threshold);
             o.draft_warp = draft_warp;
             return o;
           }),
           py::arg("policy"), py::arg("max_length"), py::kw_only(),
           py::arg("draft_cost") = py::none(), py::arg("threshold") = py::none(),
           py::arg("draft_warp") = Warp{})
      SPECDEC_FIELDS(ChainLengthOptions, policy, draft_warp)
      .def("max_length", &ChainLengthOptions::max_length, "The chosen controller's max_length.");
}

std::string metrics_repr(const DecodeMetrics& m) {
  return fmt::format(
      "DecodeMetrics(sequences={}, tokens_generated={}, target_calls={}, draft_calls={}, "
      "target_tree_tokens={}, block_efficiency={:.4f})",
      m.sequences, m.tokens_generated, m.target_calls, m.draft_calls, m.target_tree_tokens,
      m.block_efficiency());
}

}  // namespace

void bind_decode_options(py::module_& m) {
  py::enum_<Method>(m, "Method", "The built-in decoding methods.")
      .value("AUTOREGRESSIVE", Method::kAutoregressive, "plain sampling from the target")
      .value("SD", Method::kSd, "a chain of depth draft tokens, standard rejection")
      .value("SD_BLOCK", Method::kSdBlock, "a chain, block verification")
      .value("SPECINFER", Method::kSpecInfer, "width i.i.d. chains, multi-round rejection")
      .value("SPECTR", Method::kSpecTr, "width i.i.d. chains, K-SEQ (spectr_gamma, 0 = automatic)")
      .value("RSD_C", Method::kRsdC, "a tree of fixed branching, recursive rejection")
      .value("RSD_S", Method::kRsdS, "stochastic beam search (width, depth), recursive rejection")
      .value("MTAD", Method::kMtad, "beam sampling / search, joint-ratio acceptance (tau)")
      .value("CASCADE", Method::kCascade, "a chain, speculative cascade rule (cascade)")
      .value("LOSSY", Method::kLossy, "a chain, lossy speculative sampling (lossy)");
  m.def("method_name", &method_name, py::arg("method"),
        "The method's name as parse_method reads it ('sd', 'rsd_s', ...).");
  m.def("parse_method", &parse_method, py::arg("name"), "The Method named `name`.");

  const DecodeOptions defaults{};  // the library's defaults
  py::class_<DecodeOptions>(m, "DecodeOptions",
                            "Options of one decoding run (the C++ DecodeOptions; validated by the\n"
                            "decoder against the target's vocabulary).")
      .def(py::init([](Method method, const Warp& warp, std::int32_t depth, std::int32_t width,
                       std::vector<std::int32_t> branching, float tau, bool mtad_beam_search,
                       float spectr_gamma, py::object cascade, py::object lossy,
                       std::int32_t max_new_tokens, Token end_token, std::uint64_t seed) {
             DecodeOptions o;
             o.method = method;
             o.warp = warp;
             o.depth = depth;
             o.width = width;
             o.branching = std::move(branching);
             o.tau = tau;
             o.mtad_beam_search = mtad_beam_search;
             o.spectr_gamma = spectr_gamma;
             if (!cascade.is_none()) o.cascade = cascade.cast<Cascade>();
             if (!lossy.is_none()) o.lossy = lossy.cast<Lossy>();
             o.max_new_tokens = max_new_tokens;
             o.end_token = end_token;
             o.seed = seed;
             return o;
           }),
           py::kw_only(), py::arg("method") = defaults.method, py::arg("warp") = defaults.warp,
           py::arg("depth") = defaults.depth, py::arg("width") = defaults.width,
           py::arg("branching") = defaults.branching, py::arg("tau") = defaults.tau,
           py::arg("mtad_beam_search") = defaults.mtad_beam_search,
           py::arg("spectr_gamma") = defaults.spectr_gamma, py::arg("cascade") = py::none(),
           py::arg("lossy") = py::none(), py::arg("max_new_tokens") = defaults.max_new_tokens,
           py::arg("end_token") = defaults.end_token, py::arg("seed") = defaults.seed,
           "cascade / lossy: a Cascade / Lossy rule (None = its defaults, Cascade() / Lossy()).")
      SPECDEC_FIELDS(DecodeOptions, method, warp, depth, width, branching, tau, mtad_beam_search,
                                    spectr_gamma, cascade, lossy, max_new_tokens, end_token, seed)
      .def("validate", &DecodeOptions::validate, py::arg("vocab"),
           "Raises specdec.Error naming the first field that is bad for `vocab`.")
      .def("__repr__", [](const DecodeOptions& o) {
        return fmt::format(
            "DecodeOptions(method=Method.{}, depth={}, width={}, branching=[{}], tau={}, "
            "mtad_beam_search={}, spectr_gamma={}, max_new_tokens={}, end_token={}, seed={})",
            python_method_name(o.method), o.depth, o.width, fmt::join(o.branching, ", "), o.tau,
            o.mtad_beam_search ? "True" : "False", o.spectr_gamma, o.max_new_tokens, o.end_token,
            o.seed);
      });

  bind_strategy_options(m);

  py::class_<DecodeMetrics>(
      m, "DecodeMetrics",
      "Counters of a run: block efficiency = tokens_generated / target_calls, target budget =\n"
      "tree tokens per target call, acceptance per draft depth.")
      .def(py::init<>())
      .def_readonly("sequences", &DecodeMetrics::sequences)
      .def_readonly("tokens_generated", &DecodeMetrics::tokens_generated)
      .def_readonly("target_calls", &DecodeMetrics::target_calls)
      .def_readonly("draft_calls", &DecodeMetrics::draft_calls)
      .def_readonly("target_tree_tokens", &DecodeMetrics::target_tree_tokens)
      .def_property_readonly("attempted_per_level", copy_of(&DecodeMetrics::attempted_per_level),
          "Steps that attempted depth d + 1 (int64).")
      .def_property_readonly("accepted_per_level", copy_of(&DecodeMetrics::accepted_per_level),
          "Steps whose kept path reached depth d + 1 (int64).")
      .def_readonly("wall_seconds", &DecodeMetrics::wall_seconds)
      .def("block_efficiency", &DecodeMetrics::block_efficiency)
      .def("mean_target_budget", &DecodeMetrics::mean_target_budget)
      .def("mean_draft_calls", &DecodeMetrics::mean_draft_calls)
      .def("mbsu", &DecodeMetrics::mbsu, py::arg("depth"), py::arg("cost_ratio"),
           "Memory-bound speed-up: block_efficiency / (depth * cost_ratio + 1).")
      .def("acceptance_rate", &DecodeMetrics::acceptance_rate, py::arg("depth"))
      .def(
          "acceptance_rates",
          [](const DecodeMetrics& d) {
            const auto rates = d.acceptance_rates();
            return output_from<double>(rates, ArrayKind::numpy);
          },
          "Acceptance rates for depths 1 .. levels() (float64).")
      .def("levels", &DecodeMetrics::levels)
      .def("merge", &DecodeMetrics::merge, py::arg("other"), "Adds another run's counters.")
      .def("__repr__", &metrics_repr);
  m.def("format_metrics_header", &format_metrics_header);
  m.def("format_metrics_row", &format_metrics_row, py::arg("method"), py::arg("metrics"),
        py::arg("depth"), py::arg("cost_ratio"),
        "One row of a results table (method, depth, budget, tokens, calls, eta, MBSU, wall time,\n"
        "acceptance per level).");

  py::class_<DecodeResult>(m, "DecodeResult", "The generated tokens (prompt excluded) and metrics.")
      .def_property_readonly("tokens", copy_of(&DecodeResult::tokens),
          "The generated tokens (int32).")
      .def_readonly("metrics", &DecodeResult::metrics)
      .def("__repr__", [](const DecodeResult& r) {
        return fmt::format("DecodeResult(tokens=[{}], metrics={})", fmt::join(r.tokens, ", "),
                           metrics_repr(r.metrics));
      });
}

}  // namespace specdec::python
