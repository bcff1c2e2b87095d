// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/toy/providers.hpp"
#include "specdec/tree/tree_mask.hpp"
#include "tree/tree_fixtures.hpp"

using namespace specdec;
using Catch::Contains;
using Catch::Detail::Approx;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Root children 5, 6; node 0 has children 7, 8; node 3 has child 9.
//   depth 1: 0 (tok 1), 1 (tok 2)
//   depth 2: 2 (tok 3, parent 0), 3 (tok 0, parent 0), 4 (tok 2, parent 1)
//   depth 3: 5 (tok 1, parent 3)
DraftTree sample_tree() { return test::tree_of({1, 2, 3, 0, 2, 1}, {-1, -1, 0, 0, 1, 3}); }

toy::MarkovModel markov4() {
  // Row 2 has a zero: token 3 never follows token 2.
  return toy::MarkovModel::from_rows({{0.1f, 0.2f, 0.3f, 0.4f},
                                      {0.25f, 0.25f, 0.25f, 0.25f},
                                      {0.5f, 0.3f, 0.2f, 0.0f},
                                      {0.7f, 0.1f, 0.1f, 0.1f}});
}

// The context of row r (0 = committed context, i + 1 = node i) rebuilt independently.
std::vector<Token> row_context(const std::vector<Token>& committed, const DraftTree& tree,
                               std::int32_t row) {
  std::vector<Token> path;
  for (auto node = row - 1; node >= 0; node = tree.parents[static_cast<std::size_t>(node)]) {
    path.insert(path.begin(), tree.tokens[static_cast<std::size_t>(node)]);
  }
  auto context = committed;
  context.insert(context.end(), path.begin(), path.end());
  return context;
}

template <class Model>
void check_rows_match_model(const Model& model, const std::vector<Token>& committed,
                            const DraftTree& tree, const std::vector<float>& logits) {
  const auto vocab = static_cast<std::size_t>(model.vocab_size());
  std::vector<float> expected(vocab);
  for (std::int32_t r = 0; r <= tree.size(); ++r) {
    model.next_probabilities(row_context(committed, tree, r), expected);
    for (std::size_t v = 0; v < vocab; ++v) {
      const float got = logits[static_cast<std::size_t>(r) * vocab + v];
      if (expected[v] == 0.0f) {
        CHECK(got == -kInf);
      } else {
        CHECK(got == Approx(std::log(expected[v])).epsilon(1e-6));
      }
    }
  }
}

// A minimal provider without hidden states: uniform logits, remembers the context.
struct UniformProvider {
  std::int64_t vocab = 3;
  std::vector<Token> tokens = {0};
  int evaluations = 0;

  std::int64_t vocab_size() const { return vocab; }
  std::span<const Token> context() const { return tokens; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(tokens.size()); }
  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    provider::check_evaluate_arguments(batch, committed_length(), logits, vocab);
    ++evaluations;
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      for (auto& x : logits.row(r)) x = 0.0f;
    }
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept, Token next) {
    provider::check_commit_arguments(batch, committed_length(), kept, next, vocab);
    for (auto n : kept) tokens.push_back(batch.tokens[static_cast<std::size_t>(n)]);
    tokens.push_back(next);
  }
  void reset(std::span<const Token> prompt) {
    provider::check_prompt(prompt, vocab);
    tokens.assign(prompt.begin(), prompt.end());
  }
};
static_assert(LogitsProvider<UniformProvider>);
static_assert(!HiddenStateProvider<UniformProvider>);

}  // namespace

TEST_CASE("TreeBatch from a tree gets absolute positions from depths", "[provider][batch]") {
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, 5);
  CHECK(batch.size() == 6);
  CHECK(batch.rows() == 7);
  CHECK(batch.root_position() == 4);
  CHECK(batch.positions == std::vector<std::int32_t>{5, 5, 6, 6, 6, 7});
  CHECK(batch.tokens == tree.tokens);
  CHECK(batch.parents == tree.parents);
  for (std::int32_t i = 0; i < tree.size(); ++i) CHECK(batch.depth(i) == tree.depths[i]);
  CHECK_NOTHROW(batch.validate(4));
  // The same ids as tree_positions: one definition of a position.
  std::vector<std::int32_t> positions(tree.tokens.size());
  tree_positions(tree, 5, positions);
  CHECK(batch.positions == positions);
}

TEST_CASE("TreeBatch positions are int32 and stop at INT32_MAX", "[provider][batch][errors]") {
  const auto tree = sample_tree();  // three levels: the deepest node sits at committed_length + 2
  const std::int64_t last = std::numeric_limits<std::int32_t>::max() - 2;
  const auto batch = TreeBatch::from_tree(tree, last);
  CHECK(batch.positions.back() == std::numeric_limits<std::int32_t>::max());
  CHECK_THROWS_WITH(TreeBatch::from_tree(tree, last + 1),
                    Contains("committed_length") && Contains("overflows int32"));
  CHECK_THROWS_WITH(TreeBatch::from_tree(tree, std::int64_t{1} << 40),
                    Contains("committed_length") && Contains("outside"));
}

TEST_CASE("TreeBatch of an empty tree has only the root row", "[provider][batch]") {
  const auto batch = TreeBatch::from_tree(DraftTree{}, 1);
  CHECK(batch.empty());
  CHECK(batch.rows() == 1);
  CHECK(batch.root_position() == 0);
  CHECK_NOTHROW(batch.validate(2));
}

TEST_CASE("TreeBatch assign rejects a zero committed length", "[provider][batch][errors]") {
  TreeBatch batch;
  CHECK_THROWS_WITH(batch.assign(sample_tree(), 0), Contains("committed_length"));
}

TEST_CASE("TreeBatch assign rejects malformed trees", "[provider][batch][errors]") {
  auto bad_parent = sample_tree();
  bad_parent.parents[2] = 4;
  CHECK_THROWS_WITH(TreeBatch::from_tree(bad_parent, 3), Contains("tree.parents[2]"));
  auto bad_depth = sample_tree();
  bad_depth.depths[5] = 2;
  CHECK_THROWS_WITH(TreeBatch::from_tree(bad_depth, 3), Contains("tree.depths[5]"));
  auto short_parents = sample_tree();
  short_parents.parents.pop_back();
  CHECK_THROWS_WITH(TreeBatch::from_tree(short_parents, 3), Contains("tree.parents"));
}

TEST_CASE("TreeBatch validate names the bad field", "[provider][batch][errors]") {
  const auto good = TreeBatch::from_tree(sample_tree(), 2);
  CHECK_THROWS_WITH(good.validate(3), Contains("tokens[2]") && Contains("outside the vocabulary"));
  auto moved = good;
  moved.positions[4] = 9;
  CHECK_THROWS_WITH(moved.validate(4), Contains("positions[4]"));
  auto cycle = good;
  cycle.parents[1] = 1;
  CHECK_THROWS_WITH(cycle.validate(4), Contains("parents[1]"));
  auto no_context = good;
  no_context.committed_length = 0;
  CHECK_THROWS_WITH(no_context.validate(4), Contains("committed_length"));
  auto short_positions = good;
  short_positions.positions.pop_back();
  CHECK_THROWS_WITH(short_positions.validate(4), Contains("positions"));
}

TEST_CASE("TreeBatch validate checks the optional packed mask size", "[provider][batch][errors]") {
  auto batch = TreeBatch::from_tree(sample_tree(), 2);
  std::vector<std::uint32_t> mask(6, 0);
  batch.attention_mask = mask;
  batch.mask_words_per_row = 1;
  CHECK_NOTHROW(batch.validate(4));
  batch.mask_words_per_row = 0;
  CHECK_THROWS_WITH(batch.validate(4), Contains("mask_words_per_row"));
  batch.mask_words_per_row = 2;
  CHECK_THROWS_WITH(batch.validate(4), Contains("attention_mask"));
}

TEST_CASE("Markov provider scores every node like direct calls on its path", "[provider][toy]") {
  const auto model = markov4();
  toy::MarkovProvider provider(model);
  const std::vector<Token> prompt = {3, 2};
  provider.reset(prompt);
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, provider.committed_length());
  std::vector<float> logits(static_cast<std::size_t>(batch.rows() * 4));
  provider.evaluate(batch, MatrixView<float>(logits.data(), batch.rows(), 4));
  check_rows_match_model(model, prompt, tree, logits);
  // Row 0 follows token 2, whose row bans token 3.
  CHECK(logits[3] == -kInf);
  CHECK(provider.calls() == 1);
  CHECK(provider.evaluated_tokens() == 6);
}

TEST_CASE("NGram provider scores every node like direct calls on its path", "[provider][toy]") {
  // Order 3: each row depends on the two tokens before the node too, so paths must be right.
  const toy::NGramModel model({.vocab = 5, .order = 3, .concentration = 0.5, .seed = 11});
  toy::NGramProvider provider(model);
  const std::vector<Token> prompt = {4, 0, 3};
  provider.reset(prompt);
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, 3);
  std::vector<float> logits(static_cast<std::size_t>(batch.rows() * 5));
  provider.evaluate(batch, MatrixView<float>(logits.data(), batch.rows(), 5));
  check_rows_match_model(model, prompt, tree, logits);
}

TEST_CASE("provider rows honour a row stride", "[provider][toy]") {
  toy::MarkovProvider provider(markov4());
  const std::vector<Token> prompt = {1};
  provider.reset(prompt);
  const auto batch = TreeBatch::from_tree(sample_tree(), 1);
  std::vector<float> padded(static_cast<std::size_t>(batch.rows() * 6), 42.0f);
  provider.evaluate(batch, MatrixView<float>(padded.data(), batch.rows(), 4, 6));
  std::vector<float> dense(static_cast<std::size_t>(batch.rows() * 4));
  provider.evaluate(batch, MatrixView<float>(dense.data(), batch.rows(), 4));
  for (std::int64_t r = 0; r < batch.rows(); ++r) {
    for (std::int64_t v = 0; v < 4; ++v) CHECK(padded[r * 6 + v] == dense[r * 4 + v]);
    CHECK(padded[r * 6 + 4] == 42.0f);
  }
}

TEST_CASE("commit appends the kept path then the final token", "[provider][toy]") {
  const toy::NGramModel model({.vocab = 5, .order = 2, .seed = 3});
  toy::NGramProvider provider(model);
  const std::vector<Token> prompt = {1, 2};
  provider.reset(prompt);
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, 2);
  const std::vector<std::int32_t> kept = {0, 3, 5};
  provider.commit(batch, kept, 4);
  CHECK(std::vector<Token>(provider.context().begin(), provider.context().end()) ==
        std::vector<Token>{1, 2, 1, 0, 1, 4});
  CHECK(provider.committed_length() == 6);
  // Nothing accepted: only the correction token.
  const auto next = TreeBatch::from_tree(tree, 6);
  provider.commit(next, {}, 0);
  CHECK(provider.committed_length() == 7);
  CHECK(provider.context().back() == 0);
  // After the commit the root row is the row of the longer context.
  const auto root_only = TreeBatch::from_tree(DraftTree{}, 7);
  std::vector<float> logits(5), expected(5);
  provider.evaluate(root_only, MatrixView<float>(logits.data(), 1, 5));
  model.next_probabilities(provider.context(), expected);
  for (int v = 0; v < 5; ++v) CHECK(logits[v] == Approx(std::log(expected[v])));
}

TEST_CASE("a draft provider commits a path through levels it never evaluated", "[provider][toy]") {
  // The draft scores the upper levels while drafting; the target verifies the full tree; both
  // commit the same path of the full tree.
  const toy::NGramModel model({.vocab = 4, .order = 2, .seed = 5});
  toy::NGramProvider draft(model), target(model);
  const std::vector<Token> prompt = {2};
  draft.reset(prompt);
  target.reset(prompt);
  const auto full_tree = sample_tree();
  DraftTree upper;  // the level-order prefix of depth <= 2
  for (std::int32_t i = 0; i < 5; ++i) upper.add(full_tree.tokens[i], full_tree.parents[i]);
  const auto upper_batch = TreeBatch::from_tree(upper, 1);
  std::vector<float> logits(7 * 4);
  draft.evaluate(upper_batch, MatrixView<float>(logits.data(), upper_batch.rows(), 4));
  const auto full = TreeBatch::from_tree(full_tree, 1);
  target.evaluate(full, MatrixView<float>(logits.data(), full.rows(), 4));
  const std::vector<std::int32_t> kept = {0, 3, 5};
  draft.commit(full, kept, 2);
  target.commit(full, kept, 2);
  const std::vector<Token> expected = {2, 1, 0, 1, 2};
  CHECK(std::vector<Token>(draft.context().begin(), draft.context().end()) == expected);
  CHECK(std::vector<Token>(target.context().begin(), target.context().end()) == expected);
  CHECK(draft.evaluated_tokens() == 5);
  CHECK(target.evaluated_tokens() == 6);
}

TEST_CASE("commit rejects paths that are not root-to-node paths", "[provider][toy][errors]") {
  toy::MarkovProvider provider(markov4());
  const std::vector<Token> prompt = {1, 2};
  provider.reset(prompt);
  const auto batch = TreeBatch::from_tree(sample_tree(), 2);
  const std::vector<std::int32_t> skips_level = {3};
  CHECK_THROWS_WITH(provider.commit(batch, skips_level, 0), Contains("kept_nodes[0]"));
  const std::vector<std::int32_t> wrong_branch = {1, 3};
  CHECK_THROWS_WITH(provider.commit(batch, wrong_branch, 0), Contains("kept_nodes[1]"));
  const std::vector<std::int32_t> outside = {0, 17};
  CHECK_THROWS_WITH(provider.commit(batch, outside, 0), Contains("kept_nodes[1]"));
  const std::vector<std::int32_t> good = {0, 2};
  CHECK_THROWS_WITH(provider.commit(batch, good, 4), Contains("next"));
  const auto stale = TreeBatch::from_tree(sample_tree(), 5);
  CHECK_THROWS_WITH(provider.commit(stale, good, 0), Contains("batch.committed_length"));
  CHECK(provider.committed_length() == 2);  // nothing was appended by the failed calls
}

TEST_CASE("evaluate rejects bad batches and bad output shapes", "[provider][toy][errors]") {
  toy::MarkovProvider provider(markov4());
  const std::vector<Token> prompt = {0};
  provider.reset(prompt);
  auto batch = TreeBatch::from_tree(sample_tree(), 1);
  std::vector<float> logits(static_cast<std::size_t>(batch.rows() * 4));
  CHECK_THROWS_WITH(provider.evaluate(batch, MatrixView<float>(logits.data(), 6, 4)),
                    Contains("logits"));
  CHECK_THROWS_WITH(provider.evaluate(batch, MatrixView<float>(logits.data(), 7, 3)),
                    Contains("logits"));
  batch.tokens[4] = 4;
  CHECK_THROWS_WITH(provider.evaluate(batch, MatrixView<float>(logits.data(), 7, 4)),
                    Contains("tokens[4]"));
  const auto stale = TreeBatch::from_tree(sample_tree(), 2);
  CHECK_THROWS_WITH(provider.evaluate(stale, MatrixView<float>(logits.data(), 7, 4)),
                    Contains("batch.committed_length"));
  CHECK(provider.calls() == 0);
}

TEST_CASE("toy providers reject an empty or out-of-range prompt", "[provider][toy][errors]") {
  toy::MarkovProvider provider(markov4());
  CHECK_THROWS_WITH(provider.reset({}), Contains("prompt") && Contains("empty"));
  const std::vector<Token> bad = {0, 9};
  CHECK_THROWS_WITH(provider.reset(bad), Contains("prompt[1]"));
  CHECK_THROWS_WITH(toy::MarkovProvider(markov4(), {.hidden_size = -1}), Contains("hidden_size"));
}

namespace {

/// The logits (V = 4) and hidden states of `provider` on the rows of `batch`.
struct RowsAndStates {
  std::vector<float> logits, hidden;
};

RowsAndStates evaluate_with_hidden(toy::MarkovProvider& provider, const TreeBatch& batch) {
  const auto h = provider.hidden_size();
  RowsAndStates out{std::vector<float>(static_cast<std::size_t>(batch.rows() * 4)),
                    std::vector<float>(static_cast<std::size_t>(batch.rows() * h))};
  provider.evaluate_with_hidden(batch, MatrixView<float>(out.logits.data(), batch.rows(), 4),
                                MatrixView<float>(out.hidden.data(), batch.rows(), h));
  return out;
}

}  // namespace

TEST_CASE("hidden states are equal for equal contexts", "[provider][toy][hidden]") {
  // Nodes 2 (path 1 3) and 4 (path 2 2) differ; in a second batch, a node reaching the same
  // context as node 2 must get the same state.
  toy::MarkovProvider provider(markov4(), {.hidden_size = 8, .hidden_window = 6});
  const std::vector<Token> prompt = {3, 2};
  provider.reset(prompt);
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, 2);
  const auto [logits, hidden] = evaluate_with_hidden(provider, batch);
  for (std::int32_t r = 0; r < batch.rows(); ++r) {
    std::vector<float> expected(8);
    toy::context_embedding(row_context(prompt, tree, r), 6, toy::ProviderOptions{}.hidden_seed,
                           expected);
    for (int j = 0; j < 8; ++j) {
      CHECK(hidden[static_cast<std::size_t>(r * 8 + j)] == expected[static_cast<std::size_t>(j)]);
      CHECK(std::abs(expected[static_cast<std::size_t>(j)]) < 1.0f);
    }
  }
  // Rows 3 (context 3 2 1 3) and 5 (3 2 2 2) differ.
  bool differ = false;
  for (int j = 0; j < 8; ++j) differ = differ || hidden[3 * 8 + j] != hidden[5 * 8 + j];
  CHECK(differ);
  // Commit only the correction token 1 (context 3 2 1): a child 3 of the new root then has node
  // 2's old context (3 2 1 3).
  provider.commit(batch, {}, 1);
  DraftTree one;
  one.add(3, -1);
  const auto second = TreeBatch::from_tree(one, 3);
  std::vector<float> logits2(8), hidden2(16);
  provider.evaluate_with_hidden(second, MatrixView<float>(logits2.data(), 2, 4),
                                MatrixView<float>(hidden2.data(), 2, 8));
  for (int j = 0; j < 8; ++j) CHECK(hidden2[8 + j] == hidden[3 * 8 + j]);
  // The logits from evaluate_with_hidden equal those from evaluate.
  for (int j = 0; j < 4; ++j) CHECK(logits2[4 + j] == logits[3 * 4 + j]);
}

TEST_CASE("hidden states can carry the row probabilities after the embedding",
          "[provider][toy][hidden]") {
  const auto model = markov4();
  toy::MarkovProvider provider(model, {.hidden_size = 2, .hidden_probabilities = true});
  CHECK(provider.hidden_size() == 6);
  const std::vector<Token> prompt = {1, 2};
  provider.reset(prompt);
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, 2);
  const auto hidden = evaluate_with_hidden(provider, batch).hidden;
  std::vector<float> expected(4), embedding(2);
  for (std::int32_t r = 0; r < batch.rows(); ++r) {
    const auto context = row_context(prompt, tree, r);
    model.next_probabilities(context, expected);
    toy::context_embedding(context, 4, toy::ProviderOptions{}.hidden_seed, embedding);
    for (int j = 0; j < 2; ++j) CHECK(hidden[static_cast<std::size_t>(r * 6 + j)] == embedding[j]);
    for (int v = 0; v < 4; ++v)
      CHECK(hidden[static_cast<std::size_t>(r * 6 + 2 + v)] == expected[v]);
  }
}

TEST_CASE("evaluate_with_hidden rejects providers without states and bad shapes",
          "[provider][toy][hidden][errors]") {
  toy::MarkovProvider plain(markov4());
  const std::vector<Token> prompt = {0};
  plain.reset(prompt);
  const auto batch = TreeBatch::from_tree(DraftTree{}, 1);
  std::vector<float> logits(4), hidden(4);
  CHECK(plain.hidden_size() == 0);
  CHECK_THROWS_WITH(plain.evaluate_with_hidden(batch, MatrixView<float>(logits.data(), 1, 4),
                                               MatrixView<float>(hidden.data(), 1, 4)),
                    Contains("hidden"));
  toy::MarkovProvider with(markov4(), {.hidden_size = 4});
  with.reset(prompt);
  CHECK_THROWS_WITH(with.evaluate_with_hidden(batch, MatrixView<float>(logits.data(), 1, 4),
                                              MatrixView<float>(hidden.data(), 1, 3)),
                    Contains("hidden"));
}

TEST_CASE("AnyLogitsProvider forwards every call to an owned provider", "[provider][any]") {
  const auto model = markov4();
  AnyLogitsProvider any(toy::MarkovProvider(model, {.hidden_size = 3}));
  REQUIRE(any.has_value());
  CHECK(any.vocab_size() == 4);
  CHECK(any.hidden_size() == 3);
  const std::vector<Token> prompt = {2, 0};
  any.reset(prompt);
  CHECK(any.committed_length() == 2);
  const auto tree = sample_tree();
  const auto batch = TreeBatch::from_tree(tree, 2);
  std::vector<float> logits(static_cast<std::size_t>(batch.rows() * 4));
  std::vector<float> hidden(static_cast<std::size_t>(batch.rows() * 3));
  any.evaluate(batch, MatrixView<float>(logits.data(), batch.rows(), 4));
  check_rows_match_model(model, prompt, tree, logits);
  any.evaluate_with_hidden(batch, MatrixView<float>(logits.data(), batch.rows(), 4),
                           MatrixView<float>(hidden.data(), batch.rows(), 3));
  const std::vector<std::int32_t> kept = {1, 4};
  any.commit(batch, kept, 3);
  CHECK(std::vector<Token>(any.context().begin(), any.context().end()) ==
        std::vector<Token>{2, 0, 2, 2, 3});
  auto* inner = any.target<toy::MarkovProvider>();
  REQUIRE(inner != nullptr);
  CHECK(inner->calls() == 2);
  CHECK(inner->evaluated_tokens() == 12);
  CHECK(any.target<toy::NGramProvider>() == nullptr);
}

TEST_CASE("AnyLogitsProvider can refer to a provider the caller keeps", "[provider][any]") {
  UniformProvider uniform;
  AnyLogitsProvider any(std::ref(uniform));
  CHECK(any.hidden_size() == 0);
  const auto batch = TreeBatch::from_tree(DraftTree{}, 1);
  std::vector<float> logits(3, 1.0f), hidden(3);
  any.evaluate(batch, MatrixView<float>(logits.data(), 1, 3));
  CHECK(uniform.evaluations == 1);
  CHECK(logits == std::vector<float>{0.0f, 0.0f, 0.0f});
  CHECK(any.target<UniformProvider>() == &uniform);
  CHECK_THROWS_WITH(any.evaluate_with_hidden(batch, MatrixView<float>(logits.data(), 1, 3),
                                             MatrixView<float>(hidden.data(), 1, 3)),
                    Contains("hidden"));
  any.commit(batch, {}, 2);
  CHECK(uniform.tokens == std::vector<Token>{0, 2});
}

TEST_CASE("an empty AnyLogitsProvider throws instead of crashing", "[provider][any][errors]") {
  AnyLogitsProvider any;
  CHECK_FALSE(any.has_value());
  CHECK_THROWS_WITH(any.vocab_size(), Contains("provider"));
  CHECK(any.target<UniformProvider>() == nullptr);
}

TEST_CASE("provider::check_output names the bad row and entry", "[provider][errors]") {
  std::vector<float> rows = {0.0f, 1.0f, -kInf, 0.5f, 0.5f, 0.5f};
  const MatrixView<const float> good(rows.data(), 2, 3);
  CHECK_NOTHROW(provider::check_output("target_logits", good, 2, 3));
  CHECK_THROWS_WITH(provider::check_output("target_logits", good, 3, 3),
                    Contains("target_logits") && Contains("rows"));
  CHECK_THROWS_WITH(provider::check_output("draft_logits", good, 2, 4),
                    Contains("draft_logits") && Contains("vocabulary size 4"));
  rows[5] = std::nanf("");
  CHECK_THROWS_WITH(provider::check_output("target_logits", good, 2, 3),
                    Contains("target_logits[1][2]"));
  rows[5] = kInf;
  CHECK_THROWS_WITH(provider::check_output("target_logits", good, 2, 3),
                    Contains("target_logits[1][2]"));
  rows[3] = rows[4] = rows[5] = -kInf;
  CHECK_THROWS_WITH(provider::check_output("target_logits", good, 2, 3),
                    Contains("target_logits[1]") && Contains("-inf"));
}

TEST_CASE("provider::check_hidden_output rejects wrong shapes and non-finite states",
          "[provider][errors]") {
  std::vector<float> states = {0.1f, 0.2f, 0.3f, 0.4f};
  const MatrixView<const float> view(states.data(), 2, 2);
  CHECK_NOTHROW(provider::check_hidden_output("hidden", view, 2, 2));
  CHECK_THROWS_WITH(provider::check_hidden_output("hidden", view, 2, 3), Contains("hidden size 3"));
  states[2] = std::nanf("");
  CHECK_THROWS_WITH(provider::check_hidden_output("hidden", view, 2, 2), Contains("hidden[1][0]"));
}

TEST_CASE("draft and target vocabularies must agree", "[provider][errors]") {
  CHECK_NOTHROW(provider::check_same_vocabulary(32, 32));
  CHECK_THROWS_WITH(provider::check_same_vocabulary(31, 32), Contains("draft") && Contains("32"));
}
