// SPDX-License-Identifier: MIT
// The Decoder loop allocates nothing per step after warm-up, for every built-in method (its own
// test program: it counts every heap allocation of the process).
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "decode/toy_tables.hpp"
#include "specdec/decode/chain_length_strategy.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/ngram_strategy.hpp"
#include "specdec/decode/redrafter_strategy.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "specdec/toy/toy.hpp"
#include "specdec/tree/select.hpp"
#include "specdec/tree/sequoia.hpp"
#include "support/allocation_counter.hpp"

using namespace specdec;

namespace {

// The Markov tables as a provider that allocates nothing after reset: row r is the table row of
// the token it follows, and the hidden state (H = V) is that row too.
class TableProvider {
 public:
  explicit TableProvider(std::vector<std::vector<float>> table) : table_(std::move(table)) {}
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(table_.size()); }
  std::int64_t hidden_size() const { return vocab_size(); }
  std::span<const Token> context() const { return context_; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(context_.size()); }
  void reset(std::span<const Token> prompt) {
    context_.reserve(1 << 12);
    context_.assign(prompt.begin(), prompt.end());
  }
  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    for (std::int64_t r = 0; r < logits.rows; ++r) {
      const auto& row = table_[static_cast<std::size_t>(token_before(batch, r))];
      for (std::size_t x = 0; x < row.size(); ++x) logits.row_data(r)[x] = std::log(row[x]);
    }
  }
  void evaluate_with_hidden(const TreeBatch& batch, MatrixView<float> logits,
                            MatrixView<float> hidden) {
    evaluate(batch, logits);
    for (std::int64_t r = 0; r < hidden.rows; ++r) {
      const auto& row = table_[static_cast<std::size_t>(token_before(batch, r))];
      std::copy(row.begin(), row.end(), hidden.row_data(r));
    }
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept, Token next) {
    for (const auto node : kept) context_.push_back(batch.tokens[static_cast<std::size_t>(node)]);
    context_.push_back(next);
  }

 private:
  Token token_before(const TreeBatch& batch, std::int64_t row) const {
    return row == 0 ? context_.back() : batch.tokens[static_cast<std::size_t>(row - 1)];
  }

  std::vector<std::vector<float>> table_;
  std::vector<Token> context_;
};

static_assert(HiddenStateProvider<TableProvider>);

/// Heap allocations of 50 steps of `decoder` (reset to `prompt` on sequence 3) after `warm_up`.
template <class D>
long step_allocations(D& decoder, std::span<const Token> prompt, int warm_up) {
  decoder.reset(prompt, 3);
  return test::allocations_after_warm_up([&] { decoder.step(); }, 50, warm_up);
}

}  // namespace

TEST_CASE("the allocation counter sees an allocation", "[decode][allocation]") {
  const auto allocations = test::allocations_after_warm_up([] { std::vector<int> v(8); }, 1);
  CHECK(allocations == 1);
}

TEST_CASE("Decoder steps of every method allocate nothing after warm-up", "[decode][allocation]") {
  const std::vector<Token> prompt{1, 2};
  for (const auto method : kAllMethods) {
    TableProvider target(test::target_table()), draft(test::draft_table());
    const DecodeOptions options{.method = method,
                                .depth = 3,
                                .width = 2,
                                .branching = {2, 2},
                                .cascade = {.alpha = 0.3f},
                                .lossy = {.alpha = 0.2f},
                                .max_new_tokens = 1000};
    Decoder decoder(target, draft, options);
    INFO(method_name(method));
    CHECK(step_allocations(decoder, prompt, 20) == 0);
  }
}

TEST_CASE("ReDrafter steps allocate nothing after warm-up, in every verification mode",
          "[decode][allocation][redrafter]") {
  const std::vector<Token> prompt{1, 2};
  for (const auto verification :
       {ReDrafterVerification::kExact, ReDrafterVerification::kGreedy,
        ReDrafterVerification::kTypical, ReDrafterVerification::kParity}) {
    TableProvider target(test::target_table());
    const auto head =
        toy::markov_head(toy::MarkovModel::from_rows(test::draft_table()), target.hidden_size());
    const ReDrafterOptions options{.verification = verification,
                                   .warp = {.temperature = 0.9f, .top_p = 0.95f},
                                   .width = 3,
                                   .depth = 3,
                                   .max_new_tokens = 1000};
    Decoder<TableProvider, ReDrafterStrategy> decoder(target, ReDrafterStrategy(head, options),
                                                      options.loop());
    INFO(redrafter_verification_name(verification));
    CHECK(step_allocations(decoder, prompt, 20) == 0);
  }
}

TEST_CASE("Top-k tree steps allocate nothing after warm-up, for every shape policy",
          "[decode][allocation][topk]") {
  const std::vector<Token> prompt{1, 2, 3, 1, 2};
  for (const auto shape : kAllTreeShapePolicies) {
    TableProvider target(test::target_table()), draft(test::draft_table());
    // min_gain low enough that OPT-Tree's trees vary in size; the plan's costs make its budget
    // and depth follow the acceptance measured.
    const TopKTreeOptions options{.shape = shape,
                                  .width = 2,
                                  .depth = 3,
                                  .budget = 6,
                                  .min_gain = 0.1,
                                  .verify_cost = {1.0, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5},
                                  .draft_cost_per_level = 0.05};
    Decoder<TableProvider, TopKTreeStrategy<TableProvider>> decoder(
        target, TopKTreeStrategy(draft, options), {.max_new_tokens = 1000});
    INFO(tree_shape_policy_name(shape));
    // A long warm-up sees the largest tree and its longest accepted path.
    CHECK(step_allocations(decoder, prompt, 150) == 0);
  }
}

TEST_CASE("N-gram steps allocate nothing after warm-up", "[decode][allocation][ngram]") {
  const std::vector<Token> prompt{1, 2, 3, 1, 2};
  TableProvider target(test::target_table());
  Decoder<TableProvider, NGramStrategy> decoder(target, NGramStrategy({.max_draft = 3}),
                                                {.max_new_tokens = 1000});
  // Chains vary in length: a long warm-up sees the longest chain fully accepted (the decoder's
  // output buffer then has its largest size).
  CHECK(step_allocations(decoder, prompt, 150) == 0);
}

TEST_CASE("The tree selection functions reuse their workspace without allocating",
          "[decode][allocation][shape]") {
  const std::vector<std::int32_t> parents{-1, -1, 0, 0, 1, 2, 2, 4};
  const std::vector<Token> tokens{3, 1, 0, 2, 4, 1, 3, 0};
  const std::vector<float> log_probs{-0.2f, -1.8f, -0.5f, -1.0f, -0.1f, -0.3f, -2.0f, -0.4f};
  const std::vector<double> acceptance{0.8, 0.4, 0.1};
  const std::vector<double> verify_cost{1.0, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0};
  SelectWorkspace select_workspace;
  TreeSelection selection;
  DraftTree tree;
  GrownTree grown;
  SequoiaWorkspace sequoia_workspace;
  TreeShape shape;
  SequoiaPlan plan;
  const auto expand = [](std::span<const Token> path, std::vector<DraftCandidate>& children) {
    const auto base = static_cast<Token>(path.size());
    children.push_back({base, -0.3f});
    children.push_back({static_cast<Token>(base + 1), -1.2f});
  };
  const auto all = [&] {
    select_by_path_score(parents, log_probs, {.budget = 5}, selection, select_workspace);
    selected_tree(TreeView{tokens, parents}, selection, tree);
    grow_best_first(expand, {.budget = 6, .max_depth = 3}, grown, select_workspace);
    sequoia_tree(acceptance, 6, 3, shape, sequoia_workspace);
    sequoia_plan(acceptance, {.verify_cost = verify_cost, .draft_cost_per_level = 0.1}, plan,
                 sequoia_workspace);
  };
  CHECK(test::allocations_after_warm_up(all, 5, 1) == 0);
}

TEST_CASE("Length-controlled chain steps allocate nothing after warm-up, for every controller",
          "[decode][allocation][length]") {
  for (const auto policy : kAllLengthPolicies) {
    TableProvider target(test::target_table()), draft(test::draft_table());
    // Short maximum lengths and a long warm-up: it sees the longest chain fully accepted, so no
    // buffer grows later.
    ChainLengthOptions options{.policy = policy,
                               .cumulative = {.threshold = 0.9, .max_length = 3},
                               .heuristic = {.initial = 2, .max_length = 3},
                               .batch_average = {.initial = 3, .max_length = 3},
                               .goodput = {.draft_cost = 0.2, .max_length = 3}};
    Decoder<TableProvider, ChainLengthStrategy<TableProvider>> decoder(
        target, ChainLengthStrategy(draft, options), {.max_new_tokens = 1000});
    decoder.reset(std::vector<Token>{1, 2}, 3);
    INFO(length_policy_name(policy));
    CHECK(test::allocations_after_warm_up([&] { decoder.step(); }, 50, 150) == 0);
  }
}
