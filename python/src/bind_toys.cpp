// SPDX-License-Identifier: MIT
// TreeBatch (what a provider evaluates) and the toy models and providers, so that decoding runs
// with NumPy alone.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <type_traits>
#include <utility>

#include "bindings.hpp"
#include "decode_providers.hpp"
#include "specdec/toy/toy.hpp"
#include "specdec/tree/tree_mask.hpp"

namespace specdec::python {

namespace {

/// The tree of a batch (depths from the positions), for the mask builders.
DraftTree batch_tree(const TreeBatch& batch) {
  DraftTree tree;
  tree.reserve(batch.tokens.size());
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) tree.add(batch.tokens[i], batch.parents[i]);
  return tree;
}

}  // namespace

void bind_tree_batch(py::module_& m) {
  py::class_<TreeBatch>(
      m, "TreeBatch",
      "The draft-tree nodes a provider evaluates after its committed context (read-only).\n"
      "Node i holds tokens[i], parents[i] (-1 = the root, the last committed token) and its\n"
      "absolute position positions[i]; the root sits at committed_length - 1. A provider answers\n"
      "with rows() = size() + 1 rows: row 0 after the committed context, row i + 1 after node i's\n"
      "root-to-node path.")
      .def_static(
          "from_tree",
          [](const DraftTree& tree, std::int64_t committed_length) {
            return TreeBatch::from_tree(tree, committed_length);
          },
          py::arg("tree"), py::arg("committed_length"),
          "The batch of `tree` after a context of `committed_length` (>= 1) tokens.")
      .def_property_readonly("tokens", copy_of(&TreeBatch::tokens),
          "The node tokens (a copy, int32).")
      .def_property_readonly("parents", copy_of(&TreeBatch::parents),
          "The node parents (a copy, int32; -1 for children of the root).")
      .def_property_readonly(
          "positions",
          [](const TreeBatch& b) {
            Output<std::int32_t> out({b.size()}, ArrayKind::numpy);
            for (std::size_t i = 0; i < b.positions.size(); ++i) {
              out.values()[i] = token_value(b.positions[i], fmt::format("positions[{}]", i));
            }
            return out.result();
          },
          "The absolute position ids of the nodes (a copy, int32).")
      .def_readonly("committed_length", &TreeBatch::committed_length,
                    "The committed tokens before the tree (the root included).")
      .def("root_position", &TreeBatch::root_position, "The root's position, committed_length - 1.")
      .def("rows", &TreeBatch::rows, "Rows a provider returns: size() + 1.")
      .def("size", &TreeBatch::size, "The number of nodes.")
      .def("__len__", &TreeBatch::size)
      .def(
          "depth",
          [](const TreeBatch& b, std::int32_t node) {
            if (node < 0 || node >= b.size()) {
              throw Error("node",
                          fmt::format("{} is not a node of the batch ({} nodes)", node, b.size()));
            }
            return b.depth(node);
          },
          py::arg("node"), "The depth of `node` (1 for children of the root).")
      .def("tree", &batch_tree, "The nodes as a DraftTree (for the mask and position builders).")
      .def(
          "dense_mask",
          [](const TreeBatch& b) {
            const DraftTree tree = batch_tree(b);
            const auto n = static_cast<std::int64_t>(tree.size());
            return filled<std::uint8_t>({n, n}, [&](auto out) { build_dense_mask(tree, out); });
          },
          "The ancestor mask of the nodes, uint8 [N, N] (as build_dense_mask builds it).")
      .def("__repr__", [](const TreeBatch& b) {
        return fmt::format("TreeBatch(tokens=[{}], parents=[{}], committed_length={})",
                           fmt::join(b.tokens, ", "), fmt::join(b.parents, ", "),
                           b.committed_length);
      });
}

namespace {

template <class Provider>
void bind_toy_provider(py::module_& m, const char* name, const char* model_name) {
  using Model = std::remove_cvref_t<decltype(std::declval<Provider>().model())>;
  py::class_<Provider>(
      m, name,
      fmt::format("A LogitsProvider over a {} (runs in C++, no GIL taken by the loop): row r of\n"
                  "evaluate holds log(next_probabilities(context of row r)), -inf where 0.",
                  model_name)
          .c_str())
      .def(py::init<Model, toy::ProviderOptions>(), py::arg("model"),
           py::arg("options") = toy::ProviderOptions{})
      .def("vocab_size", &Provider::vocab_size)
      .def("hidden_size", &Provider::hidden_size)
      .def(
          "context",
          [](const Provider& p) { return output_from<Token>(p.context(), ArrayKind::numpy); },
          "The committed tokens (a copy, int32).")
      .def("committed_length", &Provider::committed_length)
      .def("calls", &Provider::calls, "Evaluations since construction or reset_counters().")
      .def("evaluated_tokens", &Provider::evaluated_tokens, "Tree nodes scored by those calls.")
      .def("reset_counters", &Provider::reset_counters)
      .def_property_readonly("model", &Provider::model, "The model (a copy).")
      .def(
          "reset", [](Provider& p, py::handle prompt) { p.reset(prompt_arg(prompt)); },
          py::arg("prompt"), "The committed context becomes `prompt` (non-empty).")
      .def(
          "evaluate",
          [](Provider& p, const TreeBatch& batch, py::handle logits) {
            Array keep;
            const auto view = writable_rows(logits, "logits", batch.rows(), p.vocab_size(), keep);
            py::gil_scoped_release unlocked;
            p.evaluate(batch, view);
          },
          py::arg("batch"), py::arg("logits"),
          "Fills the writable float32 [batch.rows(), V] array `logits` in place.")
      .def(
          "evaluate_with_hidden",
          [](Provider& p, const TreeBatch& batch, py::handle logits, py::handle hidden) {
            Array keep_logits, keep_hidden;
            const auto logit_view =
                writable_rows(logits, "logits", batch.rows(), p.vocab_size(), keep_logits);
            const auto hidden_view =
                writable_rows(hidden, "hidden", batch.rows(), p.hidden_size(), keep_hidden);
            py::gil_scoped_release unlocked;
            p.evaluate_with_hidden(batch, logit_view, hidden_view);
          },
          py::arg("batch"), py::arg("logits"), py::arg("hidden"),
          "As evaluate, and fills `hidden` (float32 [batch.rows(), hidden_size()]).")
      .def(
          "commit",
          [](Provider& p, const TreeBatch& batch, py::handle kept_nodes, Token next) {
            const Array kept = int32_arg(kept_nodes, "kept_nodes", 1);
            p.commit(batch, kept.span<std::int32_t>("kept_nodes"), next);
          },
          py::arg("batch"), py::arg("kept_nodes"), py::arg("next"),
          "Appends the kept path's tokens, then `next`, to the committed context.");
}

/// A toy model's distribution after `context` (float32 [V]).
template <class Model>
py::object next_probabilities(const Model& model, py::handle context) {
  const Array tokens = token_arg(context, "context", 1);
  check_vocab_tokens(tokens, "context", model.vocab_size());
  Output<float> out({model.vocab_size()}, ArrayKind::numpy);
  model.next_probabilities(tokens.span<Token>("context"), out.values());
  return out.result();
}

}  // namespace

void bind_toys(py::module_& m) {
  py::class_<toy::MarkovModel>(m, "MarkovModel",
                               "An order-1 Markov model: row v of the [V, V] table is the\n"
                               "distribution of the token after v.")
      .def(py::init([](py::handle transition) {
             const Array table = rows_f32_arg(transition, "transition", 2);
             if (table.dim(0) != table.dim(1)) {
               throw Error("transition", fmt::format("has shape [{}, {}]; expected a square [V, V]",
                                                     table.dim(0), table.dim(1)));
             }
             const auto values = table.span<float>("transition");
             return toy::MarkovModel(table.dim(0), {values.begin(), values.end()});
           }),
           py::arg("transition"), "A model from its [V, V] transition table (rows sum to 1).")
      .def("vocab_size", &toy::MarkovModel::vocab_size)
      .def(
          "row",
          [](const toy::MarkovModel& model, Token previous) {
            token_value(previous, "previous", model.vocab_size());
            return output_from<float>(model.row(previous), ArrayKind::numpy);
          },
          py::arg("previous"), "The distribution after `previous` (float32 [V]).")
      .def("next_probabilities", &next_probabilities<toy::MarkovModel>, py::arg("context"),
           "The distribution after `context` (its last token).");

  const toy::NGramModel::Config config{};  // the library's defaults, as are provider's below
  const toy::ProviderOptions provider{};
  py::class_<toy::NGramModel>(
      m, "NGramModel",
      "A seeded random order-k model: the row after a context is Dirichlet(concentration),\n"
      "seeded by its last `order` tokens. draft_of makes a draft model that diverges from it\n"
      "by `noise` and `temperature`.")
      .def(py::init([](std::int64_t vocab, int order, double concentration, std::uint64_t seed) {
             return toy::NGramModel({vocab, order, concentration, seed});
           }),
           py::kw_only(), py::arg("vocab") = config.vocab, py::arg("order") = config.order,
           py::arg("concentration") = config.concentration, py::arg("seed") = config.seed)
      .def_static("draft_of", &toy::NGramModel::draft_of, py::arg("target"), py::arg("noise"),
                  py::arg("temperature") = 1.0f, py::arg("noise_seed") = 0x5eed,
                  "A draft model for `target`: (1 - noise) * target rows at `temperature`\n"
                  "+ noise * an independent model's rows.")
      .def("vocab_size", &toy::NGramModel::vocab_size)
      .def("order", &toy::NGramModel::order)
      .def("next_probabilities", &next_probabilities<toy::NGramModel>, py::arg("context"),
           "The distribution after `context`.");

  py::class_<toy::ProviderOptions>(
      m, "ProviderOptions",
      "Options of a toy provider: hidden_size > 0 gives hidden states (a deterministic context\n"
      "embedding over the last hidden_window tokens, then the row's probabilities when\n"
      "hidden_probabilities is set).")
      .def(py::init([](std::int64_t hidden_size, int hidden_window, std::uint64_t hidden_seed,
                       bool hidden_probabilities) {
             return toy::ProviderOptions{hidden_size, hidden_window, hidden_seed,
                                         hidden_probabilities};
           }),
           py::kw_only(), py::arg("hidden_size") = provider.hidden_size,
           py::arg("hidden_window") = provider.hidden_window,
           py::arg("hidden_seed") = provider.hidden_seed,
           py::arg("hidden_probabilities") = provider.hidden_probabilities)
      SPECDEC_FIELDS(toy::ProviderOptions, hidden_size, hidden_window, hidden_seed,
                                           hidden_probabilities);

  bind_toy_provider<toy::MarkovProvider>(m, "MarkovProvider", "MarkovModel");
  bind_toy_provider<toy::NGramProvider>(m, "NGramProvider", "NGramModel");

  m.def(
      "markov_head",
      [](const toy::MarkovModel& draft, std::int64_t hidden) {
        return toy::markov_head(draft, hidden);
      },
      py::arg("draft"), py::arg("hidden"),
      "A ReDrafterHead whose row after token t is draft.row(t) whatever the hidden state\n"
      "(`hidden` >= V is the target's hidden size).");
}

}  // namespace specdec::python
