// SPDX-License-Identifier: MIT
// The node rules (classes, equality, repr, the rule helpers) and the verdict types.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <string>
#include <type_traits>

#include "args.hpp"
#include "bindings.hpp"
#include "specdec/verify/verify.hpp"

namespace specdec::python {

namespace {

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

void bind_rule_classes(py::module_& m) {
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
      SPECDEC_FIELDS(Lossy, alpha, beta, tune_beta, greedy);
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
      SPECDEC_FIELDS(Cascade, deferral, alpha);
  rule_methods(cascade);

  py::class_<Typical> typical(m, "Typical",
                              "Typical acceptance (Medusa): accepts the first candidate x with\n"
                              "target(x) > min(epsilon, delta * exp(-H(target))). Not lossless.");
  typical
      .def(py::init([](float epsilon, float delta) {
             return Typical{epsilon, delta};
           }),
           py::kw_only(), py::arg("epsilon") = 0.3f, py::arg("delta") = 0.09f)
      SPECDEC_FIELDS(Typical, epsilon, delta);
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

/// A field of a verdict class: its Python name and the member.
template <class V, class F>
struct Field {
  const char* name;
  F V::*member;
};

/// A verdict class: constructed from its fields by keyword, the fields read-only, == comparing
/// them and a repr naming them ("NodeVerdict(accepted=1, token=3)").
template <class V, class... F>
void bind_verdict(py::module_& m, const char* name, const char* doc, Field<V, F>... fields) {
  const auto text = [](const auto& value) -> std::string {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(value)>, bool>) {
      return value ? "True" : "False";
    } else {
      return fmt::format("{}", value);
    }
  };
  py::class_<V> cls(m, name, doc);
  cls.def(py::init([](F... values) { return V{values...}; }), py::arg(fields.name)...);
  (cls.def_readonly(fields.name, fields.member), ...);
  cls.def("__eq__", [fields...](const V& a, const py::object& b) {
    if (!py::isinstance<V>(b)) return false;
    const auto other = b.cast<V>();
    return ((a.*fields.member == other.*fields.member) && ...);
  });
  cls.def("__repr__", [name = std::string(name), text, fields...](const V& v) {
    std::string out;
    ((out += fmt::format("{}{}={}", out.empty() ? "" : ", ", fields.name, text(v.*fields.member))),
     ...);
    return name + "(" + out + ")";
  });
}

void bind_verdicts(py::module_& m) {
  bind_verdict(m, "NodeVerdict",
               "The outcome at one node: `accepted` is the index of the accepted candidate (-1\n"
               "when every one was rejected), `token` the accepted candidate or the correction\n"
               "token.",
               Field{"accepted", &NodeVerdict::accepted}, Field{"token", &NodeVerdict::token});
  bind_verdict(m, "ChainVerdict",
               "The outcome of a chain: `accepted` draft tokens (0..L) were kept and `emitted` =\n"
               "accepted + 1 tokens were written (the last one the correction or bonus token).",
               Field{"accepted", &ChainVerdict::accepted}, Field{"emitted", &ChainVerdict::emitted});
  bind_verdict(m, "TreeVerdict",
               "The outcome of a tree walk: `accepted` nodes were accepted, `token` is the\n"
               "correction token or, when `bonus`, the bonus token drawn at a leaf.",
               Field{"accepted", &TreeVerdict::accepted}, Field{"token", &TreeVerdict::token},
               Field{"bonus", &TreeVerdict::bonus});
  bind_verdict(m, "MtadVerdict",
               "The outcome of MTAD: `accepted` draft tokens kept (0..L), then `token` drawn from\n"
               "the target row after them.",
               Field{"accepted", &MtadVerdict::accepted}, Field{"token", &MtadVerdict::token});
}

}  // namespace

void bind_rules(py::module_& m) { bind_parts(m, {bind_rule_classes, bind_verdicts}); }

}  // namespace specdec::python
