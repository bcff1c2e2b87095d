// SPDX-License-Identifier: MIT
// Acceptance measured as a decoder runs, by child rank and by depth, as Sequoia measures it: the
// acceptance_by_rank that sequoia_tree takes, rebuilt from the verified trees between steps.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/tree/tree_view.hpp"

namespace specdec {

/// How often something was tried and how often it was accepted.
struct AcceptanceCount {
  std::int64_t offered = 0;
  std::int64_t accepted = 0;
};

/// The prior an estimate starts from: `weight` pseudo-observations at `rate`.
struct AcceptancePrior {
  double rate = 0.5;
  double weight = 1.0;
};

/// Counts of acceptance by child rank and by depth. A node whose parent was accepted (the root
/// always is) offers each of its children's ranks once; the child on the accepted path, if any,
/// is accepted at its rank. Likewise each accepted node with children offers the next depth once,
/// accepted when the path goes on. So acceptance_by_rank()[r] estimates the probability that a
/// node's r-th child is accepted given the node was, the quantity sequoia_tree takes.
class AcceptanceEstimator {
 public:
  explicit AcceptanceEstimator(AcceptancePrior prior = {}) : prior_(prior) {
    if (!(prior.rate >= 0.0 && prior.rate <= 1.0)) {
      detail::fail("prior.rate", "{} is not a probability in [0, 1]", prior.rate);
    }
    if (!(std::isfinite(prior.weight) && prior.weight >= 0.0)) {
      detail::fail("prior.weight", "{} must be finite and >= 0", prior.weight);
    }
  }

  /// Records one verified tree: `parents` of its nodes (-1 or an earlier node; children in rank
  /// order by id) and `accepted_nodes`, the accepted root path (as verify_tree writes it). Throws
  /// specdec::Error naming parents[i] or accepted_nodes[t] (not a path from the root) and changes
  /// nothing then. Complexity: O(N); allocates only when the tree outgrows earlier ones.
  void update(std::span<const std::int32_t> parents, std::span<const std::int32_t> accepted_nodes) {
    const std::size_t n = parents.size();
    detail::check_node_count("parents", n);
    children_.assign(n + 1, 0);  // [node + 1]
    ranks_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      detail::check_parent(ArgName("parents", static_cast<std::int64_t>(i)), parents[i],
                           static_cast<std::int64_t>(i));
      ranks_[i] = children_[static_cast<std::size_t>(parents[i] + 1)]++;
    }
    std::int32_t previous = -1;
    for (std::size_t t = 0; t < accepted_nodes.size(); ++t) {
      const auto node = accepted_nodes[t];
      if (node < 0 || static_cast<std::size_t>(node) >= n) {
        detail::fail(ArgName("accepted_nodes", static_cast<std::int64_t>(t)),
                     "{} is not a node of the tree (parents has {} entries)", node, n);
      }
      if (parents[static_cast<std::size_t>(node)] != previous) {
        detail::fail(ArgName("accepted_nodes", static_cast<std::int64_t>(t)),
                     "{} is not a child of {} (accepted nodes are a path from the root)", node,
                     previous);
      }
      previous = node;
    }
    // Each accepted node (the root first) offers its children's ranks and the next depth.
    previous = -1;
    for (std::size_t t = 0; t <= accepted_nodes.size(); ++t) {
      const auto offered = children_[static_cast<std::size_t>(previous + 1)];
      if (offered == 0) break;
      grow(by_rank_, static_cast<std::size_t>(offered));
      grow(by_depth_, t + 1);
      for (std::int32_t r = 0; r < offered; ++r) ++by_rank_[static_cast<std::size_t>(r)].offered;
      ++by_depth_[t].offered;
      if (t == accepted_nodes.size()) break;
      previous = accepted_nodes[t];
      ++by_rank_[static_cast<std::size_t>(ranks_[static_cast<std::size_t>(previous)])].accepted;
      ++by_depth_[t].accepted;
    }
  }

  /// Counts by child rank (0 = first child); as many ranks as the widest node offered.
  std::span<const AcceptanceCount> by_rank() const { return by_rank_; }
  /// Counts by depth (index 0 = depth 1, the root's children).
  std::span<const AcceptanceCount> by_depth() const { return by_depth_; }

  /// The estimated probability for each of `ranks` ranks: (accepted + prior) / (offered + prior
  /// weight), the prior's rate where nothing was observed. Throws specdec::Error naming ranks < 1.
  std::vector<double> acceptance_by_rank(std::int32_t ranks) const {
    if (ranks < 1) detail::fail("ranks", "{} must be >= 1", ranks);
    return rates(by_rank_, static_cast<std::size_t>(ranks));
  }
  /// acceptance_by_rank(out.size()) written to `out` (no allocation). Throws specdec::Error
  /// naming ranks when `out` is empty.
  void fill_acceptance_by_rank(std::span<double> out) const {
    if (out.empty()) detail::fail("ranks", "0 must be >= 1");
    fill_rates(by_rank_, out);
  }
  /// The same by depth, for `depths` levels (index 0 = depth 1).
  std::vector<double> acceptance_by_depth(std::int32_t depths) const {
    if (depths < 1) detail::fail("depths", "{} must be >= 1", depths);
    return rates(by_depth_, static_cast<std::size_t>(depths));
  }

  void reset() {
    by_rank_.clear();
    by_depth_.clear();
  }

 private:
  static void grow(std::vector<AcceptanceCount>& counts, std::size_t size) {
    if (counts.size() < size) counts.resize(size);
  }

  std::vector<double> rates(const std::vector<AcceptanceCount>& counts, std::size_t size) const {
    std::vector<double> out(size);
    fill_rates(counts, out);
    return out;
  }

  void fill_rates(const std::vector<AcceptanceCount>& counts, std::span<double> out) const {
    for (std::size_t k = 0; k < out.size(); ++k) {
      out[k] = prior_.rate;
      const double offered =
          k < counts.size() ? static_cast<double>(counts[k].offered) + prior_.weight : 0.0;
      if (offered > 0.0) {
        out[k] = (static_cast<double>(counts[k].accepted) + prior_.rate * prior_.weight) / offered;
      }
    }
  }

  AcceptancePrior prior_;
  std::vector<AcceptanceCount> by_rank_, by_depth_;
  std::vector<std::int32_t> children_, ranks_;  // scratch of update()
};

}  // namespace specdec
