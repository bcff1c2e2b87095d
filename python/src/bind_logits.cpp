// SPDX-License-Identifier: MIT
// Verification of one sequence straight from logits (verify/chain_logits.hpp, block_logits.hpp,
// tree_logits.hpp, target_only_logits.hpp): the row-based calls of bind_verify.cpp with a Warp in
// place of the warped rows. The batch from logits is in bind_batch.cpp.
#include <fmt/format.h>

#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/verify/block_logits.hpp"
#include "specdec/verify/chain_logits.hpp"
#include "specdec/verify/target_only_logits.hpp"
#include "specdec/verify/tree_logits.hpp"

namespace specdec::python {

namespace {

/// Throws unless `rows` (a matrix named `name`) has `count` rows, as L draft tokens need.
void require_rows(const Array& rows, std::string_view name, std::int64_t count,
                  const Array& tokens) {
  if (rows.dim(0) != count) {
    throw Error(std::string(name), fmt::format("has {} rows; draft_tokens has {} tokens, so {} "
                                               "rows are expected",
                                               rows.dim(0), tokens.size(), count));
  }
}

/// Throws unless `a` has `vocab` columns like target_logits.
void require_logit_columns(const Array& a, std::string_view name, std::int64_t vocab) {
  if (a.dim(1) != vocab) {
    throw Error(std::string(name),
                fmt::format("has {} columns; expected {} like target_logits", a.dim(1), vocab));
  }
}

/// Which walk chain_with_draft runs.
enum class ChainWalk : std::uint8_t { chain, block };

/// A chain from logits with draft logits, by `walk`: (verdict, emitted tokens).
py::tuple chain_with_draft(ChainWalk walk, const Warp& warp, py::handle target_object,
                           py::handle draft_object, py::handle tokens_object,
                           const RandomStream& stream) {
  const Array target = rows_arg(target_object, "target_logits", 2);
  const Array draft = rows_arg(draft_object, "draft_logits", 2);
  const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
  require_rows(target, "target_logits", tokens.size() + 1, tokens);
  require_rows(draft, "draft_logits", tokens.size(), tokens);
  const std::int64_t vocab = target.dim(1);
  require_logit_columns(draft, "draft_logits", vocab);
  const auto x = tokens.span<Token>("draft_tokens");
  std::vector<Token> out(x.size() + 1);
  const ChainVerdict verdict = with_rows(
      {{target, "target_logits"}, {draft, "draft_logits"}}, [&]<class T>(Rows<T> t, Rows<T> d) {
        if (walk == ChainWalk::block) {
          return verify_block_logits<T>(warp, t, d, x, vocab, stream, out, thread_workspace());
        }
        return verify_chain_logits<T>(warp, t, d, x, vocab, stream, out, thread_workspace());
      });
  return verdict_and(verdict, out, verdict.emitted, kind_of(target, draft, tokens));
}

/// Binds a chain from logits with draft logits (`walk`) under `name`.
void def_chain_logits(py::module_& m, const char* name, ChainWalk walk, const char* doc) {
  m.def(
      name,
      [walk](const Warp& warp, py::handle target_object, py::handle draft_object,
             py::handle tokens_object, const RandomStream& stream) {
        return chain_with_draft(walk, warp, target_object, draft_object, tokens_object, stream);
      },
      py::arg("warp"), py::arg("target_logits"), py::arg("draft_logits"), py::arg("draft_tokens"),
      py::arg("stream"), doc);
}

}  // namespace

void bind_logits(py::module_& m) {
  def_chain_logits(
      m, "verify_chain_logits", ChainWalk::chain,
      "verify_chain(Rejection(), ...) on the rows `warp` makes of logits, without writing them:\n"
      "the same tokens, draws and verdict as warp_logits on every row then verify_chain.\n"
      "target_logits: [L + 1, V], draft_logits: [L, V] (float32, float16 or bfloat16, the same\n"
      "dtype, read in place). Returns (ChainVerdict, tokens) as verify_chain does.");
  def_chain_logits(
      m, "verify_block_logits", ChainWalk::block,
      "verify_block on the rows `warp` makes of logits: the same tokens, draws and verdict as\n"
      "warp_logits on every row then verify_block. Logits as verify_chain_logits takes them.\n"
      "Returns (ChainVerdict, tokens).");

  m.def(
      "verify_chain_target_only_logits",
      [](const Warp& warp, py::handle target_object, py::handle tokens_object,
         const RandomStream& stream) {
        const Array target = rows_arg(target_object, "target_logits", 2);
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        require_rows(target, "target_logits", tokens.size() + 1, tokens);
        const std::int64_t vocab = target.dim(1);
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        std::vector<Token> out(draft_tokens.size() + 1);
        const ChainVerdict verdict = with_rows({{target, "target_logits"}}, [&]<class T>(Rows<T> t) {
          return verify_chain_target_only_logits<T>(warp, t, draft_tokens, vocab, stream, out,
                                                    thread_workspace());
        });
        return verdict_and(verdict, out, verdict.emitted, kind_of(target, tokens));
      },
      py::arg("warp"), py::arg("target_logits"), py::arg("draft_tokens"), py::arg("stream"),
      "verify_chain_target_only on the rows `warp` makes of logits, without writing them: the\n"
      "same tokens, draws and verdict as warp_logits on every row then\n"
      "verify_chain_target_only. Each position reads p(x) alone; a rejection draws once from\n"
      "the entries the row keeps with x removed. target_logits: [L + 1, V] (float32, float16 or\n"
      "bfloat16, read in place). Returns (ChainVerdict, tokens).");

  m.def(
      "verify_tree_logits",
      [](py::handle rule_object, const Warp& warp, py::handle tree_object, py::handle target_object,
         py::handle draft_object, const RandomStream& stream) {
        const Rule rule = rule_arg(rule_object);
        const DraftTree& tree = tree_arg(tree_object);
        const Array target = rows_arg(target_object, "target_logits", 2);
        const Array draft = rows_arg(draft_object, "draft_logits", 2);
        const std::int64_t vocab = target.dim(1);
        require_logit_columns(draft, "draft_logits", vocab);
        std::vector<std::int32_t> accepted(tree.size() + 1);
        const TreeVerdict verdict = with_rows(
            {{target, "target_logits"}, {draft, "draft_logits"}}, [&]<class T>(Rows<T> t, Rows<T> d) {
              return verify_tree_logits<T>(rule, warp, tree.view(), {t, d}, vocab, stream, accepted,
                                           thread_workspace());
            });
        return verdict_and(verdict, accepted, verdict.accepted, kind_of(target, draft));
      },
      py::arg("rule"), py::arg("warp"), py::arg("tree"), py::arg("target_logits"),
      py::arg("draft_logits"), py::arg("stream"),
      "verify_tree on the rows `warp` makes of logits, for every rule: the same walk, draws and\n"
      "verdict as warp_logits on every row then verify_tree. target_logits and draft_logits:\n"
      "[N + 1, V] (the same dtype), row 0 at the root, row i + 1 after node i. A node's rows\n"
      "are written only when its rule needs them. Returns (TreeVerdict, accepted_nodes).");

  m.def(
      "verify_tree_target_only_logits",
      [](const Warp& warp, py::handle tree_object, py::handle target_object,
         const RandomStream& stream) {
        const DraftTree& tree = tree_arg(tree_object);
        const Array target = rows_arg(target_object, "target_logits", 2);
        const std::int64_t vocab = target.dim(1);
        std::vector<std::int32_t> accepted(tree.size() + 1);
        const TreeVerdict verdict = with_rows({{target, "target_logits"}}, [&]<class T>(Rows<T> t) {
          return verify_tree_target_only_logits<T>(warp, tree.view(), t, vocab, stream, accepted,
                                                   thread_workspace());
        });
        return verdict_and(verdict, accepted, verdict.accepted, kind_of(target));
      },
      py::arg("warp"), py::arg("tree"), py::arg("target_logits"), py::arg("stream"),
      "verify_tree_target_only on the rows `warp` makes of logits: the same walk, draws and\n"
      "verdict as warp_logits on every row then verify_tree_target_only. target_logits:\n"
      "[N + 1, V], row 0 at the root, row i + 1 after node i. Returns (TreeVerdict,\n"
      "accepted_nodes).");
}

}  // namespace specdec::python
