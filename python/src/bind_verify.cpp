// SPDX-License-Identifier: MIT
// Verification of one node, of chains, blocks, trees and MTAD, the exact output distribution of
// a rule and the row helpers. Batches are in bind_batch.cpp, the rule classes in bind_rules.cpp.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <array>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "args.hpp"
#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/verify/verify.hpp"

namespace specdec::python {

namespace {

// ---- arguments ----------------------------------------------------------------------------

/// Candidates: a 1-D token array, a list, or a single int.
Array candidates_arg(py::handle obj, std::string_view name) {
  Array a = token_arg(obj, name);
  if (a.ndim() > 1) {
    throw Error(std::string(name), fmt::format("has {} dimensions; expected 1", a.ndim()));
  }
  return a;
}

/// The candidates argument read once: the array and its tokens.
struct Candidates {
  Array array;
  std::span<const Token> tokens;
  explicit Candidates(py::handle obj)
      : array(candidates_arg(obj, "candidates")), tokens(array.span<Token>("candidates")) {}
};

/// Reads the 1-D rows `target` and `draft` (one dtype) and returns f(target, draft) without the
/// GIL: what most bindings of one node do.
template <class F>
decltype(auto) on_rows(py::handle target_object, py::handle draft_object, F&& f) {
  const Array target = rows_arg(target_object, "target", 1);
  const Array draft = rows_arg(draft_object, "draft", 1);
  return with_rows({{target, "target"}, {draft, "draft"}}, f);
}

/// on_rows for the bindings that read a target row alone.
template <class F>
decltype(auto) on_target(py::handle target_object, F&& f) {
  const Array target = rows_arg(target_object, "target", 1);
  return with_rows({{target, "target"}}, f);
}

template <class T>
std::span<const T> span_or_empty(const std::optional<Array>& a, std::string_view name) {
  return a ? a->span<T>(name) : std::span<const T>{};
}
/// An optional row for the float32-only entry points (exact distributions).
std::optional<Array> optional_f32(py::handle obj, std::string_view name) {
  if (obj.is_none()) return std::nullopt;
  return rows_f32_arg(obj, name, 1);
}

/// Throws unless a chain's rows agree with its L draft tokens: L + 1 target rows, L draft rows.
void require_chain_rows(const Array& target, const Array& draft, const Array& tokens) {
  const auto expect = [&](const Array& rows, std::string_view name, std::int64_t count) {
    if (rows.dim(0) != count) {
      throw Error(std::string(name), fmt::format("has {} rows; draft_tokens has {} tokens, so {} "
                                                 "rows are expected", rows.dim(0), tokens.size(), count));
    }
  };
  expect(target, "target_rows", tokens.size() + 1);
  expect(draft, "draft_rows", tokens.size());
}

/// Throws unless `a` (a [rows, vocab] matrix) has `vocab` columns like `like`.
void require_columns(const Array& a, std::string_view name, std::int64_t vocab,
                     std::string_view like) {
  if (a.dim(a.ndim() - 1) != vocab) {
    throw Error(std::string(name), fmt::format("has {} columns; expected {} like {}",
                                               a.dim(a.ndim() - 1), vocab, like));
  }
}

/// What a binding of any rule reads: the rule, the warped rows and the raw rows (None: the
/// warped ones), each `ndim`-D; 2-D rows must have as many columns as the target's.
struct RuleRows {
  std::array<std::string_view, 4> names;  // of target, draft, raw target, raw draft
  Rule rule;
  Array target, draft;
  std::optional<Array> raw_target, raw_draft;

  RuleRows(int ndim, py::handle rule_object, py::handle target_object, py::handle draft_object,
           py::handle raw_target_object, py::handle raw_draft_object)
      : names(ndim == 1 ? std::array<std::string_view, 4>{"target", "draft", "raw_target",
                                                          "raw_draft"}
                        : std::array<std::string_view, 4>{"target_rows", "draft_rows",
                                                          "raw_target_rows", "raw_draft_rows"}),
        rule(rule_arg(rule_object)),
        target(rows_arg(target_object, names[0], ndim)),
        draft(rows_arg(draft_object, names[1], ndim)),
        raw_target(optional_rows_arg(raw_target_object, names[2], ndim)),
        raw_draft(optional_rows_arg(raw_draft_object, names[3], ndim)) {
    if (ndim == 1) return;
    require_columns(draft, names[1], vocab(), names[0]);
    if (raw_target) require_columns(*raw_target, names[2], vocab(), names[0]);
    if (raw_draft) require_columns(*raw_draft, names[3], vocab(), names[0]);
  }
  [[nodiscard]] std::int64_t vocab() const { return target.dim(target.ndim() - 1); }
  /// f(target, draft, raw_target, raw_draft) on the rows read as one dtype, without the GIL.
  template <class F>
  decltype(auto) call(F&& f) const {
    return with_rows({{target, names[0]}, {draft, names[1]}, {raw_target, names[2]},
                      {raw_draft, names[3]}},
                     f);
  }
};

/// A cascade's rows: raw (unwarped) rows for the deferral decision, the warped rows mixed.
struct CascadeRows {
  Array raw_target, raw_draft, target, draft;
  CascadeRows(py::handle raw_target_object, py::handle raw_draft_object, py::handle target_object,
              py::handle draft_object)
      : raw_target(rows_arg(raw_target_object, "raw_target", 1)),
        raw_draft(rows_arg(raw_draft_object, "raw_draft", 1)),
        target(rows_arg(target_object, "target", 1)),
        draft(rows_arg(draft_object, "draft", 1)) {}
  [[nodiscard]] ArrayKind kind() const { return kind_of(raw_target, raw_draft, target, draft); }
  /// f(target, draft, raw_target, raw_draft) on the rows read as one dtype, without the GIL.
  template <class F>
  decltype(auto) call(F&& f) const {
    return with_rows({{target, "target"}, {draft, "draft"}, {raw_target, "raw_target"},
                      {raw_draft, "raw_draft"}},
                     f);
  }
};

// ---- one node -------------------------------------------------------------------------------

void bind_node(py::module_& m) {
  m.def(
      "verify_node",
      [](py::handle rule, py::handle target, py::handle draft, py::handle candidates,
         const RandomStream& stream, py::handle raw_target, py::handle raw_draft) {
        const RuleRows rows(1, rule, target, draft, raw_target, raw_draft);
        const Candidates c(candidates);
        return rows.call([&]<class T>(Rows<T> t, Rows<T> d, Rows<T> rt, Rows<T> rd) {
          return verify_node<T>(rows.rule, t, d, c.tokens, stream, thread_workspace(), rt, rd);
        });
      },
      py::arg("rule"), py::arg("target"), py::arg("draft"), py::arg("candidates"),
      py::arg("stream"), py::arg("raw_target") = py::none(), py::arg("raw_draft") = py::none(),
      "Verifies `candidates` at one node with any rule. `target` and `draft` are the warped rows\n"
      "the candidates were drawn from (float32, float16 or bfloat16, the same dtype);\n"
      "`raw_target` / `raw_draft` (None = the warped rows) feed the cascade deferral and the\n"
      "lossy greedy test. Draws: test of candidate k = draw k of `stream`, correction = draw K.");

  m.def(
      "verify_rejection",
      [](py::handle target, py::handle draft, std::int64_t candidate, const RandomStream& stream) {
        const Token c = token_value(candidate, "candidate");
        return on_rows(target, draft, [&]<class T>(Rows<T> t, Rows<T> d) {
          return verify_rejection<T>(t, d, c, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("candidate"), py::arg("stream"),
      "Standard rejection sampling of one candidate (draw 0 tests, draw 1 corrects).");

  auto list_rule = [&m](const char* name, const char* doc, auto verify) {
    m.def(
        name,
        [verify](py::handle target, py::handle draft, py::handle candidates,
                 const RandomStream& stream) {
          const Candidates c(candidates);
          return on_rows(target, draft,
                         [&]<class T>(Rows<T> t, Rows<T> d) { return verify(t, d, c.tokens, stream); });
        },
        py::arg("target"), py::arg("draft"), py::arg("candidates"), py::arg("stream"), doc);
  };
  list_rule("verify_multi_round",
            "Multi-round rejection sampling (SpecInfer) of i.i.d. candidates: candidate k is\n"
            "tested with draw k, the correction is draw K.",
            []<class T>(std::span<const T> t, std::span<const T> d, std::span<const Token> c,
                        const RandomStream& s) {
              return verify_multi_round<T>(t, d, c, s, thread_workspace());
            });
  list_rule("verify_recursive",
            "Recursive rejection sampling (RSD) of distinct candidates drawn without\n"
            "replacement: candidate k is tested with draw k, the correction is draw K.",
            []<class T>(std::span<const T> t, std::span<const T> d, std::span<const Token> c,
                        const RandomStream& s) {
              return verify_recursive<T>(t, d, c, s, thread_workspace());
            });

  m.def(
      "verify_spectr",
      [](py::handle target, py::handle draft, py::handle candidates, double gamma,
         const RandomStream& stream) {
        const Candidates c(candidates);
        return on_rows(target, draft, [&]<class T>(Rows<T> t, Rows<T> d) {
          return verify_spectr<T>(t, d, c.tokens, gamma, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("candidates"), py::arg("gamma"),
      py::arg("stream"),
      "SpecTr K-SEQ over K = len(candidates) i.i.d. candidates; gamma <= 0 chooses it\n"
      "automatically (spectr_gamma). An explicit gamma outside [1, K] or one whose residual\n"
      "would be negative raises specdec.Error.");

  m.def(
      "verify_lossy",
      [](py::handle target, py::handle draft, std::int64_t candidate, float alpha, float beta,
         const RandomStream& stream) {
        const Token c = token_value(candidate, "candidate");
        return on_rows(target, draft, [&]<class T>(Rows<T> t, Rows<T> d) {
          return verify_lossy<T>(t, d, c, alpha, beta, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("candidate"), py::arg("alpha"), py::arg("beta"),
      py::arg("stream"), "Lossy speculative sampling of one candidate (see Lossy).");

  m.def(
      "verify_lossy_greedy",
      [](py::handle target, std::int64_t candidate, float alpha) {
        const Token c = token_value(candidate, "candidate");
        return on_target(target, [&]<class T>(Rows<T> t) { return verify_lossy_greedy<T>(t, c, alpha); });
      },
      py::arg("target"), py::arg("candidate"), py::arg("alpha"),
      "The greedy lossy test on a (raw or warped) target row: accept iff\n"
      "target(candidate) >= (1 - alpha) max target, else emit argmax target. No draws.");

  m.def(
      "verify_cascade",
      [](py::handle raw_target, py::handle raw_draft, py::handle target, py::handle draft,
         std::int64_t candidate, Deferral rule, float alpha, const RandomStream& stream) {
        const CascadeRows rows(raw_target, raw_draft, target, draft);
        const Token c = token_value(candidate, "candidate");
        return rows.call([&]<class T>(Rows<T> t, Rows<T> d, Rows<T> rt, Rows<T> rd) {
          return verify_cascade<T>(rt, rd, t, d, c, Cascade{rule, alpha}, stream, thread_workspace());
        });
      },
      py::arg("raw_target"), py::arg("raw_draft"), py::arg("target"), py::arg("draft"),
      py::arg("candidate"), py::arg("rule"), py::arg("alpha"), py::arg("stream"),
      "Cascade verification of one candidate: raw (unwarped) rows for the deferral decision,\n"
      "the warped rows the candidate was drawn from for the mixture.");

  m.def(
      "verify_typical",
      [](py::handle target, py::handle candidates, float epsilon, float delta,
         const RandomStream& stream) {
        const Candidates c(candidates);
        return on_target(target, [&]<class T>(Rows<T> t) {
          return verify_typical<T>(t, c.tokens, epsilon, delta, stream);
        });
      },
      py::arg("target"), py::arg("candidates"), py::arg("epsilon"), py::arg("delta"),
      py::arg("stream"),
      "Typical acceptance on a warped target row; the correction is draw K of `stream`.");

  m.def(
      "verify_greedy",
      [](py::handle target, py::handle candidates) {
        const Candidates c(candidates);
        return on_target(target, [&]<class T>(Rows<T> t) { return verify_greedy<T>(t, c.tokens); });
      },
      py::arg("target"), py::arg("candidates"),
      "Greedy matching: accepts the candidate equal to argmax target, else emits argmax.");

  m.def(
      "verify_target_only",
      [](py::handle target, py::handle candidates, const RandomStream& stream) {
        const Candidates c(candidates);
        return on_target(target, [&]<class T>(Rows<T> t) {
          return verify_target_only<T>(t, c.tokens, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("candidates"), py::arg("stream"),
      "Verifies candidates that come without a draft row (n-gram copies, top-k heads) against\n"
      "the warped `target` row, in order: candidate k is accepted iff u_k * mass_k < p_k(x),\n"
      "p_k the target with the rejected candidates removed (repeats are never accepted); all\n"
      "rejected, the correction is drawn from p_(K+1). Lossless. Draws: test of candidate k =\n"
      "draw k of `stream`, correction = draw K.");
}

// ---- chains, blocks, trees, MTAD ----------------------------------------------------------

void bind_sequences(py::module_& m) {
  m.def(
      "verify_chain",
      [](py::handle rule_object, py::handle target_object, py::handle draft_object,
         py::handle tokens_object, const RandomStream& stream, py::handle raw_target_object,
         py::handle raw_draft_object) {
        const RuleRows rows(2, rule_object, target_object, draft_object, raw_target_object,
                            raw_draft_object);
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        require_chain_rows(rows.target, rows.draft, tokens);
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        std::vector<Token> out(draft_tokens.size() + 1);
        const ChainVerdict verdict =
            rows.call([&]<class T>(Rows<T> t, Rows<T> d, Rows<T> rt, Rows<T> rd) {
              return verify_chain<T>(rows.rule, {t, d, rt, rd}, draft_tokens, rows.vocab(), stream,
                                     out, thread_workspace());
            });
        return verdict_and(verdict, out, verdict.emitted, kind_of(rows.target, rows.draft, tokens));
      },
      py::arg("rule"), py::arg("target_rows"), py::arg("draft_rows"), py::arg("draft_tokens"),
      py::arg("stream"), py::arg("raw_target_rows") = py::none(),
      py::arg("raw_draft_rows") = py::none(),
      "Verifies L draft tokens position by position with any rule; returns (ChainVerdict,\n"
      "tokens) with the accepted tokens then the correction or bonus token (int32, length\n"
      "verdict.emitted). target_rows: [L + 1, V] warped rows (row i = the target after i draft\n"
      "tokens); draft_rows: [L, V] (row i = the row draft token i was drawn from). Position i\n"
      "uses stream.at_position(stream.position + i); the bonus token is draw 0 at position L.");

  m.def(
      "verify_block",
      [](py::handle target_object, py::handle draft_object, py::handle tokens_object,
         const RandomStream& stream) {
        const Array target = rows_arg(target_object, "target_rows", 2);
        const Array draft = rows_arg(draft_object, "draft_rows", 2);
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        const std::int64_t vocab = target.dim(1);
        require_chain_rows(target, draft, tokens);
        require_columns(draft, "draft_rows", vocab, "target_rows");
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        std::vector<Token> out(draft_tokens.size() + 1);
        const ChainVerdict verdict = with_rows(
            {{target, "target_rows"}, {draft, "draft_rows"}}, [&]<class T>(Rows<T> t, Rows<T> d) {
              return verify_block<T>(t, d, draft_tokens, vocab, stream, out, thread_workspace());
            });
        return verdict_and(verdict, out, verdict.emitted, kind_of(target, draft, tokens));
      },
      py::arg("target_rows"), py::arg("draft_rows"), py::arg("draft_tokens"), py::arg("stream"),
      "Block verification (Sun et al. 2024) of L draft tokens, rows as verify_chain's; lossless\n"
      "and at least as many accepted tokens in expectation as token-by-token rejection. One\n"
      "stream for the block: draw i - 1 is position i's uniform, draw L the final token.\n"
      "Returns (ChainVerdict, tokens).");

  m.def(
      "verify_tree",
      [](py::handle rule, py::handle tree_object, py::handle target, py::handle draft,
         const RandomStream& stream, py::handle raw_target, py::handle raw_draft) {
        const DraftTree& tree = tree_arg(tree_object);
        const RuleRows rows(2, rule, target, draft, raw_target, raw_draft);
        std::vector<std::int32_t> accepted(tree.size());
        const TreeVerdict verdict =
            rows.call([&]<class T>(Rows<T> t, Rows<T> d, Rows<T> rt, Rows<T> rd) {
              return verify_tree<T>(rows.rule, tree.view(), {t, d, rt, rd}, rows.vocab(), stream,
                                    accepted, thread_workspace());
            });
        return verdict_and(verdict, accepted, verdict.accepted, kind_of(rows.target, rows.draft));
      },
      py::arg("rule"), py::arg("tree"), py::arg("target_rows"), py::arg("draft_rows"),
      py::arg("stream"), py::arg("raw_target_rows") = py::none(),
      py::arg("raw_draft_rows") = py::none(),
      "Walks a DraftTree of N nodes from the root with `rule` at every node; returns\n"
      "(TreeVerdict, accepted_nodes) with the accepted node ids (int32, length\n"
      "verdict.accepted). target_rows and draft_rows: [N + 1, V] warped rows, row 0 at the\n"
      "root, row i + 1 after node i (draft row i + 1 = the row node i's children were drawn\n"
      "from; rows of leaves are never read). The children of node n are verified with\n"
      "stream.at_node(n + 1) (the root is node 0).");

  m.def(
      "verify_chain_target_only",
      [](py::handle target_object, py::handle tokens_object, const RandomStream& stream) {
        const Array target = rows_arg(target_object, "target_rows", 2);
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        if (target.dim(0) != tokens.size() + 1) {
          throw Error("target_rows", fmt::format("has {} rows; draft_tokens has {} tokens, so {} "
                                                 "rows are expected",
                                                 target.dim(0), tokens.size(), tokens.size() + 1));
        }
        const std::int64_t vocab = target.dim(1);
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        std::vector<Token> out(draft_tokens.size() + 1);
        const ChainVerdict verdict = with_rows({{target, "target_rows"}}, [&]<class T>(Rows<T> t) {
          return verify_chain_target_only<T>(t, draft_tokens, vocab, stream, out, thread_workspace());
        });
        return verdict_and(verdict, out, verdict.emitted, kind_of(target, tokens));
      },
      py::arg("target_rows"), py::arg("draft_tokens"), py::arg("stream"),
      "Verifies L draft tokens that come without draft rows (n-gram copies, top-1 heads):\n"
      "token x at position i is accepted iff u < p_i(x); the first rejection emits a token\n"
      "drawn from p_i with x removed; when all pass, a bonus token is drawn from row L.\n"
      "Lossless. target_rows: [L + 1, V] warped rows. Returns (ChainVerdict, tokens) as\n"
      "verify_chain does, with the same draws (position i: stream.at_position(position + i)).");

  m.def(
      "verify_tree_target_only",
      [](py::handle tree_object, py::handle target_object, const RandomStream& stream) {
        const DraftTree& tree = tree_arg(tree_object);
        const Array target = rows_arg(target_object, "target_rows", 2);
        const std::int64_t vocab = target.dim(1);
        std::vector<std::int32_t> accepted(tree.size());
        const TreeVerdict verdict = with_rows({{target, "target_rows"}}, [&]<class T>(Rows<T> t) {
          return verify_tree_target_only<T>(tree.view(), t, vocab, stream, accepted,
                                            thread_workspace());
        });
        return verdict_and(verdict, accepted, verdict.accepted, kind_of(target));
      },
      py::arg("tree"), py::arg("target_rows"), py::arg("stream"),
      "Walks a candidate DraftTree of N nodes that comes without draft rows (EAGLE or MTP\n"
      "top-k children, Medusa trees, several n-gram continuations): a node's children are\n"
      "tried in their stored order, each accepted with its residual target probability (as\n"
      "drawing y from the target and descending to the first child whose token is y), so the\n"
      "output is the target's for any tree, repeated sibling tokens included. target_rows:\n"
      "[N + 1, V] warped rows, row 0 at the root, row i + 1 after node i. Returns\n"
      "(TreeVerdict, accepted_nodes) as verify_tree does, with the same draws.");

  m.def(
      "verify_mtad",
      [](py::handle tokens_object, py::handle log_probs_object, py::handle target_object, float tau,
         const RandomStream& stream) {
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        const Array log_probs = values_f32_arg(log_probs_object, "draft_log_probs", 1);
        const Array target = rows_f32_arg(target_object, "target_rows", 2);
        if (log_probs.size() != tokens.size()) {
          throw Error("draft_log_probs", fmt::format("has {} entries; draft_tokens has {}",
                                                     log_probs.size(), tokens.size()));
        }
        const MatrixView<const float> rows(static_cast<const float*>(target.data), target.dim(0),
                                           target.dim(1));
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        const auto draft_log_probs = log_probs.span<float>("draft_log_probs");
        py::gil_scoped_release unlocked;
        return verify_mtad(draft_tokens, draft_log_probs, rows, tau, stream);
      },
      py::arg("draft_tokens"), py::arg("draft_log_probs"), py::arg("target_rows"), py::arg("tau"),
      py::arg("stream"),
      "MTAD verification of one draft sequence x_1..x_L: draft_log_probs[i] = log q(x_(i+1) |\n"
      "x_<=i), target_rows [L + 1, V] warped rows (float32; others converted). Keeps the longest\n"
      "prefix with min(1, P / Q) > tau, then draws one token (draw 0) from the target row after\n"
      "it. Returns an MtadVerdict.");
}

// ---- exact distributions and row helpers -----------------------------------------------

/// The Python arguments of an exact-law entry: a rule and its rows (raw rows may be None).
struct ExactLawArgs {
  py::handle rule, target, draft, raw_target, raw_draft;
};

/// Reads a rule and float32 rows, calls law(rule, target, draft, out, raw_target, raw_draft)
/// without the GIL into a float64 [V] output; returns (law's result, the output).
template <class Law>
auto exact_law(const ExactLawArgs& args, Law law) {
  const Rule rule = rule_arg(args.rule);
  const Array target = rows_f32_arg(args.target, "target", 1);
  const Array draft = rows_f32_arg(args.draft, "draft", 1);
  const auto raw_target = optional_f32(args.raw_target, "raw_target");
  const auto raw_draft = optional_f32(args.raw_draft, "raw_draft");
  Output<double> out({target.dim(0)}, kind_of(target, draft));
  const auto result = [&] {
    py::gil_scoped_release unlocked;
    return law(rule, target.span<float>("target"), draft.span<float>("draft"), out.values(),
               span_or_empty<float>(raw_target, "raw_target"),
               span_or_empty<float>(raw_draft, "raw_draft"));
  }();
  return std::pair{result, out.result()};
}

void bind_exact(py::module_& m) {
  m.def(
      "exact_node_distribution",
      [](py::handle rule_object, py::handle target_object, py::handle draft_object,
         std::int32_t count, py::handle raw_target_object, py::handle raw_draft_object) {
        auto [accepted, distribution] =
            exact_law({rule_object, target_object, draft_object, raw_target_object,
                       raw_draft_object},
                      [count](const Rule& rule, auto target, auto draft, auto out, auto raw_target,
                              auto raw_draft) {
                        return exact_node_distribution(rule, target, draft, count, out, raw_target,
                                                       raw_draft);
                      });
        return py::make_tuple(accepted, distribution);
      },
      py::arg("rule"), py::arg("target"), py::arg("draft"), py::arg("count"),
      py::arg("raw_target") = py::none(), py::arg("raw_draft") = py::none(),
      "The exact output distribution of `rule` at one node when `count` candidates are drawn\n"
      "from the warped `draft` (i.i.d.; without replacement for Recursive), by enumerating every\n"
      "candidate tuple in double precision (V^count must stay below 4e6). Returns\n"
      "(acceptance probability, distribution as float64 [V]). Rows are read as float32.");

  m.def(
      "claimed_distribution",
      [](py::handle rule_object, py::handle target_object, py::handle draft_object,
         std::int32_t count, py::handle raw_target_object,
         py::handle raw_draft_object) -> py::object {
        auto [claims, distribution] =
            exact_law({rule_object, target_object, draft_object, raw_target_object,
                       raw_draft_object},
                      [count](const Rule& rule, auto target, auto draft, auto out, auto raw_target,
                              auto raw_draft) {
                        return claimed_distribution(rule, target, draft, count, out, raw_target,
                                                    raw_draft);
                      });
        if (!claims) return py::none();
        return distribution;
      },
      py::arg("rule"), py::arg("target"), py::arg("draft"), py::arg("count"),
      py::arg("raw_target") = py::none(), py::arg("raw_draft") = py::none(),
      "The distribution `rule` claims to produce (float64 [V]): the warped target for lossless\n"
      "rules, pi for lossy sampling and cascades, one-hot argmax for greedy matching; None for\n"
      "typical acceptance, which claims nothing.");

  m.def(
      "spectr_gamma",
      [](py::handle target, py::handle draft, std::int32_t count) {
        return on_rows(target, draft,
                       [&]<class T>(Rows<T> t, Rows<T> d) { return spectr_gamma<T>(t, d, count); });
      },
      py::arg("target"), py::arg("draft"), py::arg("count"),
      "SpecTr's automatic gamma: the root of 1 - (1 - beta)^K = gamma * beta on [1, K] for\n"
      "K = count candidates.");

  m.def(
      "lossy_tuned_beta",
      [](py::handle target, py::handle draft, double alpha) {
        return on_rows(target, draft, [&]<class T>(Rows<T> t, Rows<T> d) {
          return lossy_tuned_beta<T>(t, d, alpha);
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("alpha"),
      "The tuned beta of lossy sampling (seed 004, Lemma 2) for alpha in [0, 1): the output\n"
      "is then exactly max(min(draft, target / (1 - alpha)), target / beta). 1 when nothing\n"
      "is ever rejected (the output is the draft row).");

  m.def(
      "cascade_target",
      [](py::handle raw_target, py::handle raw_draft, py::handle target, py::handle draft,
         Deferral rule, float alpha) {
        const CascadeRows rows(raw_target, raw_draft, target, draft);
        Output<float> pi({rows.target.dim(0)}, rows.kind());
        rows.call([&]<class T>(Rows<T> t, Rows<T> d, Rows<T> rt, Rows<T> rd) {
          cascade_target<T>(rt, rd, t, d, rule, alpha, pi.values());
        });
        return pi.result();
      },
      py::arg("raw_target"), py::arg("raw_draft"), py::arg("target"), py::arg("draft"),
      py::arg("rule"), py::arg("alpha"),
      "The cascade target pi (float32 [V]) of deferral `rule`: raw rows decide, the warped rows\n"
      "are mixed.");

  m.def(
      "tv_distance",
      [](py::handle a_object, py::handle b_object) {
        const Array a = rows_arg(a_object, "a", 1);
        const Array b = rows_arg(b_object, "b", 1);
        return visit_floats(a, "a", [&]<class T>(std::span<const T> a_row) {
          return visit_floats(b, "b", [&]<class U>(std::span<const U> b_row) {
            py::gil_scoped_release unlocked;
            return tv_distance<T, U>(a_row, b_row);
          });
        });
      },
      py::arg("a"), py::arg("b"),
      "Total-variation distance sum_x [a(x) - b(x)]+ = (1/2) sum_x |a(x) - b(x)|.");

  m.def(
      "entropy",
      [](py::handle probabilities_object) {
        const Array p = rows_arg(probabilities_object, "probabilities", 1);
        return with_rows({{p, "probabilities"}}, []<class T>(Rows<T> row) { return entropy<T>(row); });
      },
      py::arg("probabilities"),
      "Entropy in nats of a probability row (typical acceptance's threshold is\n"
      "min(epsilon, delta * exp(-entropy(target)))).");
}

}  // namespace

void bind_verify(py::module_& m) { bind_parts(m, {bind_node, bind_sequences, bind_exact}); }

}  // namespace specdec::python
