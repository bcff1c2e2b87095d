// SPDX-License-Identifier: MIT
// Random batches of draft trees with their rows, and verify_tree per tree as the oracle: shared by
// the batched tree verification tests of every backend and of the emulated CUDA kernel; random
// forests for the batched masks and positions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/philox.hpp"
#include "specdec/draft/gumbel_topk.hpp"
#include "specdec/toy/distributions.hpp"
#include "specdec/toy/random.hpp"
#include "specdec/tree/draft_tree.hpp"
#include "specdec/verify/tree.hpp"

namespace specdec::test {

inline RandomStream verify_stream(std::uint64_t seed, std::uint32_t sequence,
                                  std::uint32_t position) {
  RandomStream s;
  s.seed = seed;
  s.sequence = sequence;
  s.position = position;
  s.domain = Domain::kVerify;
  return s;
}

/// A target row close to a draft row (so that chains run long): a mix of the draft and noise.
inline std::vector<float> near(const std::vector<float>& draft, toy::ToyRandom& rng, float weight) {
  auto noise = toy::dirichlet(static_cast<std::int64_t>(draft.size()), 1.0, rng);
  std::vector<float> out(draft.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i)
    sum += out[i] = (1 - weight) * draft[i] + weight * noise[i];
  for (auto& x : out) x = static_cast<float>(x / sum);
  return out;
}

/// The drafting stream of sequence `sequence` (position 0, the root).
inline RandomStream draft_stream(std::uint64_t seed, std::uint32_t sequence) {
  RandomStream s;
  s.seed = seed;
  s.sequence = sequence;
  s.domain = Domain::kDraft;
  return s;
}

struct TreeCase {
  std::int64_t vocab = 0;
  std::vector<std::int32_t> offsets{0};
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<float> target, draft;  // N + B rows
  std::vector<RandomStream> streams;
  TreeView view() const { return {tokens, parents}; }
};

/// Appends one tree (children drawn without replacement from their parent's draft row by
/// Gumbel-top-k, 0 to `max_children` per node, `depth` levels) and its rows.
inline void add_tree(TreeCase& c, std::int32_t depth, std::int32_t max_children,
                     toy::ToyRandom& rng, RandomStream stream) {
  const auto v = c.vocab;
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<std::vector<float>> draft_rows{toy::dirichlet(v, 0.7, rng)};  // row 0 = root
  std::vector<std::int32_t> level{-1};
  Workspace ws;
  for (std::int32_t d = 0; d < depth; ++d) {
    std::vector<std::int32_t> next;
    for (const auto node : level) {
      const auto k =
          static_cast<std::int64_t>(rng.uniform() * static_cast<float>(max_children + 1));
      if (k == 0) continue;
      std::vector<Token> kids(static_cast<std::size_t>(k));
      RandomStream drafting = stream;
      drafting.domain = Domain::kDraft;
      const auto got = gumbel_top_k_probabilities<float>(
          draft_rows[static_cast<std::size_t>(node + 1)], k,
          drafting.at_node(static_cast<std::uint32_t>(node + 1)), kids, ws);
      for (std::int64_t j = 0; j < got; ++j) {
        next.push_back(static_cast<std::int32_t>(tokens.size()));
        tokens.push_back(kids[static_cast<std::size_t>(j)]);
        parents.push_back(node);
        draft_rows.push_back(toy::dirichlet(v, 0.7, rng));
      }
    }
    level = next;
  }
  for (const auto& row : draft_rows) {
    const auto t = near(row, rng, 0.4f);
    c.target.insert(c.target.end(), t.begin(), t.end());
    c.draft.insert(c.draft.end(), row.begin(), row.end());
  }
  c.tokens.insert(c.tokens.end(), tokens.begin(), tokens.end());
  c.parents.insert(c.parents.end(), parents.begin(), parents.end());
  c.offsets.push_back(c.offsets.back() + static_cast<std::int32_t>(tokens.size()));
  c.streams.push_back(stream);
}

struct TreeResult {
  std::vector<std::int32_t> accepted_nodes, accepted;
  std::vector<Token> final_tokens;
  std::vector<std::uint8_t> bonus;
  friend bool operator==(const TreeResult&, const TreeResult&) = default;
};

inline TreeResult tree_oracle(const Rule& rule, const TreeCase& c) {
  TreeResult r;
  r.accepted_nodes.assign(c.tokens.size(), -7);
  Workspace ws;
  const auto v = static_cast<std::size_t>(c.vocab);
  for (std::size_t b = 0; b + 1 < c.offsets.size(); ++b) {
    const auto begin = static_cast<std::size_t>(c.offsets[b]);
    const auto n = static_cast<std::size_t>(c.offsets[b + 1]) - begin;
    const auto verdict = verify_tree<float>(
        rule, c.view().subtree(begin, n),
        std::span<const float>(c.target).subspan((begin + b) * v, (n + 1) * v),
        std::span<const float>(c.draft).subspan((begin + b) * v, (n + 1) * v), c.vocab,
        c.streams[b], std::span<std::int32_t>(r.accepted_nodes).subspan(begin, n), ws);
    r.accepted.push_back(verdict.accepted);
    r.final_tokens.push_back(verdict.token);
    r.bonus.push_back(verdict.bonus ? 1 : 0);
  }
  return r;
}

inline TreeCase make_trees(std::int64_t batch, std::int64_t vocab, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  TreeCase c;
  c.vocab = vocab;
  for (std::int64_t b = 0; b < batch; ++b) {
    // Sequence 2 has an empty tree (only the bonus token).
    add_tree(c, b == 2 ? 0 : 3, 3, rng, verify_stream(seed, static_cast<std::uint32_t>(b), 5));
  }
  return c;
}

/// A CSR batch of draft trees and the same trees as DraftTree.
struct Forest {
  std::vector<std::int32_t> offsets{0};
  std::vector<Token> tokens;
  std::vector<std::int32_t> parents;
  std::vector<DraftTree> trees;
  TreeView view() const { return {tokens, parents}; }
};

/// `batch` level-ordered trees of 1 to 70 nodes (tree 1 is empty), more than 32 nodes in most,
/// so that mask rows span several words.
inline Forest random_forest(std::int64_t batch, std::uint64_t seed) {
  toy::ToyRandom rng(seed);
  Forest f;
  for (std::int64_t b = 0; b < batch; ++b) {
    DraftTree t;
    const auto n = b == 1 ? 0 : 1 + static_cast<std::int32_t>(rng.uniform() * 70.0f);
    for (std::int32_t i = 0; i < n; ++i) {
      // Level order: a parent no shallower than the previous node's parent.
      const std::int32_t last = i == 0 ? -1 : t.parents.back();
      const auto span = static_cast<float>(i - last);
      std::int32_t parent = last + static_cast<std::int32_t>(rng.uniform() * span);
      if (parent >= i) parent = i - 1;
      t.add(static_cast<Token>(i % 7), parent);
    }
    f.tokens.insert(f.tokens.end(), t.tokens.begin(), t.tokens.end());
    f.parents.insert(f.parents.end(), t.parents.begin(), t.parents.end());
    f.offsets.push_back(f.offsets.back() + t.size());
    f.trees.push_back(t);
  }
  return f;
}

}  // namespace specdec::test
