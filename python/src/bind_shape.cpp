// SPDX-License-Identifier: MIT
// Tree shapes and draft lengths from measured acceptance: Sequoia's trees and plan, EAGLE-2's
// rerank, best-first growth, the acceptance estimator and the draft-length controllers.
// Probability vectors are read as float32 arrays (lists work) and computed on in double.
#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <limits>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/decode/length_control.hpp"
#include "specdec/tree/tree.hpp"

namespace specdec::python {

namespace {

/// A 1-D float argument as doubles.
std::vector<double> doubles_arg(py::handle obj, std::string_view name) {
  const Array array = values_f32_arg(obj, name, 1);
  const auto values = array.span<float>(name);
  return {values.begin(), values.end()};
}

/// A 1-D int32 argument, copied.
std::vector<std::int32_t> ints_arg(py::handle obj, std::string_view name) {
  const Array array = int32_arg(obj, name, 1);
  const auto values = array.span<std::int32_t>(name);
  return {values.begin(), values.end()};
}

py::object ints_out(std::span<const std::int32_t> values) {
  return output_from<std::int32_t>(values, ArrayKind::numpy);
}

/// Counts as an int64 array [K, 2]: offered, accepted.
py::object counts_out(std::span<const AcceptanceCount> counts) {
  Output<std::int64_t> out({static_cast<std::int64_t>(counts.size()), 2}, ArrayKind::numpy);
  auto values = out.values();
  for (std::size_t k = 0; k < counts.size(); ++k) {
    values[2 * k] = counts[k].offered;
    values[2 * k + 1] = counts[k].accepted;
  }
  return out.result();
}

void bind_sequoia(py::module_& m) {
  py::class_<TreeShape>(m, "TreeShape",
                        "A tree without tokens in level order: parents[i] (-1 = the root) and\n"
                        "ranks[i] (0 = its parent's first child), and its expected accepted count.")
      .def_property_readonly(
          "parents", [](const TreeShape& s) { return ints_out(s.parents); },
          "The parents (int32; -1 for children of the root).")
      .def_property_readonly(
          "ranks", [](const TreeShape& s) { return ints_out(s.ranks); },
          "Each node's place among its parent's children (int32, 0 first).")
      .def_readonly("expected_accepted", &TreeShape::expected_accepted,
                    "Sum over nodes of the product of acceptance_by_rank[rank] along the root\n"
                    "path: the expected accepted drafted tokens (the bonus not counted).")
      .def("size", &TreeShape::size)
      .def("__len__", &TreeShape::size)
      .def("__repr__", [](const TreeShape& s) {
        return fmt::format("TreeShape(parents=[{}], ranks=[{}], expected_accepted={})",
                           fmt::join(s.parents, ", "), fmt::join(s.ranks, ", "),
                           s.expected_accepted);
      });
  m.def(
      "sequoia_tree",
      [](py::handle acceptance_by_rank, std::int32_t budget, std::int32_t max_depth) {
        const auto p = doubles_arg(acceptance_by_rank, "acceptance_by_rank");
        py::gil_scoped_release unlocked;
        return sequoia_tree(p, budget, max_depth);
      },
      py::arg("acceptance_by_rank"), py::arg("budget"), py::arg("max_depth"),
      "Sequoia's tree: of the trees with at most `budget` nodes and `max_depth` levels, the one\n"
      "maximising the expected accepted count when a node's r-th child is accepted with\n"
      "probability acceptance_by_rank[r] given its parent was.");
  m.def(
      "expected_accepted",
      [](py::handle acceptance_by_rank, py::handle parents) {
        return expected_accepted(doubles_arg(acceptance_by_rank, "acceptance_by_rank"),
                                 ints_arg(parents, "parents"));
      },
      py::arg("acceptance_by_rank"), py::arg("parents"),
      "The expected accepted count of any tree given by its parents (ranks by id order).");
  py::class_<SequoiaPlan>(m, "SequoiaPlan",
                          "The fastest Sequoia tree: its shape, budget, depth and time per token.")
      .def_readonly("shape", &SequoiaPlan::shape)
      .def_readonly("budget", &SequoiaPlan::budget)
      .def_readonly("depth", &SequoiaPlan::depth)
      .def_readonly("time_per_token", &SequoiaPlan::time_per_token);
  m.def(
      "sequoia_plan",
      [](py::handle acceptance_by_rank, py::handle verify_cost, double draft_cost_per_level,
         std::int32_t max_depth) {
        const auto p = doubles_arg(acceptance_by_rank, "acceptance_by_rank");
        const auto cost = doubles_arg(verify_cost, "verify_cost");
        py::gil_scoped_release unlocked;
        return sequoia_plan(p, {.verify_cost = cost,
                                .draft_cost_per_level = draft_cost_per_level,
                                .max_depth = max_depth});
      },
      py::arg("acceptance_by_rank"), py::arg("verify_cost"), py::arg("draft_cost_per_level"),
      py::arg("max_depth") = 8,
      "Sequoia's hardware-aware form: the budget (0 .. len(verify_cost) - 1) and depth that\n"
      "minimise (verify_cost[budget] + depth * draft_cost_per_level) / (expected_accepted + 1).");
}

void bind_selection(py::module_& m) {
  py::class_<TreeSelection>(m, "TreeSelection",
                            "Nodes kept from an expanded draft: nodes[i] (expanded ids) with\n"
                            "parents[i] among the kept nodes, in level order.")
      .def_property_readonly("nodes", [](const TreeSelection& s) { return ints_out(s.nodes); })
      .def_property_readonly("parents", [](const TreeSelection& s) { return ints_out(s.parents); })
      .def("size", &TreeSelection::size)
      .def("__len__", &TreeSelection::size);
  m.def(
      "select_by_path_score",
      [](py::handle parents, py::handle log_probs, std::int32_t budget, double min_gain) {
        const auto ids = ints_arg(parents, "parents");
        const auto scores = doubles_arg(log_probs, "log_probs");
        if (scores.size() != ids.size()) {
          throw Error("log_probs",
                      fmt::format("has {} entries; parents has {}", scores.size(), ids.size()));
        }
        const std::vector<float> values(scores.begin(), scores.end());
        py::gil_scoped_release unlocked;
        return select_by_path_score(ids, values, {.budget = budget, .min_gain = min_gain});
      },
      py::arg("parents"), py::arg("log_probs"), py::arg("budget"), py::arg("min_gain") = 0.0,
      "EAGLE-2's rerank: the top `budget` nodes of an expanded draft by path score (cumulative\n"
      "log-probability), ancestor-closed; with min_gain > 0, OPT-Tree's stop drops nodes whose\n"
      "path probability is below it.");
  m.def(
      "selected_tree",
      [](const DraftTree& expanded, const TreeSelection& selection) {
        return selected_tree(expanded, selection);
      },
      py::arg("expanded"), py::arg("selection"),
      "The selected nodes of `expanded` as a DraftTree of their own.");
  m.def(
      "grow_best_first",
      [](const py::function& expand, std::int32_t budget, double min_gain, std::int32_t max_depth) {
        auto grown = grow_best_first(
            [&](std::span<const Token> path, std::vector<DraftCandidate>& children) {
              const py::object proposed = expand(output_from<Token>(path, ArrayKind::numpy));
              for (const auto item : proposed) {
                const auto pair = item.cast<std::pair<std::int64_t, double>>();
                children.push_back(
                    {token_value(pair.first, "children"), static_cast<float>(pair.second)});
              }
            },
            {.budget = budget, .min_gain = min_gain, .max_depth = max_depth});
        return py::make_tuple(std::move(grown.tree),
                              output_from<double>(grown.path_scores, ArrayKind::numpy));
      },
      py::arg("expand"), py::arg("budget"), py::arg("min_gain") = 0.0,
      py::arg("max_depth") = std::numeric_limits<std::int32_t>::max(),
      "SpecExec's best-first growth: expand(path) returns (token, log_prob) pairs, most probable\n"
      "first, for the node reached by the token array `path` from the root; the candidate of\n"
      "highest path score is added until `budget` nodes (or OPT-Tree's min_gain stop). Returns\n"
      "(DraftTree, path scores).");
}

void bind_estimator(py::module_& m) {
  py::class_<AcceptanceEstimator>(
      m, "AcceptanceEstimator",
      "Counts of acceptance by child rank and by depth from verified trees (Sequoia's\n"
      "measurement), giving acceptance_by_rank for sequoia_tree.")
      .def(py::init([](double prior_rate, double prior_weight) {
             return AcceptanceEstimator({.rate = prior_rate, .weight = prior_weight});
           }),
           py::kw_only(), py::arg("prior_rate") = 0.5, py::arg("prior_weight") = 1.0)
      .def(
          "update",
          [](AcceptanceEstimator& e, py::handle parents, py::handle accepted_nodes) {
            e.update(ints_arg(parents, "parents"), ints_arg(accepted_nodes, "accepted_nodes"));
          },
          py::arg("parents"), py::arg("accepted_nodes"),
          "Records a verified tree: its parents and the accepted root path (node ids).")
      .def("acceptance_by_rank", &AcceptanceEstimator::acceptance_by_rank, py::arg("ranks"))
      .def("acceptance_by_depth", &AcceptanceEstimator::acceptance_by_depth, py::arg("depths"))
      .def_property_readonly(
          "by_rank", [](const AcceptanceEstimator& e) { return counts_out(e.by_rank()); },
          "Counts by rank, int64 [ranks, 2]: offered, accepted.")
      .def_property_readonly(
          "by_depth", [](const AcceptanceEstimator& e) { return counts_out(e.by_depth()); },
          "Counts by depth (row 0 = depth 1), int64 [depths, 2]: offered, accepted.")
      .def("reset", &AcceptanceEstimator::reset);
}

void bind_length_control(py::module_& m) {
  py::class_<CumulativeStop>(m, "CumulativeStop",
                             "SpecDec++'s rule: stop drafting once 1 - prod(predicted acceptance)\n"
                             "exceeds the threshold, within [min_length, max_length].")
      .def(py::init([](double threshold, std::int32_t min_length, std::int32_t max_length) {
             return CumulativeStop(
                 {.threshold = threshold, .min_length = min_length, .max_length = max_length});
           }),
           py::kw_only(), py::arg("threshold") = 0.7, py::arg("min_length") = 1,
           py::arg("max_length") = 16)
      .def("start", &CumulativeStop::start)
      .def("stop_after", &CumulativeStop::stop_after, py::arg("predicted_acceptance"))
      .def("length", &CumulativeStop::length)
      .def("rejection_probability", &CumulativeStop::rejection_probability);
  py::class_<HeuristicLength>(m, "HeuristicLength",
                              "Hugging Face's schedule (+increase when all scheduled tokens are\n"
                              "accepted, -decrease otherwise) and confidence threshold.")
      .def(py::init([](std::int32_t initial, std::int32_t increase, std::int32_t decrease,
                       std::int32_t min_length, std::int32_t max_length,
                       double confidence_threshold) {
             return HeuristicLength({.initial = initial,
                                     .increase = increase,
                                     .decrease = decrease,
                                     .min_length = min_length,
                                     .max_length = max_length,
                                     .confidence_threshold = confidence_threshold});
           }),
           py::kw_only(), py::arg("initial") = 5, py::arg("increase") = 2, py::arg("decrease") = 1,
           py::arg("min_length") = 1, py::arg("max_length") = 64,
           py::arg("confidence_threshold") = 0.4)
      .def("length", &HeuristicLength::length)
      .def("stop_after", &HeuristicLength::stop_after, py::arg("draft_probability"))
      .def("update", &HeuristicLength::update, py::arg("accepted"));
  py::class_<BatchAverageLength>(m, "BatchAverageLength",
                                 "A draft length per batch size from a moving average of the\n"
                                 "accepted tokens: ceil(average) + headroom.")
      .def(py::init([](std::int32_t initial, std::int32_t min_length, std::int32_t max_length,
                       double smoothing, std::int32_t headroom) {
             return BatchAverageLength({.initial = initial,
                                        .min_length = min_length,
                                        .max_length = max_length,
                                        .smoothing = smoothing,
                                        .headroom = headroom});
           }),
           py::kw_only(), py::arg("initial") = 4, py::arg("min_length") = 1,
           py::arg("max_length") = 16, py::arg("smoothing") = 0.2, py::arg("headroom") = 1)
      .def("length", &BatchAverageLength::length, py::arg("batch_size"))
      .def("average", &BatchAverageLength::average, py::arg("batch_size"))
      .def("update", &BatchAverageLength::update, py::arg("batch_size"), py::arg("mean_accepted"));
  py::class_<GoodputLength>(m, "GoodputLength",
                            "The chain length maximising expected tokens per step over\n"
                            "(k * draft_cost + verify_cost), from the measured acceptance.")
      .def(py::init([](double draft_cost, double verify_cost, std::int32_t min_length,
                       std::int32_t max_length, double prior_rate, double prior_weight) {
             return GoodputLength({.draft_cost = draft_cost,
                                   .verify_cost = verify_cost,
                                   .min_length = min_length,
                                   .max_length = max_length},
                                  prior_rate, prior_weight);
           }),
           py::kw_only(), py::arg("draft_cost") = 1.0, py::arg("verify_cost") = 1.0,
           py::arg("min_length") = 1, py::arg("max_length") = 16, py::arg("prior_rate") = 0.5,
           py::arg("prior_weight") = 1.0)
      .def("length", &GoodputLength::length)
      .def("acceptance", &GoodputLength::acceptance)
      .def("update", &GoodputLength::update, py::arg("drafted"), py::arg("accepted"));
  m.def(
      "goodput_length",
      [](py::handle acceptance_by_depth, double draft_cost, double verify_cost,
         std::int32_t min_length, std::int32_t max_length) {
        return goodput_length(doubles_arg(acceptance_by_depth, "acceptance_by_depth"),
                              {.draft_cost = draft_cost,
                               .verify_cost = verify_cost,
                               .min_length = min_length,
                               .max_length = max_length});
      },
      py::arg("acceptance_by_depth"), py::kw_only(), py::arg("draft_cost") = 1.0,
      py::arg("verify_cost") = 1.0, py::arg("min_length") = 1, py::arg("max_length") = 16,
      "The chain length in [min_length, max_length] maximising expected tokens per step (the\n"
      "bonus counted) over k * draft_cost + verify_cost.");
}

}  // namespace

void bind_shape(py::module_& m) {
  bind_parts(m, {bind_sequoia, bind_selection, bind_estimator, bind_length_control});
}

}  // namespace specdec::python
