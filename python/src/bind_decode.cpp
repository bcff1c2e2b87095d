// SPDX-License-Identifier: MIT
// The decoding loop from Python: TreeBatch, providers written in Python (any object with the
// LogitsProvider methods), decoding options, results and metrics, decode / Decoder (with the
// top-k tree, n-gram and length-controlled drafters), and the toy models and providers so that
// decoding runs with NumPy alone.
//
// A Python provider is called through PyProvider, which satisfies the C++ LogitsProvider and
// HiddenStateProvider concepts: the loop runs with the GIL released and each provider call takes
// it back. The logits (and hidden states) a provider fills are NumPy views of the decoder's own
// buffer, so nothing is copied; a Python exception raised by a provider leaves `decode` unchanged.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cctype>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include "arrays.hpp"
#include "bindings.hpp"
#include "rows.hpp"
#include "specdec/decode/chain_length_strategy.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/ngram_strategy.hpp"
#include "specdec/decode/redrafter_strategy.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/toy/toy.hpp"
#include "specdec/tree/tree_mask.hpp"

namespace specdec::python {

namespace {

// ---------------------------------------------------------------------------------------------
// TreeBatch

/// The tree of a batch (depths from the positions), for the mask builders.
DraftTree tree_of(const TreeBatch& batch) {
  DraftTree tree;
  tree.reserve(batch.tokens.size());
  for (std::size_t i = 0; i < batch.tokens.size(); ++i) tree.add(batch.tokens[i], batch.parents[i]);
  return tree;
}

/// A copy of `batch` owned by Python (a provider may keep it past the call).
py::object batch_copy(const TreeBatch& batch) {
  TreeBatch copy;
  copy.tokens = batch.tokens;
  copy.parents = batch.parents;
  copy.positions = batch.positions;
  copy.committed_length = batch.committed_length;
  return py::cast(std::move(copy));
}

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
      .def_property_readonly(
          "tokens",
          [](const TreeBatch& b) { return output_from<Token>(b.tokens, ArrayKind::numpy); },
          "The node tokens (a copy, int32).")
      .def_property_readonly(
          "parents",
          [](const TreeBatch& b) { return output_from<std::int32_t>(b.parents, ArrayKind::numpy); },
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
      .def("tree", &tree_of, "The nodes as a DraftTree (for the mask and position builders).")
      .def(
          "dense_mask",
          [](const TreeBatch& b) {
            const DraftTree tree = tree_of(b);
            const auto n = static_cast<std::int64_t>(tree.size());
            Output<std::uint8_t> out({n, n}, ArrayKind::numpy);
            {
              py::gil_scoped_release unlocked;
              build_dense_mask(tree, out.values());
            }
            return out.result();
          },
          "The ancestor mask of the nodes, uint8 [N, N] (as build_dense_mask builds it).")
      .def("__repr__", [](const TreeBatch& b) {
        return fmt::format("TreeBatch(tokens=[{}], parents=[{}], committed_length={})",
                           fmt::join(b.tokens, ", "), fmt::join(b.parents, ", "),
                           b.committed_length);
      });
}

// ---------------------------------------------------------------------------------------------
// Providers

/// What the loop unwinds with when a Python provider raised: a plain C++ exception, so that no
/// Python object crosses the C++ loop or its thread pool (which may keep the last exception past
/// the call, when no GIL can be taken to release a Python one).
struct ProviderRaised : std::exception {
  const char* what() const noexcept override { return "a Python provider raised an exception"; }
};

/// The Python exception raised by a provider during one call into the loop (the first one when
/// several sequences run at once). Lives in the binding's frame, so it is destroyed with the GIL
/// held; `rethrow` raises the original exception object unchanged.
class ProviderErrors {
 public:
  /// Keeps `error` (GIL held) unless one is kept already, and throws ProviderRaised.
  [[noreturn]] void raise(py::error_already_set&& error) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_.emplace(std::move(error));
    }
    throw ProviderRaised();
  }
  /// Raises the kept Python exception (GIL held).
  [[noreturn]] void rethrow() {
    if (!first_) throw std::logic_error("a provider raised, but no Python exception was kept");
    py::error_already_set error = std::move(*first_);
    first_.reset();
    throw error;
  }

 private:
  std::mutex mutex_;
  std::optional<py::error_already_set> first_;
};

/// Runs `loop` with the GIL released; a Python exception a provider raised comes out unchanged.
template <class F>
decltype(auto) run_unlocked(ProviderErrors& errors, F&& loop) {
  try {
    py::gil_scoped_release unlocked;
    return loop();
  } catch (const ProviderRaised&) {
    errors.rethrow();  // the GIL is back: `unlocked` ended before this handler
  }
}

/// A provider written in Python: an object with vocab_size(), context(), committed_length(),
/// reset(prompt), evaluate(batch, logits), commit(batch, kept_nodes, next) and optionally
/// hidden_size() / evaluate_with_hidden(batch, logits, hidden). Holds the object borrowed (the
/// caller keeps it alive) and takes the GIL for each call; an exception the object raises is
/// handed to `errors` and the loop unwinds with ProviderRaised.
class PyProvider {
 public:
  PyProvider(py::handle self, std::string name, ProviderErrors& errors)
      : self_(self), name_(std::move(name)), errors_(&errors) {}

  std::int64_t vocab_size() const { return integer("vocab_size"); }
  std::int64_t hidden_size() const {
    const bool has = call([&] { return py::hasattr(self_, "hidden_size"); });
    return has ? integer("hidden_size") : 0;
  }
  std::int64_t committed_length() const { return integer("committed_length"); }

  std::span<const Token> context() const {
    call([&] {
      const py::object tokens = self_.attr("context")();
      const Array array = token_arg(tokens, name_ + ".context()", 1);
      const auto values = array.span<Token>(name_ + ".context()");
      context_.assign(values.begin(), values.end());
    });
    return context_;
  }

  void reset(std::span<const Token> prompt) {
    call([&] { self_.attr("reset")(output_from<Token>(prompt, ArrayKind::numpy)); });
  }

  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    call([&] { self_.attr("evaluate")(batch_copy(batch), rows_view(logits)); });
  }

  void evaluate_with_hidden(const TreeBatch& batch, MatrixView<float> logits,
                            MatrixView<float> hidden) {
    call([&] {
      if (!py::hasattr(self_, "evaluate_with_hidden")) {
        throw Error(name_, "has no evaluate_with_hidden(batch, logits, hidden) method");
      }
      self_.attr("evaluate_with_hidden")(batch_copy(batch), rows_view(logits), rows_view(hidden));
    });
  }

  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept_nodes, Token next) {
    call([&] {
      self_.attr("commit")(batch_copy(batch),
                           output_from<std::int32_t>(kept_nodes, ArrayKind::numpy), next);
    });
  }

 private:
  /// Runs `f` with the GIL held (every Python object it makes ends inside).
  template <class F>
  std::invoke_result_t<F&> call(F&& f) const {
    py::gil_scoped_acquire locked;
    try {
      return f();
    } catch (py::error_already_set& error) {
      errors_->raise(std::move(error));
    }
  }

  std::int64_t integer(const char* method) const {
    return call([&]() -> std::int64_t {
      const py::object value = self_.attr(method)();
      try {
        return value.cast<std::int64_t>();
      } catch (const py::cast_error&) {
        throw Error(
            fmt::format("{}.{}()", name_, method),
            fmt::format("returned {}; expected an int", py::repr(value).cast<std::string>()));
      }
    });
  }

  py::handle self_;
  std::string name_;
  ProviderErrors* errors_;
  mutable std::vector<Token> context_;
};

static_assert(HiddenStateProvider<PyProvider>);

/// A provider argument as the loop sees it: a toy provider is used in place (no GIL taken in
/// the loop); any other object is called as a Python provider.
AnyLogitsProvider provider_arg(py::handle obj, const std::string& name, ProviderErrors& errors) {
  if (obj.is_none()) throw Error(name, "is None; expected a provider");
  if (py::isinstance<toy::MarkovProvider>(obj)) return std::ref(obj.cast<toy::MarkovProvider&>());
  if (py::isinstance<toy::NGramProvider>(obj)) return std::ref(obj.cast<toy::NGramProvider&>());
  for (const char* method : {"vocab_size", "committed_length", "reset", "evaluate", "commit"}) {
    if (!py::hasattr(obj, method)) {
      throw Error(name,
                  fmt::format("{} has no {}() method: not a LogitsProvider",
                              py::repr(py::type::handle_of(obj)).cast<std::string>(), method));
    }
  }
  return PyProvider(obj, name, errors);
}

/// A writable float32 matrix of `rows` x `cols` from a NumPy array or a CPU torch tensor.
MatrixView<float> writable_rows(py::handle obj, std::string_view name, std::int64_t rows,
                                std::int64_t cols, Array& keep) {
  if (py::isinstance<py::array>(obj) &&
      !py::array(py::reinterpret_borrow<py::array>(obj)).writeable()) {
    throw Error(std::string(name), "is read-only; pass a writable array");
  }
  if (py::hasattr(obj, "is_contiguous") && !obj.attr("is_contiguous")().cast<bool>()) {
    throw Error(std::string(name), "is not contiguous (a copy would not be written back)");
  }
  if (py::isinstance<py::array>(obj) &&
      !(py::reinterpret_borrow<py::array>(obj).flags() & py::array::c_style)) {
    throw Error(std::string(name), "is not C-contiguous (a copy would not be written back)");
  }
  keep = array_arg(obj, name);
  require_host(keep, name);
  require_ndim(keep, name, 2);
  const auto values = keep.mutable_span<float>(name);
  if (keep.dim(0) != rows || keep.dim(1) != cols) {
    throw Error(std::string(name), fmt::format("has shape [{}, {}]; expected [{}, {}]", keep.dim(0),
                                               keep.dim(1), rows, cols));
  }
  return {values.data(), rows, cols};
}

std::vector<Token> prompt_arg(py::handle prompt) {
  const Array array = token_arg(prompt, "prompt", 1);
  const auto values = array.span<Token>("prompt");
  return {values.begin(), values.end()};
}

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
      .def(
          "next_probabilities",
          [](const toy::MarkovModel& model, py::handle context) {
            const Array tokens = token_arg(context, "context", 1);
            check_vocab_tokens(tokens, "context", model.vocab_size());
            Output<float> out({model.vocab_size()}, ArrayKind::numpy);
            model.next_probabilities(tokens.span<Token>("context"), out.values());
            return out.result();
          },
          py::arg("context"), "The distribution after `context` (its last token).");

  py::class_<toy::NGramModel>(
      m, "NGramModel",
      "A seeded random order-k model: the row after a context is Dirichlet(concentration),\n"
      "seeded by its last `order` tokens. draft_of makes a draft model that diverges from it\n"
      "by `noise` and `temperature`.")
      .def(py::init([](std::int64_t vocab, int order, double concentration, std::uint64_t seed) {
             return toy::NGramModel({vocab, order, concentration, seed});
           }),
           py::kw_only(), py::arg("vocab") = 16, py::arg("order") = 2,
           py::arg("concentration") = 0.5, py::arg("seed") = 1)
      .def_static("draft_of", &toy::NGramModel::draft_of, py::arg("target"), py::arg("noise"),
                  py::arg("temperature") = 1.0f, py::arg("noise_seed") = 0x5eed,
                  "A draft model for `target`: (1 - noise) * target rows at `temperature`\n"
                  "+ noise * an independent model's rows.")
      .def("vocab_size", &toy::NGramModel::vocab_size)
      .def("order", &toy::NGramModel::order)
      .def(
          "next_probabilities",
          [](const toy::NGramModel& model, py::handle context) {
            const Array tokens = token_arg(context, "context", 1);
            check_vocab_tokens(tokens, "context", model.vocab_size());
            Output<float> out({model.vocab_size()}, ArrayKind::numpy);
            model.next_probabilities(tokens.span<Token>("context"), out.values());
            return out.result();
          },
          py::arg("context"), "The distribution after `context`.");

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
           py::kw_only(), py::arg("hidden_size") = 0, py::arg("hidden_window") = 4,
           py::arg("hidden_seed") = 0x41dde7, py::arg("hidden_probabilities") = false)
      .def_readwrite("hidden_size", &toy::ProviderOptions::hidden_size)
      .def_readwrite("hidden_window", &toy::ProviderOptions::hidden_window)
      .def_readwrite("hidden_seed", &toy::ProviderOptions::hidden_seed)
      .def_readwrite("hidden_probabilities", &toy::ProviderOptions::hidden_probabilities);

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

// ---------------------------------------------------------------------------------------------
// Options, results, decode

/// The Python name of a method's enum value ("SD_BLOCK").
std::string python_method_name(Method method) {
  std::string name(method_name(method));
  for (auto& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string metrics_repr(const DecodeMetrics& m) {
  return fmt::format(
      "DecodeMetrics(sequences={}, tokens_generated={}, target_calls={}, draft_calls={}, "
      "target_tree_tokens={}, block_efficiency={:.4f})",
      m.sequences, m.tokens_generated, m.target_calls, m.draft_calls, m.target_tree_tokens,
      m.block_efficiency());
}

void bind_options(py::module_& m) {
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
           py::kw_only(), py::arg("method") = Method::kSd, py::arg("warp") = Warp{},
           py::arg("depth") = 4, py::arg("width") = 2,
           py::arg("branching") = std::vector<std::int32_t>{}, py::arg("tau") = 0.5f,
           py::arg("mtad_beam_search") = false, py::arg("spectr_gamma") = 0.0f,
           py::arg("cascade") = py::none(), py::arg("lossy") = py::none(),
           py::arg("max_new_tokens") = 32, py::arg("end_token") = kNoToken, py::arg("seed") = 0,
           "cascade / lossy: a Cascade / Lossy rule (None = its defaults, Cascade() / Lossy()).")
      .def_readwrite("method", &DecodeOptions::method)
      .def_readwrite("warp", &DecodeOptions::warp)
      .def_readwrite("depth", &DecodeOptions::depth)
      .def_readwrite("width", &DecodeOptions::width)
      .def_readwrite("branching", &DecodeOptions::branching)
      .def_readwrite("tau", &DecodeOptions::tau)
      .def_readwrite("mtad_beam_search", &DecodeOptions::mtad_beam_search)
      .def_readwrite("spectr_gamma", &DecodeOptions::spectr_gamma)
      .def_readwrite("cascade", &DecodeOptions::cascade)
      .def_readwrite("lossy", &DecodeOptions::lossy)
      .def_readwrite("max_new_tokens", &DecodeOptions::max_new_tokens)
      .def_readwrite("end_token", &DecodeOptions::end_token)
      .def_readwrite("seed", &DecodeOptions::seed)
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
      .def_property_readonly(
          "attempted_per_level",
          [](const DecodeMetrics& d) {
            return output_from<std::int64_t>(d.attempted_per_level, ArrayKind::numpy);
          },
          "Steps that attempted depth d + 1 (int64).")
      .def_property_readonly(
          "accepted_per_level",
          [](const DecodeMetrics& d) {
            return output_from<std::int64_t>(d.accepted_per_level, ArrayKind::numpy);
          },
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
      .def_property_readonly(
          "tokens",
          [](const DecodeResult& r) { return output_from<Token>(r.tokens, ArrayKind::numpy); },
          "The generated tokens (int32).")
      .def_readonly("metrics", &DecodeResult::metrics)
      .def("__repr__", [](const DecodeResult& r) {
        return fmt::format("DecodeResult(tokens=[{}], metrics={})", fmt::join(r.tokens, ", "),
                           metrics_repr(r.metrics));
      });
}

/// The providers of one run: a draft of None is allowed for Method.AUTOREGRESSIVE (the target
/// then stands in for it and is never asked for draft rows).
struct Providers {
  AnyLogitsProvider target;
  AnyLogitsProvider draft;
  bool draft_is_target = false;

  Providers(py::handle target_obj, py::handle draft_obj, Method method, ProviderErrors& errors)
      : target(provider_arg(target_obj, "target", errors)) {
    if (draft_obj.is_none()) {
      if (uses_draft(method)) {
        throw Error("draft", fmt::format("is None; Method.{} needs a draft provider",
                                         python_method_name(method)));
      }
      draft_is_target = true;
    } else {
      draft = provider_arg(draft_obj, "draft", errors);
    }
  }
  AnyLogitsProvider& draft_provider() { return draft_is_target ? target : draft; }
};

/// The drafter options that decode, decode_batch and Decoder take besides DecodeOptions, as
/// specdec-sim decode reads them: options.width is the top-k tree's k, options.depth its depth,
/// the n-gram drafter's most draft tokens and a controlled chain's longest length.
struct DrafterArgs {
  std::optional<std::string> drafter;  // "topk_tree", "ngram" or None
  std::string shape = "fixed";
  std::int32_t budget = 8;
  double min_gain = 0.05;
  std::optional<std::vector<double>> verify_cost;  // sequoia_planned's cost per tree size
  std::int32_t ngram = 3;
  std::optional<std::string> length;  // a length controller's name or None
  std::optional<double> threshold;
  double draft_cost_ratio = 0.0;

  /// Throws specdec::Error naming drafter, length or verify_cost for a combination that does
  /// not exist.
  void check(const DecodeOptions& options) const {
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
  }

  /// A drafter or a length controller is named: its options come from DecodeOptions fields
  /// and keywords, and errors are renamed to those.
  bool renames() const { return drafter.has_value() || length.has_value(); }

  /// The method whose draft needs the providers check: the n-gram drafter needs no draft model
  /// (None is allowed as for autoregressive decoding).
  Method provider_method(const DecodeOptions& options) const {
    return drafter == "ngram" ? Method::kAutoregressive : drafter ? Method::kSd : options.method;
  }
};

/// Runs `body`, renaming a strategy option the error names to the argument the Python caller
/// typed (options.width, options.depth for max_draft / max_length, ...).
template <class F>
auto with_decode_names(F&& body) {
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

/// A decoding loop whatever its strategy: what Decoder and decode need of it.
class AnyDecoder {
 public:
  virtual ~AnyDecoder() = default;
  virtual void reset(std::span<const Token> prompt, std::uint32_t sequence) = 0;
  virtual std::span<const Token> step() = 0;
  virtual DecodeResult run() = 0;
  virtual bool finished() const = 0;
  virtual std::span<const Token> generated() const = 0;
  virtual const DecodeMetrics& metrics() const = 0;
  virtual std::int64_t vocab_size() const = 0;
};

template <class D>
class AnyDecoderOf final : public AnyDecoder {
 public:
  template <class... Args>
  explicit AnyDecoderOf(Args&&... args) : decoder_(std::forward<Args>(args)...) {}
  void reset(std::span<const Token> prompt, std::uint32_t sequence) override {
    decoder_.reset(prompt, sequence);
  }
  std::span<const Token> step() override { return decoder_.step(); }
  DecodeResult run() override { return decoder_.run(); }
  bool finished() const override { return decoder_.finished(); }
  std::span<const Token> generated() const override { return decoder_.generated(); }
  const DecodeMetrics& metrics() const override { return decoder_.metrics(); }
  std::int64_t vocab_size() const override { return decoder_.vocab_size(); }

 private:
  D decoder_;
};

/// The Decoder of the drafter `args` names (see DrafterArgs), or of options.method. Throws
/// specdec::Error naming the argument as Python spells it.
std::unique_ptr<AnyDecoder> make_decoder(AnyLogitsProvider& target, AnyLogitsProvider& draft,
                                         const DecodeOptions& options, const DrafterArgs& args) {
  using P = AnyLogitsProvider;
  if (!args.renames()) {
    return std::make_unique<AnyDecoderOf<MethodDecoder<P, P>>>(target, draft, options);
  }
  return with_decode_names([&]() -> std::unique_ptr<AnyDecoder> {
    if (args.drafter == "topk_tree") {
      TopKTreeOptions topk{.shape = parse_tree_shape_policy(args.shape),
                           .width = options.width,
                           .depth = options.depth,
                           .budget = args.budget,
                           .min_gain = args.min_gain,
                           .verify_cost = args.verify_cost.value_or(std::vector<double>{}),
                           .draft_cost_per_level = args.draft_cost_ratio};
      return std::make_unique<AnyDecoderOf<Decoder<P, TopKTreeStrategy<P>>>>(
          target, TopKTreeStrategy<P>(draft, std::move(topk)), options.loop());
    }
    if (args.drafter == "ngram") {
      const NGramOptions ngram{.max_ngram = args.ngram, .max_draft = options.depth};
      return std::make_unique<AnyDecoderOf<Decoder<P, NGramStrategy>>>(
          target, NGramStrategy(ngram), options.loop());
    }
    if (args.length) {
      ChainLengthOptions chain{.policy = parse_length_policy(*args.length),
                               .draft_warp = options.warp};
      const std::int32_t most = options.depth;
      const double threshold =
          args.threshold.value_or(chain.policy == LengthPolicy::kCumulative ? 0.7 : 0.4);
      chain.cumulative = {.threshold = threshold, .max_length = most};
      chain.heuristic = {
          .initial = std::min(5, most), .max_length = most, .confidence_threshold = threshold};
      chain.batch_average = {.initial = std::min(4, most), .max_length = most};
      chain.goodput = {.draft_cost = args.draft_cost_ratio, .verify_cost = 1.0, .max_length = most};
      return std::make_unique<AnyDecoderOf<Decoder<P, ChainLengthStrategy<P>>>>(
          target, ChainLengthStrategy<P>(draft, chain), options.loop());
    }
    throw Error("drafter", "names no drafter");  // unreachable: renames() said one is named
  });
}

/// decode() with the drafter that `args` names.
DecodeResult decode_with(AnyLogitsProvider& target, AnyLogitsProvider& draft,
                         std::span<const Token> prompt, const DecodeOptions& options,
                         std::uint32_t sequence, const DrafterArgs& args) {
  auto decoder = make_decoder(target, draft, options, args);
  const auto go = [&] {
    decoder->reset(prompt, sequence);
    return decoder->run();
  };
  return args.renames() ? with_decode_names(go) : go();
}

/// Decoder for Python: the providers (kept alive through their Python objects) and the C++
/// Decoder of a built-in method or drafter over them.
class PyDecoder {
 public:
  PyDecoder(py::object target, py::object draft, const DecodeOptions& options,
            const DrafterArgs& args)
      : target_obj_(std::move(target)),
        draft_obj_(std::move(draft)),
        providers_(target_obj_, draft_obj_, args.provider_method(options), errors_),
        renames_(args.renames()) {
    run_unlocked(errors_, [&] {
      decoder_ = make_decoder(providers_.target, providers_.draft_provider(), options, args);
    });
  }

  void reset(py::handle prompt, std::uint32_t sequence) {
    const auto tokens = prompt_arg(prompt);
    run_unlocked(errors_, [&] {
      const auto go = [&] { decoder_->reset(tokens, sequence); };
      if (renames_) {
        with_decode_names(go);
      } else {
        go();
      }
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
  std::unique_ptr<AnyDecoder> decoder_;
};

constexpr const char* kDrafterDoc =
    "Drafters whose tokens come without draft probabilities, verified against the target\n"
    "alone (lossless; options.method is then unused, options' warp, max_new_tokens,\n"
    "end_token and seed apply):\n"
    "  drafter='topk_tree': each node's children are the draft's top options.width tokens, to\n"
    "    options.depth levels; shape 'fixed' (the full tree), 'sequoia' (Sequoia's tree of\n"
    "    `budget` nodes from the acceptance measured so far), 'sequoia_planned' (Sequoia's\n"
    "    hardware-aware plan: each step, the budget and depth of least time per token, from\n"
    "    `verify_cost[n]`, the time of a target pass over n nodes, n = 0 .. the largest budget\n"
    "    (None: 1 for every n up to `budget`), and `draft_cost_ratio`, the time of one draft\n"
    "    level), 'eagle2' (rerank to `budget`), 'specexec' (best-first growth to `budget`) or\n"
    "    'opt_tree' (EAGLE-2's expansion, nodes of path probability >= min_gain).\n"
    "  drafter='ngram': prompt lookup: the continuation of an earlier occurrence of the last\n"
    "    `ngram` tokens (then fewer, down to 1; the latest followed by options.depth tokens,\n"
    "    else the earliest), at most options.depth tokens; `draft` may be None.\n"
    "length='cumulative' | 'heuristic' | 'batch_average' | 'goodput' (Method.SD only): the\n"
    "chain length is set each step by that controller, at most options.depth; `threshold` is\n"
    "the cumulative stop's threshold (default 0.7) or the heuristic confidence threshold\n"
    "(default 0.4); `draft_cost_ratio` the goodput draft cost (one verification costs 1).\n"
    "Bad values raise specdec.Error naming the argument (drafter, shape, budget, min_gain,\n"
    "verify_cost, ngram, length, threshold, draft_cost_ratio, options.width, options.depth).";

/// The drafter keywords, in the order every binding takes them.
#define SPECDEC_DRAFTER_PY_ARGS                                                                \
  py::kw_only(), py::arg("drafter") = py::none(), py::arg("shape") = "fixed",                  \
      py::arg("budget") = 8, py::arg("min_gain") = 0.05, py::arg("verify_cost") = py::none(),  \
      py::arg("ngram") = 3, py::arg("length") = py::none(), py::arg("threshold") = py::none(), \
      py::arg("draft_cost_ratio") = 0.0

void bind_decoding(py::module_& m) {
  m.def(
      "decode",
      [](py::object target, py::object draft, py::handle prompt, const DecodeOptions& options,
         std::uint32_t sequence, std::optional<std::string> drafter, std::string shape,
         std::int32_t budget, double min_gain, std::optional<std::vector<double>> verify_cost,
         std::int32_t ngram, std::optional<std::string> length, std::optional<double> threshold,
         double draft_cost_ratio) {
        const DrafterArgs args{drafter,     std::move(shape), budget, min_gain,
                               verify_cost, ngram,            length, threshold,
                               draft_cost_ratio};
        args.check(options);
        const auto tokens = prompt_arg(prompt);
        ProviderErrors errors;
        Providers providers(target, draft, args.provider_method(options), errors);
        return run_unlocked(errors, [&] {
          return decode_with(providers.target, providers.draft_provider(),
                             std::span<const Token>(tokens), options, sequence, args);
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("prompt"), py::arg("options"),
      py::arg("sequence") = 0, SPECDEC_DRAFTER_PY_ARGS,
      (std::string(
           "Generates from `prompt` with a built-in method. `target` and `draft` are providers: "
           "a\ntoy provider (MarkovProvider, NGramProvider: runs without the GIL) or any object "
           "with the\nLogitsProvider methods (see specdec.LogitsProvider); `draft` may be None "
           "for\nMethod.AUTOREGRESSIVE. The same options.seed and `sequence` give the same "
           "tokens. The GIL\nis released while the loop runs and taken back for each Python "
           "provider call; an\nexception raised by a provider propagates unchanged. Bad "
           "provider rows raise\nspecdec.Error naming target.logits / draft.logits.\n") +
       kDrafterDoc)
          .c_str());

  m.def(
      "decode_batch",
      [](const py::sequence& targets, const py::sequence& drafts, const py::sequence& prompts,
         const DecodeOptions& options, int threads, std::optional<std::string> drafter,
         std::string shape, std::int32_t budget, double min_gain,
         std::optional<std::vector<double>> verify_cost, std::int32_t ngram,
         std::optional<std::string> length, std::optional<double> threshold,
         double draft_cost_ratio) {
        const DrafterArgs args{drafter,     std::move(shape), budget, min_gain,
                               verify_cost, ngram,            length, threshold,
                               draft_cost_ratio};
        args.check(options);
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
            providers.emplace_back(targets[i], drafts[i], args.provider_method(options), errors);
            // Checked here so that a bad token is named by its sequence (decoding names none).
            const Array checked = token_arg(prompts[i], "prompt", 1);
            check_vocab_tokens(checked, "prompt", targets[i].attr("vocab_size")().cast<std::int64_t>());
          } catch (const Error& e) {
            // "prompt[3]" -> "prompts[i][3]": the argument as this function names it.
            const auto& name = e.argument();
            const auto end = std::min(name.find_first_of("[."), name.size());
            throw Error(fmt::format("{}s[{}]{}", name.substr(0, end), i, name.substr(end)),
                        e.problem());
          }
        }
        return run_unlocked(errors, [&] {
          // As specdec::decode_batch, with any drafter: sequence i on the pool, results in order.
          std::vector<DecodeResult> results(count);
          backend::default_thread_pool().run(
              static_cast<std::int64_t>(count), threads, [&](std::int64_t i, int /*slot*/) {
                const auto k = static_cast<std::size_t>(i);
                results[k] = decode_with(providers[k].target, providers[k].draft_provider(),
                                         std::span<const Token>(prompt_list[k]), options,
                                         static_cast<std::uint32_t>(i), args);
              });
          return results;
        });
      },
      py::arg("targets"), py::arg("drafts"), py::arg("prompts"), py::arg("options"),
      py::arg("threads") = 0, SPECDEC_DRAFTER_PY_ARGS,
      (std::string("Decodes prompts[i] with targets[i] and drafts[i] as sequence i, on the CPU "
                   "thread pool\n(`threads`, 0 = every hardware thread); result i equals "
                   "decode(targets[i], drafts[i],\nprompts[i], options, sequence=i, **drafter "
                   "keywords). Toy providers run in parallel; Python\nproviders take the GIL for "
                   "each call. Each provider belongs to one sequence. The drafter\nkeywords are "
                   "decode's:\n") +
       kDrafterDoc)
          .c_str());

  py::class_<PyDecoder>(m, "Decoder",
                        "One sequence's decoding loop, step by step: reset(prompt), then step()\n"
                        "until finished() (or run()). Holds its providers for its lifetime.")
      .def(py::init([](py::object target, py::object draft, const DecodeOptions& options,
                       std::optional<std::string> drafter, std::string shape, std::int32_t budget,
                       double min_gain, std::optional<std::vector<double>> verify_cost,
                       std::int32_t ngram, std::optional<std::string> length,
                       std::optional<double> threshold, double draft_cost_ratio) {
             const DrafterArgs args{drafter,     std::move(shape), budget, min_gain,
                                    verify_cost, ngram,            length, threshold,
                                    draft_cost_ratio};
             args.check(options);
             return std::make_unique<PyDecoder>(std::move(target), std::move(draft), options,
                                                args);
           }),
           py::arg("target"), py::arg("draft"), py::arg("options"), SPECDEC_DRAFTER_PY_ARGS,
           (std::string("A decoder of options.method, or of the drafter the keywords name (as "
                        "decode's):\n") +
            kDrafterDoc)
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

#undef SPECDEC_DRAFTER_PY_ARGS

void bind_redrafter_decoding(py::module_& m) {
  py::enum_<ReDrafterVerification>(m, "ReDrafterVerification",
                                   "How a ReDrafter step is drafted and verified.")
      .value("EXACT", ReDrafterVerification::kExact,
             "stochastic beam search + recursive rejection (lossless)")
      .value("GREEDY", ReDrafterVerification::kGreedy, "beam search + greedy matching")
      .value("TYPICAL", ReDrafterVerification::kTypical, "beam search + typical acceptance")
      .value("PARITY", ReDrafterVerification::kParity,
             "the reference's per-beam rule (not lossless)");

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
           py::kw_only(), py::arg("verification") = ReDrafterVerification::kExact,
           py::arg("warp") = Warp{}, py::arg("width") = 4, py::arg("depth") = 4,
           py::arg("typical") = py::none(), py::arg("max_new_tokens") = 32,
           py::arg("end_token") = kNoToken, py::arg("seed") = 0,
           "typical: a Typical rule for ReDrafterVerification.TYPICAL (None = Typical()).")
      .def_readwrite("verification", &ReDrafterOptions::verification)
      .def_readwrite("warp", &ReDrafterOptions::warp)
      .def_readwrite("width", &ReDrafterOptions::width)
      .def_readwrite("depth", &ReDrafterOptions::depth)
      .def_readwrite("typical", &ReDrafterOptions::typical)
      .def_readwrite("max_new_tokens", &ReDrafterOptions::max_new_tokens)
      .def_readwrite("end_token", &ReDrafterOptions::end_token)
      .def_readwrite("seed", &ReDrafterOptions::seed)
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
  bind_tree_batch(m);
  bind_options(m);
  bind_toys(m);
  bind_decoding(m);
  bind_redrafter_decoding(m);
}

}  // namespace specdec::python
