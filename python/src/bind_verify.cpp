// SPDX-License-Identifier: MIT
// Verification: the node rules, node / chain / block / tree verification, MTAD, the exact output
// distribution of a rule and the batched chain and tree entry points (CPU backend; CUDA backend
// for CUDA tensors when built with SPECDEC_PYTHON_WITH_CUDA).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/verify/verify.hpp"

#if defined(SPECDEC_PYTHON_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "specdec/backend/cuda/verify_batch.hpp"
#endif

namespace specdec::python {

namespace {

// ---- arguments ----------------------------------------------------------------------------

/// A token given as a Python int, range-checked before it is narrowed.
Token token_value(std::int64_t value, std::string_view name) {
  if (value < std::numeric_limits<Token>::min() || value > std::numeric_limits<Token>::max()) {
    throw Error(std::string(name), fmt::format("{} does not fit in int32", value));
  }
  return static_cast<Token>(value);
}

/// Candidates: a 1-D token array, a list, or a single int.
Array candidates_arg(py::handle obj, std::string_view name) {
  Array a = token_arg(obj, name);
  if (a.ndim() > 1) {
    throw Error(std::string(name), fmt::format("has {} dimensions; expected 1", a.ndim()));
  }
  return a;
}

/// An optional row: None, or an array of the same float type as the row it accompanies.
std::optional<Array> optional_rows(py::handle obj, std::string_view name, int ndim) {
  if (obj.is_none()) return std::nullopt;
  return float_arg(obj, name, ndim);
}
template <class T>
std::span<const T> span_or_empty(const std::optional<Array>& a, std::string_view name) {
  return a ? a->span<T>(name) : std::span<const T>{};
}
/// The same for the float32-only entry points (exact distributions): converted when needed.
std::optional<Array> optional_float32(py::handle obj, std::string_view name) {
  if (obj.is_none()) return std::nullopt;
  return float32_arg(obj, name, 1);
}

/// Throws unless `a` (a [rows, vocab] matrix) has `vocab` columns like `like`.
void require_columns(const Array& a, std::string_view name, std::int64_t vocab,
                     std::string_view like) {
  if (a.dim(a.ndim() - 1) != vocab) {
    throw Error(std::string(name), fmt::format("has {} columns; expected {} like {}",
                                               a.dim(a.ndim() - 1), vocab, like));
  }
}

std::string type_name(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>();
}

/// Any of the rule classes as a Rule.
Rule rule_arg(py::handle obj) {
  if (py::isinstance<Rejection>(obj)) return obj.cast<Rejection>();
  if (py::isinstance<MultiRound>(obj)) return obj.cast<MultiRound>();
  if (py::isinstance<Recursive>(obj)) return obj.cast<Recursive>();
  if (py::isinstance<SpecTr>(obj)) return obj.cast<SpecTr>();
  if (py::isinstance<Lossy>(obj)) return obj.cast<Lossy>();
  if (py::isinstance<Cascade>(obj)) return obj.cast<Cascade>();
  if (py::isinstance<Typical>(obj)) return obj.cast<Typical>();
  if (py::isinstance<Greedy>(obj)) return obj.cast<Greedy>();
  throw Error("rule", fmt::format("is a {}; expected Rejection, MultiRound, Recursive, SpecTr, "
                                  "Lossy, Cascade, Typical or Greedy",
                                  type_name(obj)));
}

/// A sequence of RandomStream, one per sequence of a batch.
std::vector<RandomStream> streams_arg(py::handle obj) {
  if (py::isinstance<RandomStream>(obj)) {
    throw Error("streams", "is one RandomStream; expected a sequence of them, one per sequence");
  }
  if (!PySequence_Check(obj.ptr())) {
    throw Error("streams",
                fmt::format("is a {}; expected a sequence of RandomStream", type_name(obj)));
  }
  // A list or tuple is read in place; any other sequence through one copy into a list.
  const auto items = py::reinterpret_steal<py::object>(PySequence_Fast(obj.ptr(), "streams"));
  if (!items) throw py::error_already_set();
  const auto count = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(items.ptr()));
  PyObject** item = PySequence_Fast_ITEMS(items.ptr());
  std::vector<RandomStream> streams(count);
  py::detail::make_caster<RandomStream> caster;
  for (std::size_t b = 0; b < count; ++b) {
    if (!caster.load(item[b], false)) {
      throw Error(fmt::format("streams[{}]", b),
                  fmt::format("is a {}; expected a RandomStream", type_name(item[b])));
    }
    streams[b] = py::detail::cast_op<const RandomStream&>(caster);
  }
  return streams;
}

/// A Warp, or a sequence of them (one per sequence).
std::vector<Warp> warps_arg(py::handle obj) {
  if (py::isinstance<Warp>(obj)) return {obj.cast<Warp>()};
  if (!py::isinstance<py::sequence>(obj)) {
    throw Error("warps",
                fmt::format("is a {}; expected a Warp or a sequence of them", type_name(obj)));
  }
  const auto list = py::reinterpret_borrow<py::sequence>(obj);
  std::vector<Warp> warps;
  for (std::size_t b = 0; b < list.size(); ++b) {
    py::object item = list[b];
    if (!py::isinstance<Warp>(item)) {
      throw Error(fmt::format("warps[{}]", b),
                  fmt::format("is a {}; expected a Warp", type_name(item)));
    }
    warps.push_back(item.cast<Warp>());
  }
  return warps;
}

// ---- value types --------------------------------------------------------------------------

template <class R>
std::string rule_repr(const R& r) {
  if constexpr (std::is_same_v<R, SpecTr>) {
    return fmt::format("SpecTr(gamma={})", r.gamma);
  } else if constexpr (std::is_same_v<R, Lossy>) {
    return fmt::format("Lossy(alpha={}, beta={}, tune_beta={}, greedy={})", r.alpha, r.beta,
                       r.tune_beta ? "True" : "False", r.greedy ? "True" : "False");
  } else if constexpr (std::is_same_v<R, Cascade>) {
    const auto deferral = py::str(py::cast(r.deferral)).cast<std::string>();  // "Deferral.CHOW"
    return fmt::format("Cascade(deferral={}, alpha={})", deferral, r.alpha);
  } else if constexpr (std::is_same_v<R, Typical>) {
    return fmt::format("Typical(epsilon={}, delta={})", r.epsilon, r.delta);
  } else if constexpr (std::is_same_v<R, Rejection>) {
    return "Rejection()";
  } else if constexpr (std::is_same_v<R, MultiRound>) {
    return "MultiRound()";
  } else if constexpr (std::is_same_v<R, Recursive>) {
    return "Recursive()";
  } else {
    return "Greedy()";
  }
}

template <class R>
bool rule_equal(const R& a, const R& b) {
  if constexpr (std::is_same_v<R, SpecTr>) {
    return a.gamma == b.gamma;
  } else if constexpr (std::is_same_v<R, Lossy>) {
    return a.alpha == b.alpha && a.beta == b.beta && a.tune_beta == b.tune_beta &&
           a.greedy == b.greedy;
  } else if constexpr (std::is_same_v<R, Cascade>) {
    return a.deferral == b.deferral && a.alpha == b.alpha;
  } else if constexpr (std::is_same_v<R, Typical>) {
    return a.epsilon == b.epsilon && a.delta == b.delta;
  } else {
    return true;
  }
}

/// The methods every rule class has: repr, equality (by fields) and is_lossless.
template <class R>
py::class_<R>& rule_methods(py::class_<R>& cls) {
  cls.def("__repr__", &rule_repr<R>)
      .def("__eq__",
           [](const R& a, const py::object& b) {
             return py::isinstance<R>(b) && rule_equal(a, b.cast<R>());
           })
      .def(
          "is_lossless", [](const R& r) { return is_lossless(Rule(r)); },
          "True when the rule's output is the warped target whatever the rows.");
  return cls;
}

void bind_rules(py::module_& m) {
  py::enum_<Deferral>(m, "Deferral",
                      "How a cascade forms its target pi from the draft and the target. The first\n"
                      "six defer the whole row (pi = draft or target); the TOKEN_* rules mix per\n"
                      "token. Decisions read the raw (unwarped) rows.")
      .value("CHOW", Deferral::kChow, "defer iff max raw_draft < 1 - alpha (alpha in [0, 1])")
      .value("DIFF", Deferral::kDiff, "defer iff max raw_draft < max raw_target - alpha")
      .value("OPT", Deferral::kOpt,
             "defer iff max raw_draft < max raw_target - alpha * TV(target, draft)")
      .value("DIFF_LOG", Deferral::kDiffLog, "defer iff -H(raw_draft) < -H(raw_target) - alpha")
      .value("OPT_LOG", Deferral::kOptLog,
             "defer iff -H(raw_draft) < -H(raw_target) - alpha * TV(target, draft)")
      .value("BILD", Deferral::kBild, "defer iff -log raw_target(argmax raw_draft) > alpha")
      .value("TOKEN_V1", Deferral::kTokenV1, "r(v) = 1(raw_draft(v) < max raw_target - alpha)")
      .value("TOKEN_V2", Deferral::kTokenV2, "r(v) = 1(raw_target(v) < max raw_target - alpha)")
      .value("TOKEN_V3", Deferral::kTokenV3,
             "r(v) = 1(raw_target(v) < (1 - alpha) max raw_target)");

  py::class_<Rejection> rejection(m, "Rejection",
                                  "Standard rejection sampling: exactly one candidate. Lossless.");
  rejection.def(py::init<>());
  rule_methods(rejection);
  py::class_<MultiRound> multi_round(
      m, "MultiRound",
      "Multi-round rejection sampling of i.i.d. candidates (SpecInfer). Lossless.");
  multi_round.def(py::init<>());
  rule_methods(multi_round);
  py::class_<Recursive> recursive(
      m, "Recursive",
      "Recursive rejection sampling of candidates drawn without replacement (RSD). Lossless.");
  recursive.def(py::init<>());
  rule_methods(recursive);

  py::class_<SpecTr> spectr(m, "SpecTr",
                            "SpecTr K-SEQ over K i.i.d. candidates. gamma <= 0 picks the root of\n"
                            "1 - (1 - beta)^K = gamma * beta automatically (see spectr_gamma).\n"
                            "Lossless.");
  spectr
      .def(py::init([](double gamma) { return SpecTr{gamma}; }), py::kw_only(),
           py::arg("gamma") = 0.0)
      .def_readwrite("gamma", &SpecTr::gamma);
  rule_methods(spectr);

  py::class_<Lossy> lossy(
      m, "Lossy",
      "Lossy speculative sampling of one candidate: accepts x with probability\n"
      "min(1, target(x) / ((1 - alpha) draft(x))) and corrects from\n"
      "norm([target / beta - draft]+). tune_beta replaces beta by the tuned\n"
      "value (lossy_tuned_beta); greedy is the T = 0 variant (accept iff\n"
      "target(x) >= (1 - alpha) max target). Not lossless.");
  lossy
      .def(py::init([](float alpha, float beta, bool tune_beta, bool greedy) {
             return Lossy{alpha, beta, tune_beta, greedy};
           }),
           py::kw_only(), py::arg("alpha") = 0.0f, py::arg("beta") = 1.0f,
           py::arg("tune_beta") = false, py::arg("greedy") = false)
      .def_readwrite("alpha", &Lossy::alpha)
      .def_readwrite("beta", &Lossy::beta)
      .def_readwrite("tune_beta", &Lossy::tune_beta)
      .def_readwrite("greedy", &Lossy::greedy);
  rule_methods(lossy);

  py::class_<Cascade> cascade(
      m, "Cascade",
      "Speculative sampling of one candidate towards the cascade target pi\n"
      "formed by `deferral` with threshold `alpha` (see cascade_target).\n"
      "Not lossless: its output is pi.");
  cascade
      .def(py::init([](Deferral deferral, float alpha) {
             return Cascade{deferral, alpha};
           }),
           py::kw_only(), py::arg("deferral") = Deferral::kChow, py::arg("alpha") = 0.0f)
      .def_readwrite("deferral", &Cascade::deferral)
      .def_readwrite("alpha", &Cascade::alpha);
  rule_methods(cascade);

  py::class_<Typical> typical(m, "Typical",
                              "Typical acceptance (Medusa): accepts the first candidate x with\n"
                              "target(x) > min(epsilon, delta * exp(-H(target))). Not lossless.");
  typical
      .def(py::init([](float epsilon, float delta) {
             return Typical{epsilon, delta};
           }),
           py::kw_only(), py::arg("epsilon") = 0.3f, py::arg("delta") = 0.09f)
      .def_readwrite("epsilon", &Typical::epsilon)
      .def_readwrite("delta", &Typical::delta);
  rule_methods(typical);

  py::class_<Greedy> greedy(m, "Greedy",
                            "Greedy matching: accepts the candidate equal to argmax target.");
  greedy.def(py::init<>());
  rule_methods(greedy);

  m.def(
      "is_lossless", [](py::handle rule) { return is_lossless(rule_arg(rule)); }, py::arg("rule"),
      "True for the rules whose output is the warped target whatever the rows.");
  m.def(
      "draws_without_replacement",
      [](py::handle rule) { return draws_without_replacement(rule_arg(rule)); }, py::arg("rule"),
      "True where candidates are drawn without replacement (Recursive), false for i.i.d.");
  m.def(
      "max_candidates",
      [](py::handle rule, std::int64_t vocab) { return max_candidates(rule_arg(rule), vocab); },
      py::arg("rule"), py::arg("vocab"),
      "The most candidates one node may pass to the rule (1 for single-candidate rules).");
  m.def(
      "deferral_name", [](Deferral d) { return std::string(deferral_name(d)); },
      py::arg("deferral"), "The rule's name in configuration files ('chow', 'token_v1', ...).");
  m.def("check_deferral", &check_deferral, py::arg("deferral"), py::arg("alpha"),
        "Raises specdec.Error unless alpha lies in the deferral rule's range.");
  m.def("check_typical_parameters", &check_typical_parameters, py::arg("epsilon"), py::arg("delta"),
        "Raises specdec.Error unless epsilon is in [0, 1] and delta finite and >= 0.");
}

void bind_verdicts(py::module_& m) {
  py::class_<NodeVerdict>(m, "NodeVerdict",
                          "The outcome at one node: `accepted` is the index of the accepted\n"
                          "candidate (-1 when every one was rejected), `token` the accepted\n"
                          "candidate or the correction token.")
      .def(py::init([](std::int32_t accepted, Token token) {
             return NodeVerdict{accepted, token};
           }),
           py::arg("accepted"), py::arg("token"))
      .def_readonly("accepted", &NodeVerdict::accepted)
      .def_readonly("token", &NodeVerdict::token)
      .def("__eq__",
           [](const NodeVerdict& a, const py::object& b) {
             return py::isinstance<NodeVerdict>(b) && a == b.cast<NodeVerdict>();
           })
      .def("__repr__", [](const NodeVerdict& v) {
        return fmt::format("NodeVerdict(accepted={}, token={})", v.accepted, v.token);
      });

  py::class_<ChainVerdict>(m, "ChainVerdict",
                           "The outcome of a chain: `accepted` draft tokens (0..L) were kept and\n"
                           "`emitted` = accepted + 1 tokens were written (the last one the\n"
                           "correction or bonus token).")
      .def(py::init([](std::int32_t accepted, std::int32_t emitted) {
             return ChainVerdict{accepted, emitted};
           }),
           py::arg("accepted"), py::arg("emitted"))
      .def_readonly("accepted", &ChainVerdict::accepted)
      .def_readonly("emitted", &ChainVerdict::emitted)
      .def("__eq__",
           [](const ChainVerdict& a, const py::object& b) {
             if (!py::isinstance<ChainVerdict>(b)) return false;
             const auto other = b.cast<ChainVerdict>();
             return a.accepted == other.accepted && a.emitted == other.emitted;
           })
      .def("__repr__", [](const ChainVerdict& v) {
        return fmt::format("ChainVerdict(accepted={}, emitted={})", v.accepted, v.emitted);
      });

  py::class_<TreeVerdict>(m, "TreeVerdict",
                          "The outcome of a tree walk: `accepted` nodes were accepted, `token` is\n"
                          "the correction token or, when `bonus`, the bonus token drawn at a leaf.")
      .def(py::init([](std::int32_t accepted, Token token, bool bonus) {
             return TreeVerdict{accepted, token, bonus};
           }),
           py::arg("accepted"), py::arg("token"), py::arg("bonus"))
      .def_readonly("accepted", &TreeVerdict::accepted)
      .def_readonly("token", &TreeVerdict::token)
      .def_readonly("bonus", &TreeVerdict::bonus)
      .def("__eq__",
           [](const TreeVerdict& a, const py::object& b) {
             if (!py::isinstance<TreeVerdict>(b)) return false;
             const auto other = b.cast<TreeVerdict>();
             return a.accepted == other.accepted && a.token == other.token &&
                    a.bonus == other.bonus;
           })
      .def("__repr__", [](const TreeVerdict& v) {
        return fmt::format("TreeVerdict(accepted={}, token={}, bonus={})", v.accepted, v.token,
                           v.bonus ? "True" : "False");
      });

  py::class_<MtadVerdict>(m, "MtadVerdict",
                          "The outcome of MTAD: `accepted` draft tokens kept (0..L), then `token`\n"
                          "drawn from the target row after them.")
      .def(py::init([](std::int32_t accepted, Token token) {
             return MtadVerdict{accepted, token};
           }),
           py::arg("accepted"), py::arg("token"))
      .def_readonly("accepted", &MtadVerdict::accepted)
      .def_readonly("token", &MtadVerdict::token)
      .def("__eq__",
           [](const MtadVerdict& a, const py::object& b) {
             if (!py::isinstance<MtadVerdict>(b)) return false;
             const auto other = b.cast<MtadVerdict>();
             return a.accepted == other.accepted && a.token == other.token;
           })
      .def("__repr__", [](const MtadVerdict& v) {
        return fmt::format("MtadVerdict(accepted={}, token={})", v.accepted, v.token);
      });
}

// ---- one node -------------------------------------------------------------------------------

void bind_node(py::module_& m) {
  m.def(
      "verify_node",
      [](py::handle rule_object, py::handle target_object, py::handle draft_object,
         py::handle candidates_object, const RandomStream& stream, py::handle raw_target_object,
         py::handle raw_draft_object) {
        const Rule rule = rule_arg(rule_object);
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        const Array candidates = candidates_arg(candidates_object, "candidates");
        const auto raw_target = optional_rows(raw_target_object, "raw_target", 1);
        const auto raw_draft = optional_rows(raw_draft_object, "raw_draft", 1);
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          const auto raw_target_row = span_or_empty<T>(raw_target, "raw_target");
          const auto raw_draft_row = span_or_empty<T>(raw_draft, "raw_draft");
          py::gil_scoped_release unlocked;
          return verify_node<T>(rule, target_row, draft_row, candidates.span<Token>("candidates"),
                                stream, thread_workspace(), raw_target_row, raw_draft_row);
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
      [](py::handle target_object, py::handle draft_object, std::int64_t candidate,
         const RandomStream& stream) {
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        const Token c = token_value(candidate, "candidate");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          py::gil_scoped_release unlocked;
          return verify_rejection<T>(target_row, draft_row, c, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("candidate"), py::arg("stream"),
      "Standard rejection sampling of one candidate (draw 0 tests, draw 1 corrects).");

  auto list_rule = [&m](const char* name, const char* doc, auto verify) {
    m.def(
        name,
        [verify](py::handle target_object, py::handle draft_object, py::handle candidates_object,
                 const RandomStream& stream) {
          const Array target = float_arg(target_object, "target", 1);
          const Array draft = float_arg(draft_object, "draft", 1);
          const Array candidates = candidates_arg(candidates_object, "candidates");
          return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
            const auto draft_row = draft.span<T>("draft");
            py::gil_scoped_release unlocked;
            return verify.template operator()<T>(target_row, draft_row,
                                                 candidates.span<Token>("candidates"), stream);
          });
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
      [](py::handle target_object, py::handle draft_object, py::handle candidates_object,
         double gamma, const RandomStream& stream) {
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        const Array candidates = candidates_arg(candidates_object, "candidates");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          py::gil_scoped_release unlocked;
          return verify_spectr<T>(target_row, draft_row, candidates.span<Token>("candidates"),
                                  gamma, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("candidates"), py::arg("gamma"),
      py::arg("stream"),
      "SpecTr K-SEQ over K = len(candidates) i.i.d. candidates; gamma <= 0 chooses it\n"
      "automatically (spectr_gamma). An explicit gamma outside [1, K] or one whose residual\n"
      "would be negative raises specdec.Error.");

  m.def(
      "verify_lossy",
      [](py::handle target_object, py::handle draft_object, std::int64_t candidate, float alpha,
         float beta, const RandomStream& stream) {
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        const Token c = token_value(candidate, "candidate");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          py::gil_scoped_release unlocked;
          return verify_lossy<T>(target_row, draft_row, c, alpha, beta, stream, thread_workspace());
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("candidate"), py::arg("alpha"), py::arg("beta"),
      py::arg("stream"), "Lossy speculative sampling of one candidate (see Lossy).");

  m.def(
      "verify_lossy_greedy",
      [](py::handle target_object, std::int64_t candidate, float alpha) {
        const Array target = float_arg(target_object, "target", 1);
        const Token c = token_value(candidate, "candidate");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          py::gil_scoped_release unlocked;
          return verify_lossy_greedy<T>(target_row, c, alpha);
        });
      },
      py::arg("target"), py::arg("candidate"), py::arg("alpha"),
      "The greedy lossy test on a (raw or warped) target row: accept iff\n"
      "target(candidate) >= (1 - alpha) max target, else emit argmax target. No draws.");

  m.def(
      "verify_cascade",
      [](py::handle raw_target_object, py::handle raw_draft_object, py::handle target_object,
         py::handle draft_object, std::int64_t candidate, Deferral rule, float alpha,
         const RandomStream& stream) {
        const Array raw_target = float_arg(raw_target_object, "raw_target", 1);
        const Array raw_draft = float_arg(raw_draft_object, "raw_draft", 1);
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        const Token c = token_value(candidate, "candidate");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          const auto raw_target_row = raw_target.span<T>("raw_target");
          const auto raw_draft_row = raw_draft.span<T>("raw_draft");
          py::gil_scoped_release unlocked;
          return verify_cascade<T>(raw_target_row, raw_draft_row, target_row, draft_row, c, rule,
                                   alpha, stream, thread_workspace());
        });
      },
      py::arg("raw_target"), py::arg("raw_draft"), py::arg("target"), py::arg("draft"),
      py::arg("candidate"), py::arg("rule"), py::arg("alpha"), py::arg("stream"),
      "Cascade verification of one candidate: raw (unwarped) rows for the deferral decision,\n"
      "the warped rows the candidate was drawn from for the mixture.");

  m.def(
      "verify_typical",
      [](py::handle target_object, py::handle candidates_object, float epsilon, float delta,
         const RandomStream& stream) {
        const Array target = float_arg(target_object, "target", 1);
        const Array candidates = candidates_arg(candidates_object, "candidates");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          py::gil_scoped_release unlocked;
          return verify_typical<T>(target_row, candidates.span<Token>("candidates"), epsilon, delta,
                                   stream);
        });
      },
      py::arg("target"), py::arg("candidates"), py::arg("epsilon"), py::arg("delta"),
      py::arg("stream"),
      "Typical acceptance on a warped target row; the correction is draw K of `stream`.");

  m.def(
      "verify_greedy",
      [](py::handle target_object, py::handle candidates_object) {
        const Array target = float_arg(target_object, "target", 1);
        const Array candidates = candidates_arg(candidates_object, "candidates");
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          py::gil_scoped_release unlocked;
          return verify_greedy<T>(target_row, candidates.span<Token>("candidates"));
        });
      },
      py::arg("target"), py::arg("candidates"),
      "Greedy matching: accepts the candidate equal to argmax target, else emits argmax.");
}

// ---- chains, blocks, trees, MTAD ----------------------------------------------------------

void bind_sequences(py::module_& m) {
  m.def(
      "verify_chain",
      [](py::handle rule_object, py::handle target_object, py::handle draft_object,
         py::handle tokens_object, const RandomStream& stream, py::handle raw_target_object,
         py::handle raw_draft_object) {
        const Rule rule = rule_arg(rule_object);
        const Array target = float_arg(target_object, "target_rows", 2);
        const Array draft = float_arg(draft_object, "draft_rows", 2);
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        const auto raw_target = optional_rows(raw_target_object, "raw_target_rows", 2);
        const auto raw_draft = optional_rows(raw_draft_object, "raw_draft_rows", 2);
        const std::int64_t vocab = target.dim(1);
        require_columns(draft, "draft_rows", vocab, "target_rows");
        if (raw_target) require_columns(*raw_target, "raw_target_rows", vocab, "target_rows");
        if (raw_draft) require_columns(*raw_draft, "raw_draft_rows", vocab, "target_rows");
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        std::vector<Token> out(draft_tokens.size() + 1);
        const ChainVerdict verdict =
            visit_floats(target, "target_rows", [&]<class T>(std::span<const T> target_rows) {
              const auto draft_rows = draft.span<T>("draft_rows");
              const auto raw_target_rows = span_or_empty<T>(raw_target, "raw_target_rows");
              const auto raw_draft_rows = span_or_empty<T>(raw_draft, "raw_draft_rows");
              py::gil_scoped_release unlocked;
              return verify_chain<T>(rule, target_rows, draft_rows, draft_tokens, vocab, stream,
                                     out, thread_workspace(), raw_target_rows, raw_draft_rows);
            });
        const auto emitted =
            std::span<const Token>(out).first(static_cast<std::size_t>(verdict.emitted));
        return py::make_tuple(verdict, output_from(emitted, kind_of(target, draft, tokens)));
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
        const Array target = float_arg(target_object, "target_rows", 2);
        const Array draft = float_arg(draft_object, "draft_rows", 2);
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        const std::int64_t vocab = target.dim(1);
        require_columns(draft, "draft_rows", vocab, "target_rows");
        const auto draft_tokens = tokens.span<Token>("draft_tokens");
        std::vector<Token> out(draft_tokens.size() + 1);
        const ChainVerdict verdict =
            visit_floats(target, "target_rows", [&]<class T>(std::span<const T> target_rows) {
              const auto draft_rows = draft.span<T>("draft_rows");
              py::gil_scoped_release unlocked;
              return verify_block<T>(target_rows, draft_rows, draft_tokens, vocab, stream, out,
                                     thread_workspace());
            });
        const auto emitted =
            std::span<const Token>(out).first(static_cast<std::size_t>(verdict.emitted));
        return py::make_tuple(verdict, output_from(emitted, kind_of(target, draft, tokens)));
      },
      py::arg("target_rows"), py::arg("draft_rows"), py::arg("draft_tokens"), py::arg("stream"),
      "Block verification (Sun et al. 2024) of L draft tokens, rows as verify_chain's; lossless\n"
      "and at least as many accepted tokens in expectation as token-by-token rejection. One\n"
      "stream for the block: draw i - 1 is position i's uniform, draw L the final token.\n"
      "Returns (ChainVerdict, tokens).");

  m.def(
      "verify_tree",
      [](py::handle rule_object, py::handle tree_object, py::handle target_object,
         py::handle draft_object, const RandomStream& stream, py::handle raw_target_object,
         py::handle raw_draft_object) {
        const Rule rule = rule_arg(rule_object);
        if (!py::isinstance<DraftTree>(tree_object)) {
          throw Error("tree", fmt::format("is a {}; expected a DraftTree", type_name(tree_object)));
        }
        const auto& tree = tree_object.cast<const DraftTree&>();
        const Array target = float_arg(target_object, "target_rows", 2);
        const Array draft = float_arg(draft_object, "draft_rows", 2);
        const auto raw_target = optional_rows(raw_target_object, "raw_target_rows", 2);
        const auto raw_draft = optional_rows(raw_draft_object, "raw_draft_rows", 2);
        const std::int64_t vocab = target.dim(1);
        require_columns(draft, "draft_rows", vocab, "target_rows");
        if (raw_target) require_columns(*raw_target, "raw_target_rows", vocab, "target_rows");
        if (raw_draft) require_columns(*raw_draft, "raw_draft_rows", vocab, "target_rows");
        std::vector<std::int32_t> accepted(tree.size());
        const TreeVerdict verdict =
            visit_floats(target, "target_rows", [&]<class T>(std::span<const T> target_rows) {
              const auto draft_rows = draft.span<T>("draft_rows");
              const auto raw_target_rows = span_or_empty<T>(raw_target, "raw_target_rows");
              const auto raw_draft_rows = span_or_empty<T>(raw_draft, "raw_draft_rows");
              py::gil_scoped_release unlocked;
              return verify_tree<T>(rule, tree.view(), target_rows, draft_rows,
                                    vocab, stream, accepted, thread_workspace(), raw_target_rows,
                                    raw_draft_rows);
            });
        const auto nodes = std::span<const std::int32_t>(accepted).first(
            static_cast<std::size_t>(verdict.accepted));
        return py::make_tuple(verdict, output_from(nodes, kind_of(target, draft)));
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
      "verify_mtad",
      [](py::handle tokens_object, py::handle log_probs_object, py::handle target_object, float tau,
         const RandomStream& stream) {
        const Array tokens = token_arg(tokens_object, "draft_tokens", 1);
        const Array log_probs = float32_arg(log_probs_object, "draft_log_probs", 1);
        const Array target = float32_arg(target_object, "target_rows", 2);
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

void bind_exact(py::module_& m) {
  m.def(
      "exact_node_distribution",
      [](py::handle rule_object, py::handle target_object, py::handle draft_object,
         std::int32_t count, py::handle raw_target_object, py::handle raw_draft_object) {
        const Rule rule = rule_arg(rule_object);
        const Array target = float32_arg(target_object, "target", 1);
        const Array draft = float32_arg(draft_object, "draft", 1);
        const auto raw_target = optional_float32(raw_target_object, "raw_target");
        const auto raw_draft = optional_float32(raw_draft_object, "raw_draft");
        Output<double> out({target.dim(0)}, kind_of(target, draft));
        double accepted = 0.0;
        {
          py::gil_scoped_release unlocked;
          accepted = exact_node_distribution(rule, target.span<float>("target"),
                                             draft.span<float>("draft"), count, out.values(),
                                             span_or_empty<float>(raw_target, "raw_target"),
                                             span_or_empty<float>(raw_draft, "raw_draft"));
        }
        return py::make_tuple(accepted, out.result());
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
        const Rule rule = rule_arg(rule_object);
        const Array target = float32_arg(target_object, "target", 1);
        const Array draft = float32_arg(draft_object, "draft", 1);
        const auto raw_target = optional_float32(raw_target_object, "raw_target");
        const auto raw_draft = optional_float32(raw_draft_object, "raw_draft");
        Output<double> out({target.dim(0)}, kind_of(target, draft));
        bool claims = false;
        {
          py::gil_scoped_release unlocked;
          claims = claimed_distribution(rule, target.span<float>("target"),
                                        draft.span<float>("draft"), count, out.values(),
                                        span_or_empty<float>(raw_target, "raw_target"),
                                        span_or_empty<float>(raw_draft, "raw_draft"));
        }
        if (!claims) return py::none();
        return out.result();
      },
      py::arg("rule"), py::arg("target"), py::arg("draft"), py::arg("count"),
      py::arg("raw_target") = py::none(), py::arg("raw_draft") = py::none(),
      "The distribution `rule` claims to produce (float64 [V]): the warped target for lossless\n"
      "rules, pi for lossy sampling and cascades, one-hot argmax for greedy matching; None for\n"
      "typical acceptance, which claims nothing.");

  m.def(
      "spectr_gamma",
      [](py::handle target_object, py::handle draft_object, std::int32_t count) {
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          py::gil_scoped_release unlocked;
          return spectr_gamma<T>(target_row, draft_row, count);
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("count"),
      "SpecTr's automatic gamma: the root of 1 - (1 - beta)^K = gamma * beta on [1, K] for\n"
      "K = count candidates.");

  m.def(
      "lossy_tuned_beta",
      [](py::handle target_object, py::handle draft_object, double alpha) {
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        return visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          py::gil_scoped_release unlocked;
          return lossy_tuned_beta<T>(target_row, draft_row, alpha);
        });
      },
      py::arg("target"), py::arg("draft"), py::arg("alpha"),
      "The tuned beta of lossy sampling: the output is then exactly\n"
      "max(min(draft, target / (1 - alpha)), target / beta).");

  m.def(
      "cascade_target",
      [](py::handle raw_target_object, py::handle raw_draft_object, py::handle target_object,
         py::handle draft_object, Deferral rule, float alpha) {
        const Array raw_target = float_arg(raw_target_object, "raw_target", 1);
        const Array raw_draft = float_arg(raw_draft_object, "raw_draft", 1);
        const Array target = float_arg(target_object, "target", 1);
        const Array draft = float_arg(draft_object, "draft", 1);
        Output<float> pi({target.dim(0)}, kind_of(raw_target, raw_draft, target, draft));
        visit_floats(target, "target", [&]<class T>(std::span<const T> target_row) {
          const auto draft_row = draft.span<T>("draft");
          const auto raw_target_row = raw_target.span<T>("raw_target");
          const auto raw_draft_row = raw_draft.span<T>("raw_draft");
          py::gil_scoped_release unlocked;
          cascade_target<T>(raw_target_row, raw_draft_row, target_row, draft_row, rule, alpha,
                            pi.values());
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
        const Array a = float_arg(a_object, "a", 1);
        const Array b = float_arg(b_object, "b", 1);
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
        const Array p = float_arg(probabilities_object, "probabilities", 1);
        return visit_floats(p, "probabilities", [&]<class T>(std::span<const T> row) {
          py::gil_scoped_release unlocked;
          return entropy<T>(row);
        });
      },
      py::arg("probabilities"),
      "Entropy in nats of a probability row (typical acceptance's threshold is\n"
      "min(epsilon, delta * exp(-entropy(target)))).");
}

// ---- batches ------------------------------------------------------------------------------

backend::Cpu cpu_with(int threads) {
  if (threads < 0)
    throw Error("threads", fmt::format("{} is negative (0 = every hardware thread)", threads));
  return backend::cpu.with_threads(threads);
}

/// Rows of a batch given as [rows, V] or [sequences, rows per sequence, V]: the row count and V.
template <class T>
MatrixView<const T> batch_rows(const Array& a, std::string_view name) {
  if (a.ndim() != 2 && a.ndim() != 3) {
    throw Error(std::string(name),
                fmt::format("has {} dimensions; expected 2 ([rows, vocab]) or 3", a.ndim()));
  }
  const std::int64_t vocab = a.shape.back();
  const std::int64_t rows = a.ndim() == 2 ? a.dim(0) : a.dim(0) * a.dim(1);
  return {a.span<T>(name).data(), rows, vocab};
}

/// Where a chain batch's sequences lie: the draft offsets given (ragged) or made for B
/// sequences of gamma tokens (uniform, from [B, gamma] tokens), and the shape of `emitted`.
struct ChainBatchLayout {
  std::int64_t batch = 0;
  std::vector<std::int64_t> emitted_shape;
  std::vector<std::int32_t> uniform;  // the offsets of a uniform batch
  std::optional<Array> ragged;        // the caller's offsets
  [[nodiscard]] std::span<const std::int32_t> offsets() const {
    return ragged ? ragged->span<std::int32_t>("draft_offsets")
                  : std::span<const std::int32_t>(uniform);
  }
};

ChainBatchLayout chain_batch_layout(const Array& tokens, py::handle offsets_object) {
  ChainBatchLayout layout;
  if (offsets_object.is_none()) {
    if (tokens.ndim() != 2) {
      throw Error("draft_tokens",
                  fmt::format("has {} dimensions; a uniform batch takes [B, gamma] tokens (pass "
                              "draft_offsets for a ragged batch of 1-D tokens)",
                              tokens.ndim()));
    }
    layout.batch = tokens.dim(0);
    layout.uniform.resize(static_cast<std::size_t>(layout.batch) + 1);
    uniform_draft_offsets(tokens.dim(1), layout.uniform);
    layout.emitted_shape = {layout.batch, tokens.dim(1) + 1};
    return layout;
  }
  layout.ragged = int32_arg(offsets_object, "draft_offsets", 1);
  require_ndim(tokens, "draft_tokens", 1);
  const auto offsets = layout.offsets();
  layout.batch = std::max<std::int64_t>(static_cast<std::int64_t>(offsets.size()) - 1, 0);
  // Sized by the offsets, so a token count that disagrees is reported as draft_tokens.
  const std::int64_t drafts = offsets.empty() ? tokens.size() : std::max(offsets.back(), 0);
  layout.emitted_shape = {drafts + layout.batch};
  return layout;
}

/// verify_chain_batch on the CPU with its inputs read and outputs allocated (GIL held); run()
/// needs no GIL.
struct HostChainBatch {
  backend::Cpu cpu;
  Array target, draft, tokens;
  std::vector<RandomStream> streams;
  ChainBatchLayout layout;
  Output<Token> emitted;
  Output<std::int32_t> accepted;
  ChainBatchArgs args;

  HostChainBatch(py::handle target_object, py::handle draft_object, py::handle tokens_object,
                 py::handle streams_object, py::handle offsets_object, int threads)
      : cpu(cpu_with(threads)),
        target(float32_arg(target_object, "target_rows")),
        draft(float32_arg(draft_object, "draft_rows")),
        tokens(token_arg(tokens_object, "draft_tokens")),
        streams(streams_arg(streams_object)),
        layout(chain_batch_layout(tokens, offsets_object)),
        emitted(layout.emitted_shape, kind_of(target, draft, tokens)),
        accepted({layout.batch}, kind_of(target, draft, tokens)) {
    args.draft_offsets = layout.offsets();
    args.target_rows = batch_rows<float>(target, "target_rows");
    args.draft_rows = batch_rows<float>(draft, "draft_rows");
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams;
    args.emitted = emitted.values();
    args.accepted = accepted.values();
  }
  void run() { verify_chain_batch(cpu, args, thread_workspace()); }
};

/// The name of the first of `arrays` that lives on a CUDA device, or an empty view.
std::string_view first_cuda(std::initializer_list<std::pair<py::handle, std::string_view>> arrays) {
  for (const auto& [object, name] : arrays) {
    if (is_cuda_array(object)) return name;
  }
  return {};
}

#if defined(SPECDEC_PYTHON_WITH_CUDA)

/// The largest count of one sequence in CSR offsets (0 for offsets the C++ checks will refuse).
std::int64_t largest_count(std::span<const std::int32_t> offsets) {
  std::int64_t largest = 0;
  for (std::size_t b = 1; b < offsets.size(); ++b) {
    largest = std::max<std::int64_t>(largest, offsets[b] - offsets[b - 1]);
  }
  return largest;
}

/// Makes `device` the current CUDA device for the scope (kernels launch on the current device).
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    cudaGetDevice(&previous_);
    if (device != previous_) cudaSetDevice(device);
  }
  ~DeviceScope() { cudaSetDevice(previous_); }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
};

/// A device input of a CUDA call: a torch CUDA tensor on `device` (-1: any device).
Array device_arg(py::handle obj, std::string_view name, int device) {
  Array a = array_arg(obj, name);
  if (!a.on_cuda) {
    throw Error(std::string(name),
                "is on the host while the rows are CUDA tensors; pass every row and token input "
                "on the same device");
  }
  if (a.kind != ArrayKind::torch) {
    throw Error(std::string(name),
                "is a CUDA array but not a torch tensor (CUDA results are made as torch tensors)");
  }
  if (device >= 0 && a.device != device) {
    throw Error(std::string(name),
                fmt::format("is on cuda:{}, the rows on cuda:{}", a.device, device));
  }
  return a;
}

/// Device tokens as int32 (an int64 tensor is narrowed on the device, unchecked like the rows).
Array device_tokens(py::handle obj, std::string_view name, int device) {
  Array a = device_arg(obj, name, device);
  if (a.dtype == DType::int64)
    a = device_arg(py::reinterpret_borrow<py::object>(obj).attr("int")(), name, device);
  if (a.dtype != DType::int32) {
    throw Error(std::string(name),
                fmt::format("has dtype {}; expected int32 or int64", dtype_name(a.dtype)));
  }
  return a;
}

/// A fresh CUDA tensor and its memory.
struct DeviceOutput {
  py::object tensor;
  Array array;
  DeviceOutput(const std::vector<std::int64_t>& shape, DType dtype, int device,
               std::string_view name)
      : tensor(cuda_empty(shape, dtype, device)), array(array_arg(tensor, name)) {}
  template <class T>
  std::span<T> values(std::string_view name) const {
    return array.mutable_span<T>(name);
  }
};

/// Device scratch of `bytes` bytes, alive until the call returns; PyTorch's allocator orders its
/// reuse after the work enqueued on the current stream.
struct DeviceScratch {
  DeviceOutput memory;
  std::size_t bytes;
  DeviceScratch(std::size_t size, int device)
      : memory({static_cast<std::int64_t>(std::max<std::size_t>(size, 1))}, DType::uint8, device,
               "workspace"),
        bytes(size) {}
  [[nodiscard]] backend::DeviceWorkspace workspace() const { return {memory.array.data, bytes}; }
};

backend::Cuda current_stream(int device) {
  return backend::cuda.on(reinterpret_cast<cudaStream_t>(torch_current_stream(device)));
}

py::tuple cuda_chain_batch(py::handle target_object, py::handle draft_object,
                           py::handle tokens_object, py::handle streams_object,
                           py::handle offsets_object) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_rows", device);
  const Array tokens = device_tokens(tokens_object, "draft_tokens", device);
  const std::vector<RandomStream> streams = streams_arg(streams_object);
  const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
  const DeviceOutput emitted(layout.emitted_shape, DType::int32, device, "emitted");
  const DeviceOutput accepted({layout.batch}, DType::int32, device, "accepted");
  ChainBatchArgs args;
  args.draft_offsets = layout.offsets();
  args.target_rows = batch_rows<float>(target, "target_rows");
  args.draft_rows = batch_rows<float>(draft, "draft_rows");
  args.draft_tokens = tokens.span<Token>("draft_tokens");
  args.streams = streams;
  args.emitted = emitted.values<Token>("emitted");
  args.accepted = accepted.values<std::int32_t>("accepted");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  const DeviceScratch scratch(
      workspace_size(cuda, ChainBatchShape{.batch = layout.batch,
                                           .max_gamma = largest_count(args.draft_offsets),
                                           .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    verify_chain_batch(cuda, args, scratch.workspace());
  }
  return py::make_tuple(emitted.tensor, accepted.tensor);
}

py::tuple cuda_chain_batch_logits(py::handle target_object, py::handle draft_object,
                                  py::handle warps_object, py::handle tokens_object,
                                  py::handle streams_object, py::handle offsets_object) {
  const Array target = device_arg(target_object, "target_logits", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_logits", device);
  const Array tokens = device_tokens(tokens_object, "draft_tokens", device);
  const std::vector<Warp> warps = warps_arg(warps_object);
  const std::vector<RandomStream> streams = streams_arg(streams_object);
  const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
  const DeviceOutput emitted(layout.emitted_shape, DType::int32, device, "emitted");
  const DeviceOutput accepted({layout.batch}, DType::int32, device, "accepted");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
    ChainBatchLogitsArgs<T> args;
    args.draft_offsets = layout.offsets();
    args.target_logits = batch_rows<T>(target, "target_logits");
    args.draft_logits = batch_rows<T>(draft, "draft_logits");
    args.warps = warps;
    args.draft_tokens = tokens.span<Token>("draft_tokens");
    args.streams = streams;
    args.emitted = emitted.values<Token>("emitted");
    args.accepted = accepted.values<std::int32_t>("accepted");
    const DeviceScratch scratch(
        workspace_size(cuda, ChainBatchShape{.batch = layout.batch,
                                             .max_gamma = largest_count(args.draft_offsets),
                                             .vocab = args.target_logits.cols,
                                             .from_logits = true}),
        device);
    py::gil_scoped_release unlocked;
    verify_chain_batch_logits(cuda, args, scratch.workspace());
  });
  return py::make_tuple(emitted.tensor, accepted.tensor);
}

py::tuple cuda_tree_batch(const Rule& rule, py::handle offsets_object, py::handle tokens_object,
                          py::handle parents_object, py::handle target_object,
                          py::handle draft_object, py::handle streams_object) {
  const Array target = device_arg(target_object, "target_rows", -1);
  const int device = target.device;
  const Array draft = device_arg(draft_object, "draft_rows", device);
  const Array tokens = device_tokens(tokens_object, "tokens", device);
  const Array parents = device_tokens(parents_object, "parents", device);
  require_ndim(tokens, "tokens", 1);
  require_ndim(parents, "parents", 1);
  const Array offsets = int32_arg(offsets_object, "node_offsets", 1);
  const std::vector<RandomStream> streams = streams_arg(streams_object);
  const auto batch = std::max<std::int64_t>(offsets.size() - 1, 0);
  const DeviceOutput accepted_nodes({tokens.size()}, DType::int32, device, "accepted_nodes");
  accepted_nodes.tensor.attr("fill_")(-1);
  const DeviceOutput accepted({batch}, DType::int32, device, "accepted");
  const DeviceOutput final_tokens({batch}, DType::int32, device, "final_tokens");
  const DeviceOutput bonus({batch}, DType::uint8, device, "bonus");
  TreeBatchArgs args;
  args.node_offsets = offsets.span<std::int32_t>("node_offsets");
  args.trees = {tokens.span<Token>("tokens"), parents.span<std::int32_t>("parents")};
  args.target_rows = batch_rows<float>(target, "target_rows");
  args.draft_rows = batch_rows<float>(draft, "draft_rows");
  args.streams = streams;
  args.accepted_nodes = accepted_nodes.values<std::int32_t>("accepted_nodes");
  args.accepted = accepted.values<std::int32_t>("accepted");
  args.final_tokens = final_tokens.values<Token>("final_tokens");
  args.bonus = bonus.values<std::uint8_t>("bonus");
  const DeviceScope scope(device);
  const backend::Cuda cuda = current_stream(device);
  const DeviceScratch scratch(
      workspace_size(cuda, TreeBatchShape{.batch = batch,
                                          .max_nodes = largest_count(args.node_offsets),
                                          .vocab = args.target_rows.cols}),
      device);
  {
    py::gil_scoped_release unlocked;
    verify_tree_batch(cuda, rule, args, scratch.workspace());
  }
  return py::make_tuple(accepted_nodes.tensor, accepted.tensor, final_tokens.tensor, bonus.tensor);
}

#endif  // SPECDEC_PYTHON_WITH_CUDA

/// True when the call must run on CUDA (`cuda_name` names a CUDA input); refuses CUDA inputs in
/// a build without CUDA.
bool runs_on_cuda(std::string_view cuda_name) {
  if (cuda_name.empty()) return false;
#if !defined(SPECDEC_PYTHON_WITH_CUDA)
  throw Error(std::string(cuda_name), "is a CUDA tensor, but specdec was built without CUDA");
#endif
  return true;
}

void bind_batches(py::module_& m) {
  m.attr("_with_cuda") =
#if defined(SPECDEC_PYTHON_WITH_CUDA)
      true;
#else
      false;
#endif
  m.def(
      "verify_chain_batch",
      [](py::handle target_object, py::handle draft_object, py::handle tokens_object,
         py::handle streams_object, py::handle offsets_object, int threads) {
        if (runs_on_cuda(first_cuda({{target_object, "target_rows"},
                                     {draft_object, "draft_rows"},
                                     {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch(target_object, draft_object, tokens_object, streams_object,
                                  offsets_object);
#endif
        }
        HostChainBatch call(target_object, draft_object, tokens_object, streams_object,
                            offsets_object, threads);
        {
          py::gil_scoped_release unlocked;
          call.run();
        }
        return py::make_tuple(call.emitted.result(), call.accepted.result());
      },
      py::kw_only(), py::arg("target_rows"), py::arg("draft_rows"), py::arg("draft_tokens"),
      py::arg("streams"), py::arg("draft_offsets") = py::none(), py::arg("threads") = 0,
      "Chain verification with standard rejection sampling for B sequences, in parallel on the\n"
      "CPU (`threads`: 0 = every hardware thread; results never depend on it). Sequence b is\n"
      "verify_chain(Rejection(), ...) of its rows with streams[b], bit for bit.\n"
      "Uniform batch (draft_offsets None): draft_tokens [B, gamma], target_rows\n"
      "[B, gamma + 1, V] (or [B * (gamma + 1), V]), draft_rows [B, gamma, V] (or 2-D); returns\n"
      "(emitted [B, gamma + 1], accepted [B]).\n"
      "Ragged batch: draft_offsets [B + 1] (CSR; sequence b drafted draft_offsets[b + 1] -\n"
      "draft_offsets[b] tokens), draft_tokens [G], target_rows [G + B, V] (sequence b's rows from\n"
      "row draft_offsets[b] + b), draft_rows [G, V]; returns (emitted [G + B], accepted [B]).\n"
      "Emitted tokens: the accepted ones, the correction or bonus token, then -1 padding.\n"
      "Rows are float32 (float16 / bfloat16 rows are converted; see verify_chain_batch_logits).\n"
      "CUDA: when the rows and tokens are torch CUDA tensors the call runs on the CUDA backend\n"
      "on PyTorch's current stream, without synchronising, and returns CUDA tensors (offsets\n"
      "and streams stay host values; device rows are not scanned, so they must be valid).");

  m.def(
      "_time_verify_chain_batch",
      [](std::int64_t repeats, py::handle target_object, py::handle draft_object,
         py::handle tokens_object, py::handle streams_object, py::handle offsets_object,
         int threads) {
        if (repeats < 1) throw Error("repeats", fmt::format("{} must be >= 1", repeats));
        HostChainBatch call(target_object, draft_object, tokens_object, streams_object,
                            offsets_object, threads);
        py::gil_scoped_release unlocked;
        call.run();  // warm-up: the workspace grows here
        const auto start = std::chrono::steady_clock::now();
        for (std::int64_t i = 0; i < repeats; ++i) call.run();
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        return elapsed.count() / static_cast<double>(repeats);
      },
      py::arg("repeats"), py::kw_only(), py::arg("target_rows"), py::arg("draft_rows"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets") = py::none(),
      py::arg("threads") = 0,
      "Seconds per call of the C++ verify_chain_batch alone on these arguments (mean of\n"
      "`repeats` calls after one warm-up), for measuring the Python call's overhead\n"
      "(bench/python/bench_call_overhead.py).");

  m.def(
      "verify_chain_batch_logits",
      [](py::handle target_object, py::handle draft_object, py::handle warps_object,
         py::handle tokens_object, py::handle streams_object, py::handle offsets_object,
         int threads) {
        if (runs_on_cuda(first_cuda({{target_object, "target_logits"},
                                     {draft_object, "draft_logits"},
                                     {tokens_object, "draft_tokens"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_chain_batch_logits(target_object, draft_object, warps_object, tokens_object,
                                         streams_object, offsets_object);
#endif
        }
        const backend::Cpu cpu = cpu_with(threads);
        const Array target = float_arg(target_object, "target_logits");
        const Array draft = float_arg(draft_object, "draft_logits");
        const Array tokens = token_arg(tokens_object, "draft_tokens");
        const std::vector<Warp> warps = warps_arg(warps_object);
        const std::vector<RandomStream> streams = streams_arg(streams_object);
        const ChainBatchLayout layout = chain_batch_layout(tokens, offsets_object);
        Output<Token> emitted(layout.emitted_shape, kind_of(target, draft, tokens));
        Output<std::int32_t> accepted({layout.batch}, kind_of(target, draft, tokens));
        visit_floats(target, "target_logits", [&]<class T>(std::span<const T>) {
          ChainBatchLogitsArgs<T> args;
          args.draft_offsets = layout.offsets();
          args.target_logits = batch_rows<T>(target, "target_logits");
          args.draft_logits = batch_rows<T>(draft, "draft_logits");  // same dtype as the target
          args.warps = warps;
          args.draft_tokens = tokens.span<Token>("draft_tokens");
          args.streams = streams;
          args.emitted = emitted.values();
          args.accepted = accepted.values();
          py::gil_scoped_release unlocked;
          verify_chain_batch_logits(cpu, args, thread_workspace());
        });
        return py::make_tuple(emitted.result(), accepted.result());
      },
      py::kw_only(), py::arg("target_logits"), py::arg("draft_logits"), py::arg("warps"),
      py::arg("draft_tokens"), py::arg("streams"), py::arg("draft_offsets") = py::none(),
      py::arg("threads") = 0,
      "verify_chain_batch from raw logits (float32, float16 or bfloat16, read in place): each\n"
      "row is warped with warps[b] (a Warp, or a list with one per sequence) and verified;\n"
      "the same layout, draws and outputs as verify_chain_batch, and the same CUDA rule.");

  m.def(
      "verify_tree_batch",
      [](py::handle rule_object, py::handle offsets_object, py::handle tokens_object,
         py::handle parents_object, py::handle target_object, py::handle draft_object,
         py::handle streams_object, int threads) {
        const Rule rule = rule_arg(rule_object);
        if (runs_on_cuda(first_cuda({{target_object, "target_rows"},
                                     {draft_object, "draft_rows"},
                                     {tokens_object, "tokens"},
                                     {parents_object, "parents"}}))) {
#if defined(SPECDEC_PYTHON_WITH_CUDA)
          return cuda_tree_batch(rule, offsets_object, tokens_object, parents_object, target_object,
                                 draft_object, streams_object);
#endif
        }
        const backend::Cpu cpu = cpu_with(threads);
        const Array offsets = int32_arg(offsets_object, "node_offsets", 1);
        const Array tokens = token_arg(tokens_object, "tokens", 1);
        const Array parents = int32_arg(parents_object, "parents", 1);
        const Array target = float32_arg(target_object, "target_rows");
        const Array draft = float32_arg(draft_object, "draft_rows");
        const std::vector<RandomStream> streams = streams_arg(streams_object);
        const auto batch = std::max<std::int64_t>(offsets.size() - 1, 0);
        const auto kind = kind_of(target, draft, tokens);
        Output<std::int32_t> accepted_nodes({tokens.size()}, kind);
        Output<std::int32_t> accepted({batch}, kind);
        Output<Token> final_tokens({batch}, kind);
        Output<std::uint8_t> bonus({batch}, kind);
        std::fill(accepted_nodes.values().begin(), accepted_nodes.values().end(), -1);
        TreeBatchArgs args;
        args.node_offsets = offsets.span<std::int32_t>("node_offsets");
        args.trees = {tokens.span<Token>("tokens"), parents.span<std::int32_t>("parents")};
        args.target_rows = batch_rows<float>(target, "target_rows");
        args.draft_rows = batch_rows<float>(draft, "draft_rows");
        args.streams = streams;
        args.accepted_nodes = accepted_nodes.values();
        args.accepted = accepted.values();
        args.final_tokens = final_tokens.values();
        args.bonus = bonus.values();
        {
          py::gil_scoped_release unlocked;
          verify_tree_batch(cpu, rule, args, thread_workspace());
        }
        return py::make_tuple(accepted_nodes.result(), accepted.result(), final_tokens.result(),
                              bonus.result());
      },
      py::arg("rule"), py::kw_only(), py::arg("node_offsets"), py::arg("tokens"),
      py::arg("parents"), py::arg("target_rows"), py::arg("draft_rows"), py::arg("streams"),
      py::arg("threads") = 0,
      "Tree verification for B ragged trees in CSR layout, in parallel on the CPU; tree b is\n"
      "verify_tree(rule, ...) of its rows with streams[b], bit for bit.\n"
      "node_offsets [B + 1]; tokens, parents [N] (tree b's nodes at node_offsets[b] ..\n"
      "node_offsets[b + 1], parents local to the tree); target_rows, draft_rows [N + B, V]\n"
      "(tree b's N_b + 1 rows from row node_offsets[b] + b, root row first).\n"
      "Returns (accepted_nodes [N] (tree b's accepted local ids from node_offsets[b], the rest\n"
      "-1), accepted [B], final_tokens [B], bonus [B] (uint8, 1 = ended at a leaf)).\n"
      "CUDA tensors run on the CUDA backend as in verify_chain_batch (rules Recursive,\n"
      "MultiRound and Rejection there).");
}

}  // namespace

void bind_verify(py::module_& m) {
  bind_rules(m);
  bind_verdicts(m);
  bind_node(m);
  bind_sequences(m);
  bind_exact(m);
  bind_batches(m);
}

}  // namespace specdec::python
