// SPDX-License-Identifier: MIT
// kjv::ModelProvider's rows through the KV cache (a tree in two passes with specdec's mask, then
// a path kept by kv_compaction) equal plain causal passes over each node's whole path, within
// float rounding (the same tolerance as the comparison with PyTorch, 1e-4).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "examples/kjv_pair.hpp"
#include "kjv_provider.hpp"
#include "specdec/provider/tree_batch.hpp"

namespace {

constexpr float kTolerance = 1e-4f;

// The tree of the Python test: two children of the root, a path 0 -> 2 -> 5 three deep.
specdec::DraftTree test_tree(std::int32_t nodes) {
  const std::vector<std::int32_t> parents = {-1, -1, 0, 0, 1, 2, 2, 5};
  const std::vector<specdec::Token> tokens = {' ', 'L', 'h', 't', 'o', 'e', 'a', 'f'};
  specdec::DraftTree tree;
  for (std::int32_t i = 0; i < nodes; ++i) tree.add(tokens[i], parents[i]);
  return tree;
}

// Scores `tree` (after `half`, a prefix of it scored first) and checks every row against a
// plain pass over the context and the node's path.
specdec::TreeBatch check_rows(kjv::ModelProvider& provider, const specdec::DraftTree& half,
                              const specdec::DraftTree& tree) {
  const auto& model = specdec::test::kjv_pair().target;
  const auto vocab = model.config().vocab;
  const auto context =
      std::vector<specdec::Token>(provider.context().begin(), provider.context().end());
  kjv::Matrix rows(tree.size() + 1, vocab);
  const auto view = [&](const specdec::TreeBatch& b) {
    return specdec::MatrixView<float>(rows.data(), b.rows(), vocab);
  };
  const auto first = specdec::TreeBatch::from_tree(half, provider.committed_length());
  provider.evaluate(first, view(first));
  const auto batch = specdec::TreeBatch::from_tree(tree, provider.committed_length());
  provider.evaluate(batch, view(batch));
  for (std::int32_t row = 0; row < batch.rows(); ++row) {
    std::vector<specdec::Token> path;
    for (auto node = row - 1; node >= 0; node = tree.parents[static_cast<std::size_t>(node)]) {
      path.insert(path.begin(), tree.tokens[static_cast<std::size_t>(node)]);
    }
    auto sequence = context;
    sequence.insert(sequence.end(), path.begin(), path.end());
    const auto expected = model.prefix_logits(sequence);
    INFO("row " << row);
    CHECK((rows.row(row) - expected.row(expected.rows() - 1)).cwiseAbs().maxCoeff() < kTolerance);
  }
  return batch;
}

}  // namespace

TEST_CASE("a tree scored through the KV cache, before and after a compaction, equals plain passes",
          "[examples][kjv]") {
  kjv::ModelProvider provider(specdec::test::kjv_pair().target);
  provider.reset(specdec::test::kjv_prompt());
  const auto tree = test_tree(8);
  const auto batch = check_rows(provider, test_tree(4), tree);
  const std::vector<std::int32_t> kept = {0, 2, 5};
  provider.commit(batch, kept, 'r');
  REQUIRE(provider.committed_length() ==
          static_cast<std::int64_t>(specdec::test::kjv_prompt().size()) + 4);
  check_rows(provider, test_tree(3), tree);
}
