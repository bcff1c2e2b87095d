// SPDX-License-Identifier: MIT
// Chain, block and tree verification: exact joint distributions, known answers, Monte Carlo.
#include <cmath>
#include <map>

#include "helpers.hpp"

using namespace specdec;

namespace {

/// A context-dependent toy pair of models: the rows after a prefix come from a seed hashed from it.
struct ToyModels {
  std::int64_t vocab = 0;
  std::uint64_t seed = 0;
  bool context_free = false;
  std::vector<float> fixed_target{}, fixed_draft{};
  float draft_temperature = 1.3f, draft_noise = 0.7f;  // how far the draft strays

  ToyModels(std::int64_t v, std::uint64_t s) : vocab(v), seed(s) {}
  ToyModels(std::vector<float> target, std::vector<float> draft)
      : vocab(static_cast<std::int64_t>(target.size())),
        context_free(true),
        fixed_target(std::move(target)),
        fixed_draft(std::move(draft)) {}

  const toy::CategoricalPair& at(const std::vector<Token>& prefix) const {
    auto it = cache.find(prefix);
    if (it != cache.end()) return it->second;
    std::uint64_t h = seed;
    for (Token t : prefix) h = h * 1315423911ull + static_cast<std::uint64_t>(t) + 7;
    return cache[prefix] = context_free ? toy::CategoricalPair{fixed_target, fixed_draft}
                                        : toy::make_categorical_pair(
                                              vocab, h, 1.0, draft_temperature, draft_noise);
  }
  mutable std::map<std::vector<Token>, toy::CategoricalPair> cache{};
  double target_joint(const std::vector<Token>& seq) const {
    double p = 1.0;
    std::vector<Token> prefix;
    for (Token t : seq) {
      p *= at(prefix).target[static_cast<std::size_t>(t)];
      prefix.push_back(t);
    }
    return p;
  }
};

std::int64_t power(std::int64_t b, int e) {
  std::int64_t r = 1;
  while (e-- > 0) r *= b;
  return r;
}
std::vector<Token> decode(std::int64_t index, std::int64_t vocab, int length) {
  std::vector<Token> s(static_cast<std::size_t>(length));
  for (int i = length - 1; i >= 0; --i) {
    s[static_cast<std::size_t>(i)] = static_cast<Token>(index % vocab);
    index /= vocab;
  }
  return s;
}
std::int64_t encode(const std::vector<Token>& s, std::int64_t vocab) {
  std::int64_t index = 0;
  for (Token t : s) index = index * vocab + t;
  return index;
}

/// Adds weight * P(extension of `prefix` to `length` tokens by target sampling) to `out`.
void extend(const ToyModels& m, std::vector<Token> prefix, int length, double weight,
            std::vector<double>& out) {
  if (static_cast<int>(prefix.size()) == length) {
    out[static_cast<std::size_t>(encode(prefix, m.vocab))] += weight;
    return;
  }
  const auto row = m.at(prefix).target;
  for (Token t = 0; t < m.vocab; ++t) {
    if (row[static_cast<std::size_t>(t)] <= 0.0f) continue;
    auto next = prefix;
    next.push_back(t);
    extend(m, next, length, weight * row[static_cast<std::size_t>(t)], out);
  }
}

struct BlockExact {
  std::vector<double> joint;       // emitted tokens extended to L + 1 tokens
  std::vector<double> tau;         // distribution of accepted counts
  double expected_block = 0.0;     // E[accepted], block verification
  double expected_standard = 0.0;  // E[accepted], token-by-token rejection
};

/// Block verification by enumeration of draft sequences and of the accepted length.
BlockExact block_exact(const ToyModels& m, int length) {
  BlockExact r;
  r.joint.assign(static_cast<std::size_t>(power(m.vocab, length + 1)), 0.0);
  r.tau.assign(static_cast<std::size_t>(length + 1), 0.0);
  for (std::int64_t index = 0; index < power(m.vocab, length); ++index) {
    const auto x = decode(index, m.vocab, length);
    std::vector<std::vector<double>> p, q;
    double weight = 1.0;
    for (int i = 0; i <= length; ++i) {
      const auto pair = m.at(std::vector<Token>(x.begin(), x.begin() + i));
      p.emplace_back(pair.target.begin(), pair.target.end());
      q.emplace_back(pair.draft.begin(), pair.draft.end());
      if (i < length) weight *= q[static_cast<std::size_t>(i)][static_cast<std::size_t>(x[i])];
    }
    if (weight == 0.0) continue;
    std::vector<double> w(static_cast<std::size_t>(length + 1), 1.0), h(w.size(), 0.0);
    double standard = 1.0;
    for (int i = 1; i <= length; ++i) {
      const double ratio = p[i - 1][x[i - 1]] / q[i - 1][x[i - 1]];
      w[i] = std::min(1.0, w[i - 1] * ratio);
      standard *= std::min(1.0, ratio);
      r.expected_standard += weight * standard;
    }
    auto residual = [&](int i) {
      std::vector<double> res(static_cast<std::size_t>(m.vocab));
      double mass = 0.0;
      for (std::size_t v = 0; v < res.size(); ++v) {
        res[v] = std::max(w[i] * p[i][v] - q[i][v], 0.0);
        mass += res[v];
      }
      return std::make_pair(res, mass);
    };
    for (int i = 1; i <= length; ++i) {
      if (i == length) {
        h[i] = w[length];
      } else {
        const double mass = residual(i).second;
        h[i] = mass + 1.0 - w[i] > 0.0 ? mass / (mass + 1.0 - w[i]) : 0.0;
      }
    }
    for (int tau = 0; tau <= length; ++tau) {
      double pt = tau == 0 ? 1.0 : h[tau];
      for (int j = tau + 1; j <= length; ++j) pt *= 1.0 - h[j];
      if (pt == 0.0) continue;
      r.tau[static_cast<std::size_t>(tau)] += weight * pt;
      r.expected_block += weight * pt * tau;
      std::vector<double> final_row;
      if (tau == length) {
        final_row = p[length];
      } else {
        auto [res, mass] = residual(tau);
        if (mass < 1e-30) {
          final_row = p[tau];
        } else {
          for (auto& v : res) v /= mass;
          final_row = res;
        }
      }
      for (Token y = 0; y < m.vocab; ++y) {
        if (final_row[y] == 0.0) continue;
        std::vector<Token> emitted(x.begin(), x.begin() + tau);
        emitted.push_back(y);
        extend(m, emitted, length + 1, weight * pt * final_row[y], r.joint);
      }
    }
  }
  return r;
}

std::vector<double> target_joint(const ToyModels& m, int length) {
  std::vector<double> out(static_cast<std::size_t>(power(m.vocab, length)));
  for (std::int64_t i = 0; i < power(m.vocab, length); ++i) {
    out[static_cast<std::size_t>(i)] = m.target_joint(decode(i, m.vocab, length));
  }
  return out;
}

/// Rows along the draft tokens x (L + 1 target rows, L draft rows), flattened.
void chain_rows(const ToyModels& m, const std::vector<Token>& x, std::vector<float>& target_rows,
                std::vector<float>& draft_rows) {
  target_rows.clear();
  draft_rows.clear();
  for (std::size_t i = 0; i <= x.size(); ++i) {
    const auto pair = m.at(std::vector<Token>(x.begin(), x.begin() + static_cast<long>(i)));
    target_rows.insert(target_rows.end(), pair.target.begin(), pair.target.end());
    if (i < x.size()) draft_rows.insert(draft_rows.end(), pair.draft.begin(), pair.draft.end());
  }
}

/// Draws L draft tokens autoregressively from the draft model.
std::vector<Token> draft_chain(const ToyModels& m, int length, const RandomStream& stream) {
  std::vector<Token> x;
  for (int i = 0; i < length; ++i) {
    const auto row = m.at(x).draft;
    x.push_back(sample(row, stream.uniform(static_cast<std::uint32_t>(i))));
  }
  return x;
}

/// Extends emitted tokens to `length` by sampling the target model.
std::vector<Token> extend_sample(const ToyModels& m, std::vector<Token> s, int length,
                                 const RandomStream& stream) {
  for (std::uint32_t i = 0; static_cast<int>(s.size()) < length; ++i) {
    s.push_back(sample(m.at(s).target, stream.uniform(i)));
  }
  s.resize(static_cast<std::size_t>(length));
  return s;
}

/// One run s of check_sampled_joint: the drafted chain x and its rows; the verifier writes `out`.
struct ChainDraw {
  const std::vector<Token>& x;
  const std::vector<float>& target_rows;
  const std::vector<float>& draft_rows;
  std::uint32_t s;
  std::vector<Token>& out;
  Workspace& ws;
};

/// Over 100000 runs s: a chain of `length` drafted with stream {`seed`, 0, s} in the draft domain;
/// `verify(draw)` emits its first tokens into draw.out and returns how many; the target extends
/// them with stream {`seed`, 0, s} in the sample domain. The law of the first `length` + 1 tokens
/// (V = 3) is the target's joint (chi-square; false-failure probability kFalseFailureProbability).
template <class Verify>
void check_sampled_joint(const ToyModels& m, int length, std::uint64_t seed, Verify verify) {
  const auto tokens = static_cast<std::size_t>(length + 1);
  std::size_t cells = 1;
  for (std::size_t i = 0; i < tokens; ++i) cells *= 3;
  std::vector<std::int64_t> counts(cells, 0);
  Workspace ws;
  std::vector<float> target_rows, draft_rows;
  std::vector<Token> out(tokens);
  for (std::uint32_t s = 0; s < 100000; ++s) {
    const auto x = draft_chain(m, length, RandomStream{seed, 0, s, 0, Domain::kDraft});
    chain_rows(m, x, target_rows, draft_rows);
    const auto emitted = verify(ChainDraw{x, target_rows, draft_rows, s, out, ws});
    const auto seq = extend_sample(m, std::vector<Token>(out.begin(), out.begin() + emitted),
                                   length + 1, RandomStream{seed, 0, s, 0, Domain::kSample});
    ++counts[static_cast<std::size_t>(encode(seq, 3))];
  }
  CHECK(test::chi_square_test(counts, target_joint(m, length + 1)).p_value >
        test::kFalseFailureProbability);
}

}  // namespace

TEST_CASE("block verification accepts 11/9 tokens where token-by-token accepts 10/9",
          "[verify][block]") {
  ToyModels m({1.0f / 3, 2.0f / 3}, {2.0f / 3, 1.0f / 3});
  const auto r = block_exact(m, 2);
  CHECK(r.expected_block == Catch::Detail::Approx(11.0 / 9.0).margin(1e-6));
  CHECK(r.expected_standard == Catch::Detail::Approx(10.0 / 9.0).margin(1e-6));
  test::check_close(r.joint, target_joint(m, 3));
}

TEST_CASE("block verification reproduces the target joint distribution", "[verify][block]") {
  for (const std::int64_t vocab : {2, 3}) {
    for (int length = 1; length <= 3; ++length) {
      for (std::uint64_t seed = 1; seed <= 2; ++seed) {
        INFO("vocab " << vocab << " L " << length << " seed " << seed);
        const ToyModels m{vocab, 1000 * seed + vocab};
        const auto r = block_exact(m, length);
        test::check_close(r.joint, target_joint(m, length + 1));
        CHECK(r.expected_block >= r.expected_standard - 1e-12);
      }
    }
  }
}

TEST_CASE("block verification never accepts fewer tokens than standard", "[verify][block]") {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    const ToyModels m{3, 77 * seed};
    const auto r = block_exact(m, 3);
    INFO("seed " << seed);
    CHECK(r.expected_block >= r.expected_standard - 1e-12);
  }
}

TEST_CASE("the block kernel's accepted count matches the enumeration", "[verify][block][mc]") {
  // False-failure probability: kFalseFailureProbability.
  ToyModels m({1.0f / 3, 2.0f / 3}, {2.0f / 3, 1.0f / 3});
  const auto r = block_exact(m, 2);
  std::vector<std::int64_t> counts(3, 0);
  Workspace ws;
  std::vector<float> target_rows, draft_rows;
  std::vector<Token> out(3);
  for (std::uint32_t s = 0; s < 100000; ++s) {
    const auto x = draft_chain(m, 2, RandomStream{4, 0, s, 0, Domain::kDraft});
    chain_rows(m, x, target_rows, draft_rows);
    const auto v = verify_block<float>(target_rows, draft_rows, x, 2,
                                       RandomStream{4, 0, s, 0, Domain::kVerify}, out, ws);
    ++counts[static_cast<std::size_t>(v.accepted)];
  }
  CHECK(test::chi_square_test(counts, r.tau).p_value > test::kFalseFailureProbability);
}

TEST_CASE("block verification samples the target joint", "[verify][block][mc]") {
  // False-failure probability: kFalseFailureProbability.
  check_sampled_joint({3, 99}, 2, 5, [](const ChainDraw& d) {
    return verify_block<float>(d.target_rows, d.draft_rows, d.x, 3,
                               RandomStream{5, 0, d.s, 0, Domain::kVerify}, d.out, d.ws)
        .emitted;
  });
}

TEST_CASE("chain verification samples the target joint", "[verify][chain][mc]") {
  // False-failure probability: kFalseFailureProbability.
  check_sampled_joint({3, 123}, 3, 6, [](const ChainDraw& d) {
    const RandomStream stream{6, d.s, 0, 0, Domain::kVerify};
    const auto v =
        verify_chain<float>(Rejection{}, d.target_rows, d.draft_rows, d.x, 3, stream, d.out, d.ws);
    REQUIRE(v.emitted == v.accepted + 1);
    return v.emitted;
  });
}

TEST_CASE("chain accepted counts follow the geometric law", "[verify][chain][mc]") {
  // False-failure probability: kFalseFailureProbability. Constant pair, acceptance a = 1 - TV:
  // P(accepted = i) = a^i (1 - a) for i < L and a^L for i = L.
  const std::vector<float> target = {.5f, .3f, .2f}, draft = {.3f, .3f, .4f};
  const double a = 1.0 - tv_distance<float>(target, draft);
  const int length = 4;
  std::vector<float> target_rows, draft_rows;
  for (int i = 0; i <= length; ++i)
    target_rows.insert(target_rows.end(), target.begin(), target.end());
  for (int i = 0; i < length; ++i) draft_rows.insert(draft_rows.end(), draft.begin(), draft.end());
  std::vector<double> expected(length + 1);
  for (int i = 0; i <= length; ++i) expected[i] = std::pow(a, i) * (i < length ? 1.0 - a : 1.0);
  std::vector<std::int64_t> counts(length + 1, 0);
  Workspace ws;
  std::vector<Token> out(length + 1);
  for (std::uint32_t s = 0; s < 100000; ++s) {
    std::vector<Token> chain;
    for (int i = 0; i < length; ++i) {
      chain.push_back(test::draw_candidates(
          draft, 1, false,
          RandomStream{7, 0, s, static_cast<std::uint32_t>(i), Domain::kDraft})[0]);
    }
    const auto v = verify_chain<float>(MultiRound{}, target_rows, draft_rows, chain, 3,
                                       RandomStream{7, s, 0, 0, Domain::kVerify}, out, ws);
    ++counts[static_cast<std::size_t>(v.accepted)];
  }
  CHECK(test::chi_square_test(counts, expected).p_value > test::kFalseFailureProbability);
}

TEST_CASE("the tree walker follows accepted children and draws the bonus at the leaf",
          "[verify][tree]") {
  // Level order: 0 and 1 under the root, 2 under node 0, 3 and 4 under node 1.
  const std::vector<Token> tokens = {0, 1, 2, 2, 0};
  const std::vector<std::int32_t> parents = {-1, -1, 0, 1, 1};
  const std::vector<std::vector<float>> target = {{0, 1, 0}, {1, 0, 0}, {1, 0, 0},
                                                  {1, 0, 0}, {0, 0, 1}, {0, 1, 0}};
  const std::vector<std::vector<float>> draft = {{.5f, .5f, 0}, {0, 0, 1}, {.5f, 0, .5f},
                                                 {1, 0, 0},     {1, 0, 0}, {1, 0, 0}};
  std::vector<float> target_rows, draft_rows;
  for (const auto& r : target) target_rows.insert(target_rows.end(), r.begin(), r.end());
  for (const auto& r : draft) draft_rows.insert(draft_rows.end(), r.begin(), r.end());
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  for (std::uint32_t s = 0; s < 50; ++s) {
    // Root: child 0 (token 0) has target 0 and is rejected; child 1 then is certain. Node 1:
    // child 3 (token 2) is rejected, child 4 (token 0) accepted; node 4 is a leaf: the bonus
    // comes from its own target row, one-hot on token 1.
    const auto v = verify_tree<float>(Recursive{}, {tokens, parents}, target_rows, draft_rows, 3,
                                      RandomStream{s}, accepted, ws);
    CHECK(v.accepted == 2);
    CHECK(accepted[0] == 1);
    CHECK(accepted[1] == 4);
    CHECK(v.bonus);
    CHECK(v.token == 1);
  }
}

namespace {

/// A depth-2 tree with two children per node drawn from the draft model (without replacement
/// when `distinct`), verified with `rule`; returns the emitted tokens extended to three.
std::vector<std::int64_t> simulate_tree(const Rule& rule, bool distinct, const ToyModels& m,
                                        std::uint32_t samples) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(power(m.vocab, 3)), 0);
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  for (std::uint32_t s = 0; s < samples; ++s) {
    const RandomStream draft_stream{8, s, 0, 0, Domain::kDraft};
    std::vector<Token> tokens;
    std::vector<std::int32_t> parents;
    std::vector<std::vector<Token>> paths;
    for (Token t : test::draw_candidates(m.at({}).draft, 2, distinct, draft_stream)) {
      tokens.push_back(t);
      parents.push_back(-1);
      paths.push_back({t});
    }
    const auto roots = tokens.size();
    for (std::size_t i = 0; i < roots; ++i) {
      for (Token t :
           test::draw_candidates(m.at(paths[i]).draft, 2, distinct,
                                 draft_stream.at_node(static_cast<std::uint32_t>(i + 1)))) {
        tokens.push_back(t);
        parents.push_back(static_cast<std::int32_t>(i));
        auto path = paths[i];
        path.push_back(t);
        paths.push_back(path);
      }
    }
    std::vector<float> target_rows, draft_rows;
    for (std::size_t r = 0; r <= tokens.size(); ++r) {
      const auto pair = m.at(r == 0 ? std::vector<Token>{} : paths[r - 1]);
      target_rows.insert(target_rows.end(), pair.target.begin(), pair.target.end());
      draft_rows.insert(draft_rows.end(), pair.draft.begin(), pair.draft.end());
    }
    const auto v = verify_tree<float>(rule, {tokens, parents}, target_rows, draft_rows, m.vocab,
                                      RandomStream{8, s, 0, 0, Domain::kVerify}, accepted, ws);
    std::vector<Token> emitted;
    for (std::int32_t i = 0; i < v.accepted; ++i) emitted.push_back(tokens[accepted[i]]);
    emitted.push_back(v.token);
    const auto seq = extend_sample(m, emitted, 3, RandomStream{8, s, 0, 0, Domain::kSample});
    ++counts[static_cast<std::size_t>(encode(seq, m.vocab))];
  }
  return counts;
}

}  // namespace

TEST_CASE("an RSD tree verified with RRS samples the target joint", "[verify][tree][mc]") {
  // False-failure probability: kFalseFailureProbability.
  const ToyModels m{4, 31};
  const auto counts = simulate_tree(Recursive{}, true, m, 100000);
  CHECK(test::chi_square_test(counts, target_joint(m, 3)).p_value > test::kFalseFailureProbability);
}

TEST_CASE("an i.i.d. tree verified with multi-round sampling samples the target joint",
          "[verify][tree][mc]") {
  // False-failure probability: kFalseFailureProbability.
  const ToyModels m{4, 32};
  const auto counts = simulate_tree(MultiRound{}, false, m, 100000);
  CHECK(test::chi_square_test(counts, target_joint(m, 3)).p_value > test::kFalseFailureProbability);
}

TEST_CASE("an i.i.d. tree verified with SpecTr samples the target joint", "[verify][tree][mc]") {
  // False-failure probability: kFalseFailureProbability.
  const ToyModels m{3, 33};
  const auto counts = simulate_tree(SpecTr{}, false, m, 50000);
  CHECK(test::chi_square_test(counts, target_joint(m, 3)).p_value > test::kFalseFailureProbability);
}

TEST_CASE("the tree walker takes a DraftTree", "[verify][tree]") {
  // Identical rows: every first child is accepted, down to the leaf.
  DraftTree tree;
  const auto a = tree.add(1, -1);
  tree.add(0, -1);
  const auto c = tree.add(2, a);
  const std::vector<float> row = {.2f, .3f, .5f};
  std::vector<float> rows;
  for (int i = 0; i <= tree.size(); ++i) rows.insert(rows.end(), row.begin(), row.end());
  Workspace ws;
  std::vector<std::int32_t> accepted(2);
  const auto v =
      verify_tree<float>(MultiRound{}, tree, rows, rows, 3, RandomStream{2}, accepted, ws);
  CHECK(v.accepted == 2);
  CHECK(accepted[0] == a);
  CHECK(accepted[1] == c);
  CHECK(v.bonus);
}

TEST_CASE("verify_block samples the target joint on strongly divergent context-dependent pairs",
          "[verify][block][mc]") {
  // verify_block itself (not an enumeration) on pairs whose rows change with every prefix and
  // whose draft is far from the target, so the accepted-prefix weights w_i are rarely 1 and the
  // correction row norm([w_tau p - q]+) differs from norm([p - q]+). Three seeded pairs, each
  // 150000 blocks of L = 2 over V = 3 completed to 3 tokens by the target; the chi-square
  // statistics add up (independent samples) to one test. False-failure probability:
  // kFalseFailureProbability.
  const int length = 2;
  double statistic = 0.0;
  int df = 0;
  for (const std::uint64_t seed : {11u, 12u, 13u}) {
    ToyModels m{3, seed};
    m.draft_temperature = 2.5f;
    m.draft_noise = 0.9f;
    std::vector<std::int64_t> counts(27, 0);
    Workspace ws;
    std::vector<float> target_rows, draft_rows;
    std::vector<Token> out(3);
    for (std::uint32_t s = 0; s < 150000; ++s) {
      const auto x = draft_chain(m, length, RandomStream{seed, 0, s, 0, Domain::kDraft});
      chain_rows(m, x, target_rows, draft_rows);
      const auto v = verify_block<float>(target_rows, draft_rows, x, 3,
                                         RandomStream{seed, 0, s, 0, Domain::kVerify}, out, ws);
      const auto seq = extend_sample(m, std::vector<Token>(out.begin(), out.begin() + v.emitted), 3,
                                     RandomStream{seed, 0, s, 0, Domain::kSample});
      ++counts[static_cast<std::size_t>(encode(seq, 3))];
    }
    const auto test = test::chi_square_test(counts, target_joint(m, 3));
    statistic += test.statistic;
    df += test.df;
  }
  CHECK(test::chi_square_p_value(statistic, df) > test::kFalseFailureProbability);
}

namespace {

/// Fixed draws: u_1 .. u_L from `tests`, the final token's draw from `last`.
struct FixedUniforms {
  std::vector<float> tests;
  float last = 0.5f;
  float uniform(std::uint32_t i) const { return i < tests.size() ? tests[i] : last; }
};

}  // namespace

TEST_CASE("verify_block draws the token after tau accepted from norm([w_tau p - q]+)",
          "[verify][block]") {
  // verify_block itself with forced draws: u_i = 0 accepts position i (u <= h_i for every h_i >=
  // 0), u_i = 1 rejects it (these rows keep every h_i < 1), and the final draw sweeps a grid of
  // 20000 midpoints, so the output frequencies are the row it samples to within 1e-4. The rows make
  // the weighted residual [w_1 p_2 - q_2]+ differ from the unweighted [p_2 - q_2]+ (w_1 = 1/3).
  const std::vector<float> target_rows = {0.2f, 0.5f, 0.3f,    // p_1
                                          0.6f, 0.3f, 0.1f,    // p_2
                                          0.3f, 0.3f, 0.4f};   // p_3
  const std::vector<float> draft_rows = {0.6f,  0.2f, 0.2f,    // q_1
                                         0.05f, 0.1f, 0.85f};  // q_2
  const std::vector<Token> draft = {0, 2};
  const double w1 = 0.2 / 0.6;
  const auto residual = [](const std::vector<double>& row) {
    double total = 0.0;
    for (double v : row) total += std::max(v, 0.0);
    std::vector<double> out;
    for (double v : row) out.push_back(std::max(v, 0.0) / total);
    return out;
  };
  // tau = 0: norm([p_1 - q_1]+); tau = 1: norm([w_1 p_2 - q_2]+); tau = 2: p_3.
  const std::vector<std::pair<std::vector<float>, std::vector<double>>> cases = {
      {{1.0f, 1.0f}, residual({0.2 - 0.6, 0.5 - 0.2, 0.3 - 0.2})},
      {{0.0f, 1.0f}, residual({w1 * 0.6 - 0.05, w1 * 0.3 - 0.1, w1 * 0.1 - 0.85})},
      {{0.0f, 0.0f}, {0.3, 0.3, 0.4}}};
  Workspace ws;
  std::vector<Token> out(3);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto& [tests, expected] = cases[c];
    const int grid = 20000;
    std::vector<double> frequency(3, 0.0);
    for (int g = 0; g < grid; ++g) {
      const FixedUniforms uniforms{tests, (static_cast<float>(g) + 0.5f) / grid};
      const auto v = verify_block<float>(target_rows, draft_rows, draft, 3, uniforms, out, ws);
      REQUIRE(v.accepted == static_cast<std::int32_t>(c));
      frequency[static_cast<std::size_t>(out[c])] += 1.0 / grid;
    }
    for (std::size_t t = 0; t < 3; ++t) {
      INFO("tau " << c << " token " << t);
      CHECK(frequency[t] == Catch::Detail::Approx(expected[t]).margin(1e-4));
    }
  }
}
