// SPDX-License-Identifier: MIT
// Draft trees, masks, positions, KV compaction, ReDrafter's beam compression and the engine
// exporters. Trees are DraftTree objects; every function returns fresh NumPy arrays (int32 ids and
// positions, uint8 dense masks, uint32 packed masks), except where an input array is a torch
// tensor: then the outputs are torch tensors too.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <optional>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/tree/tree.hpp"

namespace specdec::python {

namespace {

DraftTree make_tree(py::handle tokens, py::handle parents) {
  DraftTree tree;
  if (tokens.is_none() && parents.is_none()) return tree;
  const Array token_array = token_arg(tokens, "tokens", 1);
  const Array parent_array = int32_arg(parents, "parents", 1);
  const auto token_values = token_array.span<Token>("tokens");
  const auto parent_values = parent_array.span<std::int32_t>("parents");
  if (parent_values.size() != token_values.size()) {
    throw Error("parents", fmt::format("has {} entries; tokens has {}", parent_values.size(),
                                       token_values.size()));
  }
  tree.reserve(token_values.size());
  for (std::size_t i = 0; i < token_values.size(); ++i) {
    if (parent_values[i] < -1 || parent_values[i] >= static_cast<std::int32_t>(i)) {
      throw Error(
          fmt::format("parents[{}]", i),
          fmt::format("{} must be -1 (root) or an earlier node (< {})", parent_values[i], i));
    }
    tree.add(token_values[i], parent_values[i]);
  }
  return tree;
}

std::int64_t as_size(std::size_t n) { return static_cast<std::int64_t>(n); }

/// W row-major beams of equal length from a 2-D [W, L] token array; returns the flat tokens and W.
std::pair<Array, std::int32_t> beams_arg(py::handle beams) {
  Array array = token_arg(beams, "beams", 2);
  if (array.dim(0) > INT32_MAX) {
    throw Error("beams", fmt::format("has {} beams; at most {}", array.dim(0), INT32_MAX));
  }
  return {std::move(array), static_cast<std::int32_t>(array.dim(0))};
}

void bind_draft_tree(py::module_& m) {
  py::class_<DraftTree>(
      m, "DraftTree",
      "A draft tree in level order: node i holds tokens[i], its parent parents[i]\n"
      "(-1 for a child of the root, the last committed token) and its depth\n"
      "(1 for children of the root).")
      .def(py::init(&make_tree), py::arg("tokens") = py::none(), py::arg("parents") = py::none(),
           "A tree from tokens and parents (each parent an earlier node or -1); depths are\n"
           "computed. With no arguments, an empty tree to `add` to.")
      .def("add", &DraftTree::add, py::arg("token"), py::arg("parent"),
           "Appends a child of `parent` (-1 for the root) and returns its node id.")
      .def("size", &DraftTree::size)
      .def("__len__", &DraftTree::size)
      .def("max_depth", &DraftTree::max_depth, "The deepest level (0 for an empty tree).")
      .def("validate", &DraftTree::validate, py::arg("vocab"),
           "Raises specdec.Error unless the tree is well formed, in level order, with every\n"
           "token in [0, vocab).")
      .def_property_readonly("tokens", copy_of(&DraftTree::tokens), "The tokens (a copy, int32).")
      .def_property_readonly("parents", copy_of(&DraftTree::parents),
          "The parents (a copy, int32; -1 for children of the root).")
      .def_property_readonly("depths", copy_of(&DraftTree::depths),
          "The depths (a copy, int32; 1 for children of the root).")
      .def("__eq__",
           [](const DraftTree& a, const DraftTree& b) {
             return a.tokens == b.tokens && a.parents == b.parents && a.depths == b.depths;
           })
      .def("__repr__", [](const DraftTree& t) {
        return fmt::format("DraftTree(tokens=[{}], parents=[{}])", fmt::join(t.tokens, ", "),
                           fmt::join(t.parents, ", "));
      });
}

/// A function's Python name and docstring.
struct Named {
  const char* name;
  const char* doc;
};

/// Binds the ancestor masks and position ids of a structure of n nodes (`argument`: a DraftTree or
/// CompressedBeams): `dense` returns uint8 [n, n] as fill_dense writes it, `packed` uint32
/// [n, ceil(n / 32)] as fill_packed does, `positions` int32 [n] after a context of
/// `context_length` tokens as fill_positions does; each is filled without the GIL.
template <class S, class FillDense, class FillPacked, class FillPositions>
void def_masks_and_positions(py::module_& m, const char* argument, Named dense, Named packed,
                             Named positions, FillDense fill_dense, FillPacked fill_packed,
                             FillPositions fill_positions) {
  m.def(
      dense.name,
      [fill_dense](const S& s) {
        const auto n = static_cast<std::int64_t>(s.size());
        return filled<std::uint8_t>({n, n}, [&](auto out) { fill_dense(s, out); });
      },
      py::arg(argument), dense.doc);
  m.def(
      packed.name,
      [fill_packed](const S& s) {
        const auto n = static_cast<std::int64_t>(s.size());
        return filled<std::uint32_t>({n, packed_mask_words(s.size())},
                                     [&](auto out) { fill_packed(s, out); });
      },
      py::arg(argument), packed.doc);
  m.def(
      positions.name,
      [fill_positions](const S& s, std::int32_t context_length) {
        return filled<std::int32_t>({static_cast<std::int64_t>(s.size())},
                                    [&](auto out) { fill_positions(s, context_length, out); });
      },
      py::arg(argument), py::arg("context_length"), positions.doc);
}

void bind_masks_and_paths(py::module_& m) {
  def_masks_and_positions<DraftTree>(
      m, "tree",
      {"build_dense_mask",
       "The dense ancestor mask, uint8 [N, N]: mask[i, j] = 1 when node j is node i or one of its\n"
       "ancestors. The committed context (root included) is visible to every node and is not\n"
       "part of the matrix: an engine prepends its context columns."},
      {"build_packed_mask",
       "The packed ancestor mask, uint32 [N, ceil(N / 32)]: column j of the dense mask is bit\n"
       "j % 32 (least significant first) of word j // 32."},
      {"tree_positions",
       "Position ids of the nodes, int32 [N]: context_length + depth - 1. context_length counts\n"
       "the committed tokens, the root (at context_length - 1) included."},
      [](const DraftTree& tree, auto out) { build_dense_mask(tree, out); },
      [](const DraftTree& tree, auto out) { build_packed_mask(tree, out); },
      [](const DraftTree& tree, std::int32_t context, auto out) {
        tree_positions(tree, context, out);
      });
  m.def(
      "engine_positions",
      [](const DraftTree& tree, std::int32_t context_length) {
        return filled<std::int32_t>({engine_tree_size(tree)}, [&](auto out) {
          engine_positions(tree, context_length, out);
        });
      },
      py::arg("tree"), py::arg("context_length"),
      "Position ids of the N + 1 engine slots, int32: the root (slot 0) at context_length - 1,\n"
      "node i (slot i + 1) as tree_positions gives it.");
  m.def(
      "kv_compaction",
      [](const DraftTree& tree, std::int32_t context_length, py::handle accepted) {
        const Array path = int32_arg(accepted, "accepted", 1);
        const auto ids = path.span<std::int32_t>("accepted");
        Output<std::int32_t> source({as_size(ids.size())}, kind_of(path));
        Output<std::int32_t> destination({as_size(ids.size())}, kind_of(path));
        const auto moves =
            kv_compaction(tree, context_length, ids, source.values(), destination.values());
        return py::make_tuple(source.result(), destination.result(), moves);
      },
      py::arg("tree"), py::arg("context_length"), py::arg("accepted"),
      "The KV-cache moves that keep an accepted root path: returns (source, destination, moves).\n"
      "The tree's N nodes were appended to the cache in node order (node i at slot\n"
      "context_length + i); accepted node accepted[t] must end at slot context_length + t. Copy\n"
      "slot source[t] to destination[t] in increasing t (never overwrites a slot still to be\n"
      "read); `moves` counts the entries with source != destination.");
  m.def(
      "pack_accepted_paths",
      [](py::handle trees, py::handle context_lengths, const py::sequence& accepted) {
        const auto tree_list = trees_arg(trees);
        const Array lengths = int32_arg(context_lengths, "context_lengths", 1);
        std::vector<Array> paths;
        std::vector<std::span<const std::int32_t>> spans;
        for (std::size_t b = 0; b < accepted.size(); ++b) {
          const auto name = fmt::format("accepted[{}]", b);
          paths.push_back(int32_arg(accepted[b], name, 1));
          spans.push_back(paths.back().span<std::int32_t>(name));
        }
        AcceptedPaths out;
        pack_accepted_paths(tree_list, lengths.span<std::int32_t>("context_lengths"), spans, out);
        return py::make_tuple(output_from<std::int32_t>(out.offsets, kind_of(lengths)),
                              output_from<std::int32_t>(out.slots, kind_of(lengths)));
      },
      py::arg("trees"), py::arg("context_lengths"), py::arg("accepted"),
      "The accepted paths of a batch in CSR form (TensorRT-LLM's layout): returns (offsets,\n"
      "slots), the slots of row b being slots[offsets[b]:offsets[b + 1]], each\n"
      "context_lengths[b] + node id, in path order.");
  m.def(
      "leaves",
      [](const DraftTree& tree) {
        return output_from<std::int32_t>(leaves(tree), ArrayKind::numpy);
      },
      py::arg("tree"), "The nodes without children, in increasing id (int32).");
  m.def(
      "children_of",
      [](const DraftTree& tree, std::int32_t node) {
        return output_from<std::int32_t>(children_of(tree, node), ArrayKind::numpy);
      },
      py::arg("tree"), py::arg("node"),
      "The children of `node` (-1 for the root) in sampling order (int32).");
  m.def(
      "path_to_node",
      [](const DraftTree& tree, std::int32_t node) {
        return output_from<std::int32_t>(path_to_node(tree, node), ArrayKind::numpy);
      },
      py::arg("tree"), py::arg("node"),
      "The root-to-node path of `node` (int32, depths[node] ids, the last `node` itself; the\n"
      "root is not a node).");
  m.def(
      "root_to_leaf_paths",
      [](const DraftTree& tree, std::optional<std::int32_t> rows,
         std::optional<std::int32_t> width) {
        const auto r = rows.value_or(count_leaves(tree));
        const auto w = width.value_or(tree.max_depth());
        if (r < 0) throw Error("rows", fmt::format("{} must be >= 0", r));
        if (w < 0) throw Error("width", fmt::format("{} must be >= 0", w));
        Output<std::int32_t> out({r, w}, ArrayKind::numpy);
        root_to_leaf_paths(tree, r, w, out.values());
        return out.result();
      },
      py::arg("tree"), py::arg("rows") = py::none(), py::arg("width") = py::none(),
      "Root-to-leaf paths, int32 [rows, width]: row r is the path of the r-th leaf (as `leaves`\n"
      "orders them) padded with -1; rows past the last leaf are all -1. By default one row per\n"
      "leaf and the deepest path's width.");
}

void bind_beams(py::module_& m) {
  py::class_<CompressedBeams>(
      m, "CompressedBeams",
      "W equal-length beams with their shared prefixes stored once (ReDrafter's dynamic tree\n"
      "attention), as compress_beams builds them. Compressed nodes are in (beam, position)\n"
      "order; tokens[unpacker[j, k]] == beams[j, k].")
      .def_readonly("width", &CompressedBeams::width, "W, the number of beams.")
      .def_readonly("length", &CompressedBeams::length, "L, tokens per beam.")
      .def("size", &CompressedBeams::size, "n, the number of compressed nodes.")
      .def("__len__", &CompressedBeams::size)
      .def_property_readonly(
          "prefix_match",
          [](const CompressedBeams& b) {
            Output<std::int32_t> out({b.width, b.length}, ArrayKind::numpy);
            std::copy(b.prefix_match.begin(), b.prefix_match.end(), out.values().begin());
            return out.result();
          },
          "int32 [W, L], as prefix_match returns it.")
      .def_property_readonly("tokens", copy_of(&CompressedBeams::tokens),
          "The n compressed tokens (int32).")
      .def_property_readonly("source", copy_of(&CompressedBeams::source),
          "The flat beam index j * L + k of each compressed node (ReDrafter's\n"
          "packed_token_indices, int32).")
      .def_property_readonly("offsets", copy_of(&CompressedBeams::offsets),
          "The position k of each compressed node in its beam (int32).")
      .def_property_readonly("parents", copy_of(&CompressedBeams::parents),
          "The compressed id of each node's parent, -1 at k = 0 (int32).")
      .def_property_readonly(
          "unpacker",
          [](const CompressedBeams& b) {
            Output<std::int32_t> out({b.width, b.length}, ArrayKind::numpy);
            std::copy(b.unpacker.begin(), b.unpacker.end(), out.values().begin());
            return out.result();
          },
          "int32 [W, L]: the compressed node holding beams[j, k] (so packed_rows[unpacker] maps\n"
          "per-node rows back to the beams).")
      .def("__repr__", [](const CompressedBeams& b) {
        return fmt::format("CompressedBeams(width={}, length={}, size={})", b.width, b.length,
                           b.size());
      });

  m.def(
      "prefix_match",
      [](py::handle beams, std::int64_t vocab) {
        const auto [array, width] = beams_arg(beams);
        Output<std::int32_t> out(array.shape, ArrayKind::numpy);
        prefix_match(array.span<Token>("beams"), width, vocab, out.values());
        return out.result();
      },
      py::arg("beams"), py::arg("vocab"),
      "ReDrafter's prefix match of W beams (int tokens [W, L] in [0, vocab)): int32 [W, L] whose\n"
      "entry [i, k] is the smallest beam index sharing beam i's first k + 1 tokens.");
  m.def(
      "compress_beams",
      [](py::handle beams, std::int64_t vocab) {
        const auto [array, width] = beams_arg(beams);
        CompressedBeams out;
        compress_beams(array.span<Token>("beams"), width, vocab, out);
        return out;
      },
      py::arg("beams"), py::arg("vocab"),
      "Compresses W beams (int tokens [W, L] in [0, vocab)): shared prefixes stored once.");
  def_masks_and_positions<CompressedBeams>(
      m, "beams",
      {"compressed_dense_mask",
       "uint8 [n, n]: row r has 1 at compressed node c when c is r or an ancestor of r."},
      {"compressed_packed_mask",
       "The packed form of compressed_dense_mask, uint32 [n, ceil(n / 32)]."},
      {"compressed_positions",
       "Position ids of the compressed nodes, int32 [n]: context_length + offsets (the beams'\n"
       "first tokens sit at context_length)."},
      [](const CompressedBeams& beams, auto out) { compressed_dense_mask(beams, out); },
      [](const CompressedBeams& beams, auto out) { compressed_packed_mask(beams, out); },
      [](const CompressedBeams& beams, std::int32_t context, auto out) {
        compressed_positions(beams, context, out);
      });
  m.def(
      "unpack_beams",
      [](const CompressedBeams& beams, py::handle packed) -> py::object {
        const Array values = array_arg(packed, "packed");
        require_host(values, "packed");
        require_ndim(values, "packed", 1);
        const std::vector<std::int64_t> shape{beams.width, beams.length};
        if (values.dtype == DType::float32) {
          Output<float> out(shape, kind_of(values));
          unpack_beams<float>(beams, values.span<float>("packed"), out.values());
          return out.result();
        }
        const Array ints = int32_arg(packed, "packed", 1);
        Output<std::int32_t> out(shape, kind_of(ints));
        unpack_beams<std::int32_t>(beams, ints.span<std::int32_t>("packed"), out.values());
        return out.result();
      },
      py::arg("beams"), py::arg("packed"),
      "Maps one value per compressed node (float32, or integers as int32) back to the beams:\n"
      "[W, L] with out[j, k] = packed[unpacker[j, k]]. For rows per node (logits, hidden\n"
      "states) index them with `beams.unpacker` instead.");
  m.def(
      "compressed_to_draft_tree",
      [](const CompressedBeams& beams) {
        DraftTree tree;
        std::vector<std::int32_t> node_of(static_cast<std::size_t>(beams.size()));
        compressed_to_draft_tree(beams, tree, node_of);
        return py::make_tuple(tree, output_from<std::int32_t>(node_of, ArrayKind::numpy));
      },
      py::arg("beams"),
      "The compressed beams as a level-order DraftTree: returns (tree, node_of), node_of[r] the\n"
      "tree node of compressed node r. Beam position k becomes depth k + 1.");
}

void bind_exporters(py::module_& m) {
  m.def(
      "export_trtllm",
      [](const DraftTree& tree, std::optional<std::int32_t> path_rows,
         std::optional<std::int32_t> path_width) {
        const auto rows = path_rows.value_or(trtllm::path_rows(tree));
        const auto width = path_width.value_or(trtllm::path_width(tree));
        if (rows < 0) throw Error("path_rows", fmt::format("{} must be >= 0", rows));
        if (width < 0) throw Error("path_width", fmt::format("{} must be >= 0", width));
        const auto slots = static_cast<std::int64_t>(engine_tree_size(tree));
        Output<std::int32_t> mask({slots, trtllm::mask_words(tree)}, ArrayKind::numpy);
        Output<std::int32_t> offsets({slots}, ArrayKind::numpy);
        Output<std::int32_t> paths({rows, width}, ArrayKind::numpy);
        {
          py::gil_scoped_release unlocked;
          trtllm::export_tree(tree, mask.values(), offsets.values(), rows, width, paths.values());
        }
        return py::make_tuple(mask.result(), offsets.result(), paths.result());
      },
      py::arg("tree"), py::arg("path_rows") = py::none(), py::arg("path_width") = py::none(),
      "TensorRT-LLM's tree layout over the N + 1 slots (slot 0 the root): returns (packed_mask\n"
      "int32 [N + 1, ceil((N + 1) / 32)], position_offsets int32 [N + 1] (depths, 0 for the\n"
      "root), paths int32 [path_rows, path_width] (slot paths from 0, padded with -1)). By\n"
      "default one path row per leaf and the deepest path's width (max_depth + 1).");
  m.def(
      "export_flashinfer_mask",
      [](const DraftTree& tree, std::int32_t context_length, bool include_root) {
        if (context_length < 1) {
          throw Error(
              "context_length",
              fmt::format("{} must be >= 1 (the root is a committed token)", context_length));
        }
        Output<std::uint8_t> out(
            {static_cast<std::int64_t>(flashinfer::mask_bytes(tree, context_length, include_root))},
            ArrayKind::numpy);
        {
          py::gil_scoped_release unlocked;
          flashinfer::export_mask(tree, context_length, include_root, out.values());
        }
        return out.result();
      },
      py::arg("tree"), py::arg("context_length"), py::arg("include_root") = false,
      "FlashInfer's custom mask of one sequence, bit-packed as segment_packbits(...,\n"
      "bitorder='little') makes it (uint8): the boolean [qo_len, kv_len] matrix with kv_len =\n"
      "context_length + N (context columns, then node i at context_length + i) and qo_len =\n"
      "N (+ 1 with include_root: row 0 is then the root).");
  m.def(
      "export_flashinfer_masks",
      [](py::handle trees, py::handle context_lengths, bool include_root) {
        const auto tree_list = trees_arg(trees);
        const Array lengths = int32_arg(context_lengths, "context_lengths", 1);
        const auto length_values = lengths.span<std::int32_t>("context_lengths");
        const auto bytes = flashinfer::batch_mask_bytes(tree_list, length_values, include_root);
        Output<std::uint8_t> out({static_cast<std::int64_t>(bytes)}, ArrayKind::numpy);
        Output<std::int32_t> indptr({as_size(tree_list.size()) + 1}, kind_of(lengths));
        {
          py::gil_scoped_release unlocked;
          flashinfer::export_masks(tree_list, length_values, include_root, out.values(),
                                   indptr.values());
        }
        return py::make_tuple(out.result(), indptr.result());
      },
      py::arg("trees"), py::arg("context_lengths"), py::arg("include_root") = false,
      "The FlashInfer masks of a batch: returns (mask uint8, mask_indptr int32 [B + 1]),\n"
      "sequence b's packed mask (as flashinfer::export_mask) in mask[mask_indptr[b]:\n"
      "mask_indptr[b + 1]].");
  m.def(
      "export_sglang",
      [](const DraftTree& tree, std::int64_t index_base) {
        const auto slots = static_cast<std::int64_t>(engine_tree_size(tree));
        Output<std::int64_t> index({slots}, ArrayKind::numpy);
        Output<std::int64_t> next_token({slots}, ArrayKind::numpy);
        Output<std::int64_t> next_sibling({slots}, ArrayKind::numpy);
        sglang::export_tree(tree, index_base, index.values(), next_token.values(),
                            next_sibling.values());
        return py::make_tuple(index.result(), next_token.result(), next_sibling.result());
      },
      py::arg("tree"), py::arg("index_base") = 0,
      "SGLang's retrieve arrays over the N + 1 slots (slot 0 the root): returns\n"
      "(retrieve_index, retrieve_next_token, retrieve_next_sibling), int64 [N + 1] each: the\n"
      "slot's flattened index index_base + t, its first child's slot and its next sibling's\n"
      "slot (-1 for none).");
}

/// Integer links (int32 or int64) of `ndim` = 1 dimension on the host, as int64.
std::vector<std::int64_t> links_arg(py::handle obj, std::string_view name) {
  const Array a = array_arg(obj, name);
  require_host(a, name);
  require_ndim(a, name, 1);
  if (a.dtype == DType::int64) {
    const auto values = a.span<std::int64_t>(name);
    return {values.begin(), values.end()};
  }
  if (a.dtype == DType::int32 || a.size() == 0) {
    const auto values =
        a.size() == 0 ? std::span<const std::int32_t>{} : a.span<std::int32_t>(name);
    return {values.begin(), values.end()};
  }
  throw Error(std::string(name),
              fmt::format("has dtype {}; expected int64 or int32", dtype_name(a.dtype)));
}

void bind_sibling_lists(py::module_& m) {
  m.def(
      "parents_from_sibling_lists",
      [](py::handle first_object, py::handle next_object) {
        const auto first = links_arg(first_object, "first_child");
        const auto next = links_arg(next_object, "next_sibling");
        const auto n = static_cast<std::int64_t>(first.empty() ? 0 : first.size() - 1);
        Output<std::int32_t> parents({n}, ArrayKind::numpy);
        Output<std::int32_t> slots({n}, ArrayKind::numpy);
        parents_from_sibling_lists({first, next}, parents.values(), slots.values());
        return py::make_tuple(parents.result(), slots.result());
      },
      py::arg("first_child"), py::arg("next_sibling"),
      "First-child / next-sibling links over N + 1 slots (slot 0 the root, -1 for none; SGLang's\n"
      "retrive_next_token and retrive_next_sibling of one sequence) as a tree in level order:\n"
      "returns (parents, slots), int32 [N] each: node k sits at slot slots[k], its parent is\n"
      "parents[k] (-1 for a child of the root); children keep their sibling order. Tokens\n"
      "follow the slots (tokens = candidates[slots]). sglang::export_tree goes back. Raises\n"
      "specdec.Error naming the link for out-of-range links, cycles, a slot with two parents\n"
      "or one the root does not reach.");
}

}  // namespace

void bind_tree(py::module_& m) {
  bind_parts(m, {bind_draft_tree, bind_masks_and_paths, bind_beams,
                 bind_exporters, bind_sibling_lists});
}

}  // namespace specdec::python
