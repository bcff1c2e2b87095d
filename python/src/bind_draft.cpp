// SPDX-License-Identifier: MIT
// Drafters: i.i.d. and Gumbel-top-k sampling, i.i.d. chains (SpecTr / SpecInfer), RSD-C trees,
// RSD-S stochastic beam search, beam search / sampling (MTAD), their batched levels, and the
// ReDrafter head with its safetensors files, and safetensors files of any tensors.
//
// Tree drafters ask for draft rows through a Python callable draft_rows(tree, nodes, rows):
// `tree` is the DraftTree so far, `nodes` the int32 ids whose rows are wanted (-1 = the root)
// and `rows` a writable float32 [len(nodes), V] view to fill with (warped) probabilities. The
// drafter runs with the GIL released and takes it back for each call.
#include <fmt/format.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "rows.hpp"
#include "specdec/backend/cpu/draft_batch.hpp"
#include "specdec/backend/draft_batch.hpp"
#include "specdec/draft/draft.hpp"
#include "specdec/io/redrafter_head.hpp"

namespace specdec::python {

namespace {

/// A Python draft_rows(tree, nodes, rows) callable as a DraftRowFunction.
class PyDraftRows {
 public:
  explicit PyDraftRows(py::handle function) : function_(function) {}

  void operator()(const DraftTree& tree, std::span<const std::int32_t> nodes,
                  MatrixView<float> rows) {
    py::gil_scoped_acquire locked;
    function_(py::cast(tree, py::return_value_policy::copy),
              output_from<std::int32_t>(nodes, ArrayKind::numpy), rows_view(rows));
  }

 private:
  py::handle function_;
};

py::handle draft_rows_arg(py::handle function) {
  if (!PyCallable_Check(function.ptr())) {
    throw Error("draft_rows", "is not callable: expected draft_rows(tree, nodes, rows)");
  }
  return function;
}

/// A tree drafted by draft(rows, out) without the GIL, rows coming from the caller's callback.
template <class Draft>
DraftedTree drafted(py::handle draft_rows, const Draft& draft) {
  PyDraftRows rows(draft_rows_arg(draft_rows));
  DraftedTree out;
  py::gil_scoped_release unlocked;
  draft(rows, out);
  return out;
}

/// A float32 matrix [rows, cols] (any float dtype converted) for the head's inputs.
Eigen::MatrixXf matrix_arg(py::handle obj, std::string_view name) {
  const Array a = rows_f32_arg(obj, name, 2);
  const auto values = a.span<float>(name);
  return Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      values.data(), a.dim(0), a.dim(1));
}

/// The head's embedding override [V, H], or an empty matrix for None (keep the file's).
Eigen::MatrixXf embedding_arg(py::handle embedding) {
  return embedding.is_none() ? Eigen::MatrixXf() : matrix_arg(embedding, "embedding");
}

py::object matrix_output(const Eigen::MatrixXf& m) {
  Output<float> out({m.rows(), m.cols()}, ArrayKind::numpy);
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      out.data(), m.rows(), m.cols()) = m;
  return out.result();
}

std::span<const float> hidden_arg(const Array& a) { return a.span<float>("hidden"); }

/// A dict of float arrays by name (any float dtype converted) as float32 tensors.
io::TensorMap tensor_map(const py::dict& tensors) {
  io::TensorMap map;
  for (const auto& [key, value] : tensors) {
    const auto name = py::str(key).cast<std::string>();
    const Array a = rows_f32_arg(value, name);
    const auto values = a.span<float>(name);
    map[name] = io::Tensor{a.shape, {values.begin(), values.end()}};
  }
  return map;
}

/// Tensors as a dict of float32 NumPy arrays by name.
py::dict tensor_dict(const io::TensorMap& map) {
  py::dict out;
  for (const auto& [name, tensor] : map) {
    Output<float> array(tensor.shape, ArrayKind::numpy);
    std::copy(tensor.data.begin(), tensor.data.end(), array.values().begin());
    out[py::str(name)] = array.result();
  }
  return out;
}

void bind_sampling(py::module_& m) {
  m.def(
      "sample_iid",
      [](py::handle probabilities, const RandomStream& stream, std::int64_t k,
         std::uint32_t first_draw) {
        const Array row = rows_f32_arg(probabilities, "probabilities", 1);
        if (k < 1) throw Error("k", fmt::format("{} must be >= 1", k));
        Output<Token> tokens({k}, kind_of(row));
        {
          py::gil_scoped_release unlocked;
          sample_iid(row.span<float>("probabilities"), stream, tokens.values(), first_draw);
        }
        return tokens.result();
      },
      py::arg("probabilities"), py::arg("stream"), py::arg("k"), py::arg("first_draw") = 0,
      "k tokens drawn i.i.d. (with replacement) from a probability row (int32 [k]); candidate\n"
      "i uses uniform first_draw + i of `stream`.");

  const auto top_k = [](RowKind kind) {
    return [kind](py::handle row_obj, std::int64_t k, const RandomStream& stream,
                  std::uint32_t first_draw) {
      const char* name = kind == RowKind::kProbabilities ? "probabilities" : "log_weights";
      const Array row = rows_arg(row_obj, name, 1);
      if (k < 1 || k > row.dim(0)) {
        throw Error("k", fmt::format("{} must be in [1, {}] (the vocabulary size)", k, row.dim(0)));
      }
      std::vector<Token> tokens(static_cast<std::size_t>(k));
      std::vector<float> values(static_cast<std::size_t>(k));
      std::int64_t got = 0;
      visit_floats(row, name, [&]<class T>(std::span<const T> values_in) {
        py::gil_scoped_release unlocked;
        got = kind == RowKind::kProbabilities
                  ? gumbel_top_k_probabilities<T>(values_in, k, stream, tokens, thread_workspace(),
                                                  values, first_draw)
                  : gumbel_top_k<T>(values_in, k, stream, tokens, thread_workspace(), values,
                                    first_draw);
      });
      tokens.resize(static_cast<std::size_t>(got));
      values.resize(static_cast<std::size_t>(got));
      return py::make_tuple(output_from<Token>(tokens, kind_of(row)),
                            output_from<float>(values, kind_of(row)));
    };
  };
  m.def("gumbel_top_k", top_k(RowKind::kLogWeights), py::arg("log_weights"), py::arg("k"),
        py::arg("stream"), py::arg("first_draw") = 0,
        "Up to k tokens without replacement from the distribution proportional to\n"
        "exp(log_weights) (-inf = banned), in sampling order: returns (tokens int32, values\n"
        "float32), values the perturbed log-weights (decreasing). Uniform first_draw + x of\n"
        "`stream` perturbs token x. float32, float16 and bfloat16 rows are read as they are.");
  m.def("gumbel_top_k_probabilities", top_k(RowKind::kProbabilities), py::arg("probabilities"),
        py::arg("k"), py::arg("stream"), py::arg("first_draw") = 0,
        "As gumbel_top_k, from a probability row (0 = never drawn).");

  py::enum_<RowKind>(m, "RowKind", "What a row handed to Gumbel-top-k holds.")
      .value("LOG_WEIGHTS", RowKind::kLogWeights, "log-probabilities or logits (-inf = banned)")
      .value("PROBABILITIES", RowKind::kProbabilities, "probabilities (0 = banned)");

  m.def(
      "gumbel_top_k_batch",
      [](RowKind kind, py::handle rows_obj, std::int64_t k, py::handle streams_obj) {
        const Array rows = rows_arg(rows_obj, "rows", 2);
        const auto streams = streams_arg(streams_obj);
        if (static_cast<std::int64_t>(streams.size()) != rows.dim(0)) {
          throw Error("streams", fmt::format("has {} entries; expected one per row of rows ({})",
                                             streams.size(), rows.dim(0)));
        }
        const auto count = rows.dim(0);
        Output<Token> tokens({count, std::max<std::int64_t>(k, 0)}, kind_of(rows));
        Output<float> values({count, std::max<std::int64_t>(k, 0)}, kind_of(rows));
        Output<std::int32_t> counts({count}, kind_of(rows));
        visit_floats(rows, "rows", [&]<class T>(std::span<const T> flat) {
          const MatrixView<const T> view(flat.data(), count, rows.dim(1));
          const MatrixView<Token> token_view(tokens.data(), count, k);
          const MatrixView<float> value_view(values.data(), count, k);
          const auto counts_span = counts.values();
          py::gil_scoped_release unlocked;
          gumbel_top_k_batch(backend::cpu,
                             GumbelTopKBatchArgs<T>{.kind = kind, .rows = view, .k = k,
                                                    .streams = streams, .tokens = token_view,
                                                    .values = value_view, .counts = counts_span},
                             thread_workspace());
        });
        return py::make_tuple(tokens.result(), values.result(), counts.result());
      },
      py::arg("kind"), py::arg("rows"), py::arg("k"), py::arg("streams"),
      "Gumbel-top-k on every row of [R, V] (row r with streams[r], first draw 0): returns\n"
      "(tokens int32 [R, k], values float32 [R, k], counts int32 [R]); entries past counts[r]\n"
      "are -1 / -inf. Runs on the CPU thread pool.");

  m.def(
      "stochastic_beam_level_batch",
      [](py::handle draft_rows_obj, py::handle beam_counts_obj, py::handle nodes_obj,
         py::handle log_probs_obj, py::handle scores_obj, py::handle streams_obj) {
        const Array nodes = int32_arg(nodes_obj, "nodes", 2);
        const auto batch = nodes.dim(0), width = nodes.dim(1);
        const Array rows = rows_f32_arg(draft_rows_obj, "draft_rows", 2);
        const Array counts = int32_arg(beam_counts_obj, "beam_counts", 1);
        const Array log_probs = values_f32_arg(log_probs_obj, "log_probs", 2);
        const Array scores = values_f32_arg(scores_obj, "scores", 2);
        const auto streams = streams_arg(streams_obj);
        const auto same_shape = [&](const Array& a, const char* name) {
          if (a.dim(0) != batch || a.dim(1) != width) {
            throw Error(name, fmt::format("has shape [{}, {}]; expected [{}, {}] (as nodes)",
                                          a.dim(0), a.dim(1), batch, width));
          }
        };
        same_shape(log_probs, "log_probs");
        same_shape(scores, "scores");
        if (rows.dim(0) != batch * width) {
          throw Error("draft_rows", fmt::format("has {} rows; expected batch * width = {}",
                                                rows.dim(0), batch * width));
        }
        const auto kind = kind_of(rows);
        Output<std::int32_t> next_parents({batch, width}, kind);
        Output<Token> next_tokens({batch, width}, kind);
        Output<float> next_log_probs({batch, width}, kind);
        Output<float> next_scores({batch, width}, kind);
        Output<std::int32_t> next_counts({batch}, kind);
        const MatrixView<const float> row_view(rows.span<float>("draft_rows").data(), rows.dim(0),
                                               rows.dim(1));
        const MatrixView<const std::int32_t> node_view(nodes.span<std::int32_t>("nodes").data(),
                                                       batch, width);
        const MatrixView<const float> log_prob_view(log_probs.span<float>("log_probs").data(),
                                                    batch, width);
        const MatrixView<const float> score_view(scores.span<float>("scores").data(), batch, width);
        const MatrixView<std::int32_t> parents_out(next_parents.data(), batch, width);
        const MatrixView<Token> tokens_out(next_tokens.data(), batch, width);
        const MatrixView<float> log_probs_out(next_log_probs.data(), batch, width);
        const MatrixView<float> scores_out(next_scores.data(), batch, width);
        const auto counts_out = next_counts.values();
        {
          py::gil_scoped_release unlocked;
          stochastic_beam_level_batch(
              backend::cpu,
              BeamLevelBatchArgs{.draft_rows = row_view,
                                 .beam_counts = counts.span<std::int32_t>("beam_counts"),
                                 .nodes = node_view, .log_probs = log_prob_view,
                                 .scores = score_view, .streams = streams,
                                 .next_parents = parents_out, .next_tokens = tokens_out,
                                 .next_log_probs = log_probs_out, .next_scores = scores_out,
                                 .next_counts = counts_out},
              thread_workspace());
        }
        return py::make_tuple(next_parents.result(), next_tokens.result(), next_log_probs.result(),
                              next_scores.result(), next_counts.result());
      },
      py::arg("draft_rows"), py::arg("beam_counts"), py::arg("nodes"), py::arg("log_probs"),
      py::arg("scores"), py::arg("streams"),
      "One stochastic-beam-search level (the level draft_rsd_s takes) for B sequences of up to\n"
      "W beams: nodes / log_probs / scores are [B, W] (beam i of sequence b: its tree node, -1\n"
      "for the root, path log probability and truncated perturbed value), draft_rows [B * W, V]\n"
      "the beams' warped draft rows, beam_counts [B] the live beams. Returns (next_parents,\n"
      "next_tokens, next_log_probs, next_scores, next_counts): the W best extensions of each\n"
      "sequence, padded with -1 / -inf past next_counts[b].");
}

void bind_drafted_tree(py::module_& m) {
  py::class_<DraftedTree>(m, "DraftedTree",
                          "A draft tree with the draft row each expanded node's children were\n"
                          "drawn from (what a tree verifier needs), path log probabilities and\n"
                          "the drafter's ranking scores.")
      .def_readonly("tree", &DraftedTree::tree, "The DraftTree (level order).")
      .def_readonly("vocab", &DraftedTree::vocab)
      .def("size", &DraftedTree::size)
      .def("__len__", &DraftedTree::size)
      .def("row_count", &DraftedTree::row_count, "Stored draft rows.")
      .def("has_row", &DraftedTree::has_row, py::arg("node"),
           "True when `node` (-1 = the root) was expanded and has a draft row.")
      .def(
          "row",
          [](const DraftedTree& d, std::int32_t node) {
            return output_from<float>(d.row(node), ArrayKind::numpy);
          },
          py::arg("node"), "The draft row `node`'s children were drawn from (float32 [V]).")
      .def_property_readonly("row_index", copy_of(&DraftedTree::row_index),
          "int32 [N + 1]: row_index[0] the root's row, row_index[i + 1] node i's (-1 = none).")
      .def_property_readonly(
          "rows",
          [](const DraftedTree& d) {
            Output<float> out({d.row_count(), d.vocab}, ArrayKind::numpy);
            std::copy(d.rows.begin(), d.rows.end(), out.values().begin());
            return out.result();
          },
          "The stored draft rows, float32 [row_count(), V] (a copy).")
      .def_property_readonly("log_probs", copy_of(&DraftedTree::log_probs),
          "Draft log probability of each node's root path (float32).")
      .def_property_readonly("scores", copy_of(&DraftedTree::scores),
          "The drafter's ranking value of each node (float32).")
      .def("__repr__", [](const DraftedTree& d) {
        return fmt::format("DraftedTree(size={}, rows={}, vocab={})", d.size(), d.row_count(),
                           d.vocab);
      });
}

void bind_tree_drafters(py::module_& m) {
  m.def(
      "draft_iid_chains",
      [](std::int32_t k, std::int32_t depth, std::int64_t vocab, py::handle draft_rows,
         const RandomStream& stream) {
        return drafted(draft_rows, [&](PyDraftRows& rows, DraftedTree& out) {
          draft_iid_chains(k, depth, vocab, rows, stream, out, thread_workspace());
        });
      },
      py::arg("k"), py::arg("depth"), py::arg("vocab"), py::arg("draft_rows"), py::arg("stream"),
      "SpecTr / SpecInfer drafting: k independent chains of `depth` tokens (node of chain c at\n"
      "depth d is (d - 1) * k + c). Node n's children use stream.at_node(n + 1).");
  m.def(
      "draft_rsd_c",
      [](const std::vector<std::int32_t>& branching, std::int64_t vocab, py::handle draft_rows,
         const RandomStream& stream) {
        return drafted(draft_rows, [&](PyDraftRows& rows, DraftedTree& out) {
          draft_rsd_c(branching, vocab, rows, stream, out, thread_workspace());
        });
      },
      py::arg("branching"), py::arg("vocab"), py::arg("draft_rows"), py::arg("stream"),
      "An RSD-C tree: each node at depth l gets branching[l] children drawn without\n"
      "replacement by Gumbel-top-k from its draft row (node n's children use\n"
      "stream.at_node(n + 1)).");
  m.def(
      "draft_rsd_s",
      [](std::int32_t width, std::int32_t depth, std::int64_t vocab, py::handle draft_rows,
         const RandomStream& stream) {
        return drafted(draft_rows, [&](PyDraftRows& rows, DraftedTree& out) {
          draft_rsd_s(width, depth, vocab, rows, stream, out, thread_workspace());
        });
      },
      py::arg("width"), py::arg("depth"), py::arg("vocab"), py::arg("draft_rows"),
      py::arg("stream"),
      "An RSD-S tree by stochastic beam search (beam width `width`, `depth` levels); sibling\n"
      "sets are samples without replacement from their parent's draft row.");

  py::enum_<BeamMode>(m, "BeamMode", "How beam_search keeps each level's beams.")
      .value("DETERMINISTIC", BeamMode::kDeterministic, "the W most probable extensions")
      .value("SAMPLING", BeamMode::kSampling, "W extensions sampled without replacement");

  py::class_<BeamSearchResult>(m, "BeamSearchResult", "The best beam of a beam search.")
      .def_property_readonly("tokens", copy_of(&BeamSearchResult::tokens),
          "The best sequence (int32).")
      .def_property_readonly("prefix_log_probs", copy_of(&BeamSearchResult::prefix_log_probs),
          "Draft log probability of tokens[0..i] (float32).")
      .def_property_readonly("nodes", copy_of(&BeamSearchResult::nodes),
          "The search-tree node of each token (int32).");

  m.def(
      "beam_search",
      [](std::int32_t width, std::int32_t length, std::int64_t vocab, py::handle draft_rows,
         BeamMode mode, const RandomStream& stream) {
        PyDraftRows rows(draft_rows_arg(draft_rows));
        DraftedTree search;
        BeamSearchResult best;
        {
          py::gil_scoped_release unlocked;
          beam_search({width, length, mode}, vocab, rows, stream, search, best, thread_workspace());
        }
        return py::make_tuple(std::move(search), std::move(best));
      },
      py::arg("width"), py::arg("length"), py::arg("vocab"), py::arg("draft_rows"), py::arg("mode"),
      py::arg("stream"),
      "Beam search (BeamMode.DETERMINISTIC) or beam sampling (BeamMode.SAMPLING) of `length`\n"
      "tokens: returns (search, best), the DraftedTree of every beam node and the\n"
      "BeamSearchResult of the most probable final beam.");
}

void bind_redrafter(py::module_& m) {
  py::class_<ReDrafterConfig>(m, "ReDrafterConfig", "The shape of a ReDrafter head.")
      .def(py::init([](std::int64_t hidden, std::int64_t exit_dim, std::int64_t vocab,
                       std::int32_t num_layers, bool rnn, std::int32_t top_k) {
             return ReDrafterConfig{hidden, exit_dim, vocab, num_layers, rnn, top_k};
           }),
           py::kw_only(), py::arg("hidden") = 0, py::arg("exit_dim") = 0, py::arg("vocab") = 0,
           py::arg("num_layers") = 1, py::arg("rnn") = true, py::arg("top_k") = 50)
      .def_readwrite("hidden", &ReDrafterConfig::hidden, "H, the target's hidden size.")
      .def_readwrite("exit_dim", &ReDrafterConfig::exit_dim,
                     "D, the residual blocks' width (D != 2H adds an input projection).")
      SPECDEC_FIELDS(ReDrafterConfig, vocab, num_layers, rnn)
      .def_readwrite("top_k", &ReDrafterConfig::top_k, "0 keeps every logit.")
      .def("__repr__", [](const ReDrafterConfig& c) {
        return fmt::format(
            "ReDrafterConfig(hidden={}, exit_dim={}, vocab={}, num_layers={}, "
            "rnn={}, top_k={})",
            c.hidden, c.exit_dim, c.vocab, c.num_layers, c.rnn ? "True" : "False", c.top_k);
      });

  py::enum_<io::TensorDType>(m, "TensorDType", "The element type of tensors written to safetensors.")
      .value("F32", io::TensorDType::kF32)
      .value("F16", io::TensorDType::kF16)
      .value("BF16", io::TensorDType::kBF16);

  py::class_<ReDrafterHead>(m, "ReDrafterHead",
                            "The ReDrafter recurrent draft head (the reference's conventions and\n"
                            "tensor names, so released checkpoints load).")
      .def_readonly("config", &ReDrafterHead::config)
      .def_static("random", &ReDrafterHead::random, py::arg("config"), py::arg("seed"),
                  py::arg("scale") = 0.5f,
                  "A head with weights ~ normal(0, scale^2) from a Philox stream keyed by `seed`.")
      .def("validate", &ReDrafterHead::validate,
           "Raises specdec.Error naming the first tensor whose shape disagrees with the config.")
      .def_property_readonly(
          "embedding", [](const ReDrafterHead& h) { return matrix_output(h.embedding); },
          "The target's input embedding table, float32 [V, H] (a copy).")
      .def_property_readonly(
          "vocab_proj", [](const ReDrafterHead& h) { return matrix_output(h.vocab_proj); },
          "The vocabulary projection, float32 [V, D] (a copy).")
      .def("__repr__", [](const ReDrafterHead& h) {
        return fmt::format("ReDrafterHead(hidden={}, exit_dim={}, vocab={}, num_layers={})",
                           h.config.hidden, h.config.exit_dim, h.config.vocab, h.config.num_layers);
      });

  m.def(
      "load_redrafter_head",
      [](const std::filesystem::path& path, py::handle embedding, std::int32_t top_k) {
        const Eigen::MatrixXf table = embedding_arg(embedding);
        py::gil_scoped_release unlocked;
        return io::load_redrafter_head(path, table, top_k);
      },
      py::arg("path"), py::arg("embedding") = py::none(), py::arg("top_k") = 50,
      "Reads a head from a safetensors file (tensor names of the reference module; `embedding`\n"
      "[V, H] overrides embed_tokens.weight).");
  m.def(
      "save_redrafter_head",
      [](const std::filesystem::path& path, const ReDrafterHead& head, io::TensorDType dtype) {
        py::gil_scoped_release unlocked;
        io::save_redrafter_head(path, head, dtype);
      },
      py::arg("path"), py::arg("head"), py::arg("dtype") = io::TensorDType::kF32,
      "Writes a head (embedding included) as a safetensors file.");
  m.def(
      "redrafter_head_from_tensors",
      [](const py::dict& tensors, py::handle embedding, std::int32_t top_k) {
        const io::TensorMap map = tensor_map(tensors);
        const Eigen::MatrixXf table = embedding_arg(embedding);
        return io::redrafter_head_from_tensors(map, table, top_k);
      },
      py::arg("tensors"), py::arg("embedding") = py::none(), py::arg("top_k") = 50,
      "A head from a dict of tensors named as in the reference module (e.g. a PyTorch\n"
      "state_dict); `embedding` [V, H] overrides embed_tokens.weight.");
  m.def(
      "redrafter_head_tensors",
      [](const ReDrafterHead& head) { return tensor_dict(io::redrafter_head_tensors(head)); },
      py::arg("head"), "The head's tensors under the reference names (float32 NumPy arrays).");

  m.def(
      "read_safetensors",
      [](const std::filesystem::path& path) {
        io::TensorMap map;
        {
          py::gil_scoped_release unlocked;
          map = io::read_safetensors(path);
        }
        return tensor_dict(map);
      },
      py::arg("path"),
      "Every tensor of a safetensors file (F32, F16 or BF16 stored) as a float32 NumPy array,\n"
      "by name.");
  m.def(
      "write_safetensors",
      [](const std::filesystem::path& path, const py::dict& tensors, io::TensorDType dtype) {
        const io::TensorMap map = tensor_map(tensors);
        py::gil_scoped_release unlocked;
        io::write_safetensors(path, map, dtype);
      },
      py::arg("path"), py::arg("tensors"), py::arg("dtype") = io::TensorDType::kF32,
      "Writes a dict of float arrays (NumPy, torch, ...) as a safetensors file, each stored as\n"
      "`dtype` (rounded to nearest even).");

  m.def(
      "redrafter_step",
      [](const ReDrafterHead& head, py::handle hidden, py::handle state, Token token) {
        const Array h = rows_f32_arg(hidden, "hidden", 1);
        const Array s = rows_f32_arg(state, "state", 1);
        Output<float> next_state(s.shape, kind_of(h, s));
        const auto state_in = s.span<float>("state");
        std::copy(state_in.begin(), state_in.end(), next_state.values().begin());
        Output<float> log_probs({head.config.vocab}, kind_of(h, s));
        {
          py::gil_scoped_release unlocked;
          redrafter_step(head, hidden_arg(h), next_state.values(), token, log_probs.values());
        }
        return py::make_tuple(next_state.result(), log_probs.result());
      },
      py::arg("head"), py::arg("hidden"), py::arg("state"), py::arg("token"),
      "One head step: returns (state after `token`, float32 [H]; the draft log-probabilities of\n"
      "the next token given the context hidden state, float32 [V]). `state` is not modified.");

  py::class_<ReDrafterBeams>(m, "ReDrafterBeams", "The reference beam search's beams.")
      .def_readonly("width", &ReDrafterBeams::width)
      .def_readonly("length", &ReDrafterBeams::length, "L, the init token included.")
      .def_property_readonly(
          "tokens",
          [](const ReDrafterBeams& b) {
            Output<Token> out({b.width, b.length}, ArrayKind::numpy);
            std::copy(b.tokens.begin(), b.tokens.end(), out.values().begin());
            return out.result();
          },
          "int32 [W, L]; column 0 is the init token.")
      .def_property_readonly(
          "log_probs",
          [](const ReDrafterBeams& b) {
            const auto vocab = b.width * (b.length - 1) == 0
                                   ? 0
                                   : static_cast<std::int64_t>(b.log_probs.size()) /
                                         (static_cast<std::int64_t>(b.width) * (b.length - 1));
            Output<float> out({b.width, b.length - 1, vocab}, ArrayKind::numpy);
            std::copy(b.log_probs.begin(), b.log_probs.end(), out.values().begin());
            return out.result();
          },
          "float32 [W, L - 1, V]: [k, j] is the row that produced tokens[k, j + 1].")
      .def_property_readonly("beam_log_probs", copy_of(&ReDrafterBeams::beam_log_probs),
          "The beams' joint log-probabilities, decreasing (float32 [W]).");

  m.def(
      "redrafter_beam_search",
      [](const ReDrafterHead& head, py::handle hidden, Token init_token, std::int32_t width,
         std::int32_t length) {
        const Array h = rows_f32_arg(hidden, "hidden", 1);
        ReDrafterBeams out;
        {
          py::gil_scoped_release unlocked;
          redrafter_beam_search(head, hidden_arg(h), init_token, width, length, out);
        }
        return out;
      },
      py::arg("head"), py::arg("hidden"), py::arg("init_token"), py::arg("width"),
      py::arg("length"),
      "The reference's deterministic beam search through the head: `width` beams of `length`\n"
      "tokens starting with init_token.");
  m.def(
      "redrafter_stochastic_beam_search",
      [](const ReDrafterHead& head, py::handle hidden, Token init_token, std::int32_t width,
         std::int32_t depth, const RandomStream& stream) {
        const Array h = rows_f32_arg(hidden, "hidden", 1);
        DraftedTree out;
        {
          py::gil_scoped_release unlocked;
          redrafter_stochastic_beam_search(head, hidden_arg(h), init_token, width, depth, stream,
                                           out, thread_workspace());
        }
        return out;
      },
      py::arg("head"), py::arg("hidden"), py::arg("init_token"), py::arg("width"), py::arg("depth"),
      py::arg("stream"),
      "Exact ReDrafter drafting: stochastic beam search through the head below init_token\n"
      "(verify with recursive rejection sampling).");
}

}  // namespace

void bind_draft(py::module_& m) {
  bind_parts(m, {bind_sampling, bind_drafted_tree, bind_tree_drafters, bind_redrafter});
}

}  // namespace specdec::python
