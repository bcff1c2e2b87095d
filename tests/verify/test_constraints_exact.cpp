// SPDX-License-Identifier: MIT
// The exact law of constrained verification at V = 6: every draft (a chain of 3 tokens, a tree
// of depth 3) is enumerated with its probability, each position's accept and correction law
// taken from the rows the library transforms (rejection on chains, RRS on trees), and the
// emitted tokens, extended by sampling the target, compared with the target sampled
// autoregressively under the same constraints (transformed by the reference). Each transform
// alone and all together, the draft transformed and not, two warps. Then the verifiers
// themselves against the enumerated law of the emitted tokens: chi-square at 1e-6.
#include <cmath>
#include <map>

#include "constraints_reference.hpp"
#include "helpers.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/verify/exact.hpp"

using namespace specdec;

namespace {

constexpr std::int64_t kVocab = 6;
constexpr std::size_t kV = 6;
constexpr int kLength = 3;  // chain draft tokens, tree depth

using Law = std::map<std::vector<Token>, double>;

std::uint64_t hash_of(const std::vector<Token>& prefix, std::uint64_t salt) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ salt;
  for (const Token t : prefix) h = (h ^ static_cast<std::uint64_t>(t + 1)) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

// The grammar: its mask after `prefix` allows tokens 1 and 2 always, the others as the prefix's
// hash says (one int32 word: V = 6).
std::int32_t grammar_mask(const std::vector<Token>& prefix) {
  return static_cast<std::int32_t>((hash_of(prefix, 17) & 0b111001u) | 0b110u);
}

// Raw logits after `prefix`: the target's, and the draft's near them.
std::vector<float> raw_logits(const std::vector<Token>& prefix, bool draft) {
  toy::ToyRandom rng(hash_of(prefix, 5));
  std::vector<float> row(kV);
  for (float& x : row) x = static_cast<float>(1.5 * rng.normal());
  toy::ToyRandom noise(hash_of(prefix, 11));
  for (float& x : row) x += draft ? static_cast<float>(0.9 * noise.normal()) : 0.0f;
  return row;
}

// The transforms, as bits of a setting.
constexpr int kGrammar = 1, kAllowed = 2, kBanned = 4, kMinTokens = 8, kRepetition = 16,
              kFrequency = 32, kPresence = 64, kAll = 127;

// A request's constraints with their storage; the bitmask row is the grammar's, per prefix.
struct Request {
  bool grammar = false;
  std::vector<Token> allowed, stops, words, tail;
  std::vector<std::int32_t> offsets;
  std::vector<PenalisedToken> penalised;
  LogitConstraints c;
};

// Tokens 1 and 2 survive every transform: no row is left empty.
Request make_request(int which) {
  Request q;
  q.grammar = (which & kGrammar) != 0;
  if ((which & kAllowed) != 0) q.allowed = {0, 1, 2, 3, 4};
  if ((which & kBanned) != 0) {
    // 4 after 2; 3 after 1, 1 (the output ends with 1); 5 everywhere.
    q.words = {2, 4, 1, 1, 3, 5};
    q.offsets = {0, 2, 5, 6};
    q.tail = {0, 1};
  }
  if ((which & kMinTokens) != 0) {
    q.stops = {0, 3};
    q.c.min_tokens = 3;
    q.c.output_length = 1;
  }
  if ((which & (kRepetition | kFrequency | kPresence)) != 0) {
    q.penalised = {{1, 2, false}, {3, 0, true}, {4, 1, false}};
    q.c.penalties = {.repetition = (which & kRepetition) != 0 ? 1.6f : 1.0f,
                     .frequency = (which & kFrequency) != 0 ? 0.5f : 0.0f,
                     .presence = (which & kPresence) != 0 ? 0.7f : 0.0f,
                     .tokens = q.penalised};
  }
  q.c.allowed = q.allowed;
  q.c.stop_tokens = q.stops;
  q.c.bad_words = q.words;
  q.c.bad_word_offsets = q.offsets;
  q.c.output_tail = q.tail;
  return q;
}

std::vector<float> warped(const Warp& warp, const std::vector<float>& logits) {
  Workspace ws;
  std::vector<float> out(logits.size());
  warp_logits<float>(warp, logits, out, ws);
  return out;
}

// The rows of one setting after each prefix (cached): the target's transformed by the library
// and by the reference, the draft's as the drafter samples it.
struct Rows {
  const Request& q;
  Warp warp;
  bool draft_transformed;
  std::map<std::vector<Token>, std::vector<float>> library{}, reference{}, draft{};

  // The logits the reference transform makes after `prefix`.
  std::vector<float> reference_logits(const std::vector<Token>& prefix, bool of_draft) const {
    const std::int32_t mask = grammar_mask(prefix);
    return test::transform_row_reference(q.c, q.grammar ? &mask : nullptr,
                                         raw_logits(prefix, of_draft), prefix);
  }
  const std::vector<float>& target_library(const std::vector<Token>& prefix) {
    auto [it, fresh] = library.try_emplace(prefix);
    if (!fresh) return it->second;
    // The library's transform of a one-row request whose mask row is the grammar's.
    const std::vector<std::int32_t> mask = {grammar_mask(prefix)};
    LogitConstraints c = q.c;
    if (q.grammar) c.bitmask = mask;
    std::vector<float> out(kV);
    detail::transform_logit_row(c, 0, raw_logits(prefix, false).data(), prefix.data(),
                                std::ssize(prefix), kVocab, out.data());
    return it->second = warped(warp, out);
  }
  const std::vector<float>& target_reference(const std::vector<Token>& prefix) {
    auto [it, fresh] = reference.try_emplace(prefix);
    if (fresh) it->second = warped(warp, reference_logits(prefix, false));
    return it->second;
  }
  // The draft's logits after `prefix` as the verifier is given them.
  std::vector<float> draft_logits(const std::vector<Token>& prefix) const {
    return draft_transformed ? reference_logits(prefix, true) : raw_logits(prefix, true);
  }
  const std::vector<float>& draft_row(const std::vector<Token>& prefix) {
    auto [it, fresh] = draft.try_emplace(prefix);
    if (fresh) it->second = warped(warp, draft_logits(prefix));
    return it->second;
  }
};

std::vector<Token> plus(std::vector<Token> s, Token t) {
  s.push_back(t);
  return s;
}

// A warped row in double, summing to 1 there: the laws below subtract rows, and float rows
// summing to 1 +- 1e-7 would put that error on a residual of small mass.
std::vector<double> normalised(const std::vector<float>& row) {
  std::vector<double> out(row.begin(), row.end());
  double sum = 0.0;
  for (const double x : out) sum += x;
  for (double& x : out) x /= sum;
  return out;
}

// One node's outcome under `rule` given its candidates (distinct): the probability each
// candidate is accepted, and the correction law (mass over the other tokens).
struct NodeOutcome {
  std::vector<double> accept;
  std::vector<double> correction;
};

NodeOutcome node_outcome(const Rule& rule, const std::vector<float>& p, const std::vector<float>& q,
                         const std::vector<std::int32_t>& tuple) {
  const detail::ExactRows rows{
      .target = normalised(p), .draft = normalised(q), .raw_target = {}, .pi = {}};
  std::vector<double> out(kV, 0.0);
  const double accepted = detail::exact_outcome(rule, rows, tuple, 1.0, out);
  // A rejected candidate has no correction mass (its residual entry is 0), so out at a candidate
  // is its acceptance; one candidate: the returned acceptance itself.
  NodeOutcome o{{}, out};
  for (const auto x : tuple) {
    o.accept.push_back(tuple.size() == 1 ? accepted : out[static_cast<std::size_t>(x)]);
    o.correction[static_cast<std::size_t>(x)] -= o.accept.back();
  }
  return o;
}

// The law of a chain's emitted tokens (the accepted draft, then the correction or bonus token):
// every draft of kLength tokens with its probability.
Law chain_law(Rows& rows) {
  Law law;
  const auto walk = [&](auto&& self, const std::vector<Token>& drafted, double weight) -> void {
    if (drafted.size() < static_cast<std::size_t>(kLength)) {
      const auto q = normalised(rows.draft_row(drafted));
      for (Token x = 0; x < kVocab; ++x) {
        if (q[static_cast<std::size_t>(x)] > 0.0) self(self, plus(drafted, x), weight * q[x]);
      }
      return;
    }
    double reach = weight;
    std::vector<Token> prefix;
    for (const Token x : drafted) {
      const auto o =
          node_outcome(Rejection{}, rows.target_library(prefix), rows.draft_row(prefix), {x});
      for (Token y = 0; y < kVocab; ++y) {
        const double c = o.correction[static_cast<std::size_t>(y)];
        if (c > 0.0) law[plus(prefix, y)] += reach * c;
      }
      reach *= o.accept[0];
      if (reach == 0.0) return;
      prefix.push_back(x);
    }
    const auto bonus = normalised(rows.target_library(prefix));
    for (Token y = 0; y < kVocab; ++y) {
      if (bonus[static_cast<std::size_t>(y)] > 0.0) law[plus(prefix, y)] += reach * bonus[y];
    }
  };
  walk(walk, {}, 1.0);
  return law;
}

// The tree's shape: children per node at each depth (at most; fewer where the draft row has
// fewer tokens), drawn without replacement from the parent's draft row.
constexpr std::int32_t kBranching[kLength] = {2, 2, 1};

std::int32_t support(const std::vector<float>& row) {
  std::int32_t n = 0;
  for (const float x : row) n += x > 0.0f ? 1 : 0;
  return n;
}

// The law of a tree walk's emitted tokens under RRS: every candidate tuple at each node with
// its probability, an accepted child continuing into its own (independent) subtree.
void tree_law(Rows& rows, const std::vector<Token>& prefix, double weight, Law& law) {
  const auto& p = rows.target_library(prefix);
  const auto depth = prefix.size();
  if (depth == static_cast<std::size_t>(kLength)) {
    const auto bonus = normalised(p);
    for (Token y = 0; y < kVocab; ++y) {
      if (bonus[static_cast<std::size_t>(y)] > 0.0) law[plus(prefix, y)] += weight * bonus[y];
    }
    return;
  }
  const auto& q = rows.draft_row(prefix);
  const auto qd = normalised(q);
  const auto k = std::min(kBranching[depth], support(q));
  std::vector<std::int32_t> tuple;
  const auto walk = [&](auto&& self, double w, double removed) -> void {
    if (std::ssize(tuple) == k) {
      const auto o = node_outcome(Recursive{}, p, q, tuple);
      for (std::size_t j = 0; j < tuple.size(); ++j) {
        if (o.accept[j] > 0.0) tree_law(rows, plus(prefix, tuple[j]), w * o.accept[j], law);
      }
      for (Token y = 0; y < kVocab; ++y) {
        const double c = o.correction[static_cast<std::size_t>(y)];
        if (c > 0.0) law[plus(prefix, y)] += w * c;
      }
      return;
    }
    for (std::int32_t x = 0; x < kVocab; ++x) {
      const double qx = qd[static_cast<std::size_t>(x)];
      if (!(qx > 0.0) || std::find(tuple.begin(), tuple.end(), x) != tuple.end()) continue;
      tuple.push_back(x);
      self(self, w * qx / (1.0 - removed), removed + qx);
      tuple.pop_back();
    }
  };
  walk(walk, weight, 0.0);
}

// The law over kLength + 1 tokens of `emitted` extended by sampling the reference target.
std::vector<double> extended(Rows& rows, const Law& emitted) {
  std::vector<double> out(static_cast<std::size_t>(std::pow(kVocab, kLength + 1)), 0.0);
  const auto extend = [&](auto&& self, const std::vector<Token>& s, double w) -> void {
    if (s.size() == static_cast<std::size_t>(kLength) + 1) {
      std::size_t index = 0;
      for (const Token t : s) index = index * kV + static_cast<std::size_t>(t);
      out[index] += w;
      return;
    }
    const auto p = normalised(rows.target_reference(s));
    for (Token y = 0; y < kVocab; ++y) {
      if (p[static_cast<std::size_t>(y)] > 0.0) self(self, plus(s, y), w * p[y]);
    }
  };
  for (const auto& [s, w] : emitted) extend(extend, s, w);
  return out;
}

std::vector<Warp> exact_warps() { return {Warp{}, Warp{.temperature = 0.8f, .top_p = 0.9f}}; }

std::vector<int> exact_transforms() {
  return {kGrammar, kAllowed, kBanned, kMinTokens, kRepetition, kFrequency, kPresence, kAll};
}

}  // namespace

TEST_CASE("constrained chains and trees emit the constrained target's law: enumeration",
          "[verify][logits][constraints]") {
  std::int32_t compared = 0;
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    for (const auto& warp : exact_warps()) {
      for (const bool transformed : {false, true}) {
        INFO("transforms " << which << " temperature " << warp.temperature << " top_p "
                           << warp.top_p << " draft transformed " << transformed);
        Rows rows{.q = q, .warp = warp, .draft_transformed = transformed};
        const auto target = extended(rows, {{{}, 1.0}});
        {
          INFO("chain");
          test::check_close(extended(rows, chain_law(rows)), target, 1e-9);
        }
        Law tree;
        tree_law(rows, {}, 1.0, tree);
        INFO("tree");
        test::check_close(extended(rows, tree), target, 1e-9);
        ++compared;
      }
    }
  }
  CHECK(compared == 32);
}

TEST_CASE("the constraints change the law the enumeration compares",
          "[verify][logits][constraints]") {
  // Each transform moves the target's law (so the comparison above tests it), and an
  // untransformed draft proposes tokens the target forbids (rejected with certainty).
  Request none = make_request(0);
  Rows plain{.q = none, .warp = Warp{}, .draft_transformed = false};
  const auto unconstrained = extended(plain, {{{}, 1.0}});
  for (const int which : exact_transforms()) {
    const Request q = make_request(which);
    Rows rows{.q = q, .warp = Warp{}, .draft_transformed = false};
    const auto target = extended(rows, {{{}, 1.0}});
    double distance = 0.0;
    for (std::size_t i = 0; i < target.size(); ++i)
      distance += std::abs(target[i] - unconstrained[i]);
    INFO("transforms " << which);
    CHECK(distance > 1e-3);
  }
}

namespace {

// Draws a chain from the draft rows and verifies it with the constrained entry: the emitted
// tokens.
std::vector<Token> run_chain(Rows& rows, const RandomStream& stream, toy::ToyRandom& rng,
                             Workspace& ws) {
  std::vector<Token> tokens;
  std::vector<float> target, draft;
  std::vector<std::int32_t> mask;
  for (int i = 0; i <= kLength; ++i) {
    const auto t = raw_logits(tokens, false);
    target.insert(target.end(), t.begin(), t.end());
    mask.push_back(grammar_mask(tokens));
    if (i == kLength) break;
    const auto d = rows.draft_logits(tokens);
    draft.insert(draft.end(), d.begin(), d.end());
    tokens.push_back(detail::sample_row(rows.draft_row(tokens).data(), kVocab, rng.uniform()));
  }
  LogitConstraints c = rows.q.c;
  if (rows.q.grammar) c.bitmask = mask;
  std::vector<Token> out(kLength + 1);
  const auto v =
      verify_chain_logits_constrained(rows.warp, target, draft, tokens, kVocab, c, stream, out, ws);
  out.resize(static_cast<std::size_t>(v.emitted));
  return out;
}

// Draws a tree of kBranching's shape from the draft rows (children without replacement) and
// verifies it with the constrained entry under RRS: the emitted tokens.
std::vector<Token> run_tree(Rows& rows, const RandomStream& stream, toy::ToyRandom& rng,
                            Workspace& ws) {
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents, mask;
  std::vector<float> target, draft;
  std::vector<std::vector<Token>> prefixes;
  const auto add_row = [&](const std::vector<Token>& prefix) {
    const auto t = raw_logits(prefix, false);
    const auto d = rows.draft_logits(prefix);
    target.insert(target.end(), t.begin(), t.end());
    draft.insert(draft.end(), d.begin(), d.end());
    mask.push_back(grammar_mask(prefix));
    prefixes.push_back(prefix);
  };
  add_row({});
  // Rows in node order: node n's row is n + 1; children are drawn when their parent's row is.
  for (std::size_t row = 0; row < prefixes.size(); ++row) {
    const auto prefix = prefixes[row];
    if (prefix.size() == static_cast<std::size_t>(kLength)) continue;
    auto q = rows.draft_row(prefix);
    const auto k = std::min(kBranching[prefix.size()], support(q));
    for (std::int32_t j = 0; j < k; ++j) {
      const Token x = detail::sample_row(q.data(), kVocab, rng.uniform());
      // Without replacement: the drawn token leaves the row (sample_row normalises by the sum).
      q[static_cast<std::size_t>(x)] = 0.0f;
      tokens.push_back(x);
      parents.push_back(static_cast<std::int32_t>(row) - 1);
      add_row(plus(prefix, x));
    }
  }
  LogitConstraints c = rows.q.c;
  if (rows.q.grammar) c.bitmask = mask;
  std::vector<std::int32_t> accepted(tokens.size());
  const auto v = verify_tree_logits_constrained(Recursive{}, rows.warp, {tokens, parents},
                                                {target, draft}, kVocab, c, stream, accepted, ws);
  std::vector<Token> out;
  for (std::int32_t i = 0; i < v.accepted; ++i) {
    out.push_back(tokens[static_cast<std::size_t>(accepted[static_cast<std::size_t>(i)])]);
  }
  out.push_back(v.token);
  return out;
}

}  // namespace

TEST_CASE("constrained chain and tree verifiers pass a chi-square test against the enumeration",
          "[verify][logits][constraints][mc]") {
  // False-failure probability test::kFalseFailureProbability per case; fixed seeds.
  const std::uint32_t runs = test::monte_carlo_runs(20000);
  Workspace ws;
  for (const bool tree : {false, true}) {
    for (const bool transformed : {false, true}) {
      const Request q = make_request(kAll);
      Rows rows{.q = q, .warp = Warp{.temperature = 0.8f}, .draft_transformed = transformed};
      Law law;
      if (tree) {
        tree_law(rows, {}, 1.0, law);
      } else {
        law = chain_law(rows);
      }
      toy::ToyRandom rng(tree ? 91 : 92, transformed ? 1 : 0);
      std::map<std::vector<Token>, std::int64_t> counts;
      for (std::uint32_t n = 0; n < runs; ++n) {
        const RandomStream stream{tree ? 391u : 392u, n, transformed ? 7u : 0u};
        ++counts[tree ? run_tree(rows, stream, rng, ws) : run_chain(rows, stream, rng, ws)];
      }
      std::vector<std::int64_t> observed;
      std::vector<double> expected;
      for (const auto& [tokens, p] : law) {
        observed.push_back(counts.count(tokens) != 0 ? counts[tokens] : 0);
        expected.push_back(p);
      }
      INFO("tree " << tree << " draft transformed " << transformed << " outcomes " << law.size());
      // Every emitted sequence is one the enumeration gives positive probability.
      for (const auto& [tokens, n] : counts) CHECK(law.count(tokens) == 1);
      const auto fit = test::chi_square_test(observed, expected);
      INFO("statistic " << fit.statistic << " df " << fit.df);
      CHECK(fit.p_value > test::kFalseFailureProbability);
    }
  }
}
