// SPDX-License-Identifier: MIT
// LogitsProviders over the toy models: they score any draft tree exactly, optionally with a
// deterministic hidden state per row, and count their calls for the metrics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/views.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"
#include "specdec/toy/markov.hpp"

namespace specdec::toy {

/// A deterministic stand-in for a model's hidden state after `context`: H values in (-1, 1),
/// equal for equal contexts (only the last `window` tokens matter):
/// out[j] = tanh(sum over k < min(window, n) of w(context[n-1-k], k, j)), where
/// w(token, k, j) = 2 * RandomStream{seed, token, k, 0, Domain::kUser}.uniform(j) - 1.
inline void context_embedding(std::span<const Token> context, int window, std::uint64_t seed,
                              std::span<float> out) {
  const auto n = static_cast<std::int64_t>(context.size());
  const auto used = std::min<std::int64_t>(window, n);
  for (std::size_t j = 0; j < out.size(); ++j) {
    double sum = 0.0;
    for (std::int64_t k = 0; k < used; ++k) {
      const RandomStream w{seed,
                           static_cast<std::uint32_t>(context[static_cast<std::size_t>(n - 1 - k)]),
                           static_cast<std::uint32_t>(k), 0, Domain::kUser};
      sum += 2.0 * w.uniform(static_cast<std::uint32_t>(j)) - 1.0;
    }
    out[j] = static_cast<float>(std::tanh(sum));
  }
}

/// Options of a toy provider. `hidden_size` > 0 makes it return hidden states from
/// `evaluate_with_hidden`: `hidden_size` values of context_embedding(row context, hidden_window,
/// hidden_seed), followed, when `hidden_probabilities` is set, by the row's V next-token
/// probabilities (so a toy drafter head can be made as good or as bad as wanted by how it reads
/// them). The provider's hidden_size() is the total width.
struct ProviderOptions {
  std::int64_t hidden_size = 0;
  int hidden_window = 4;
  std::uint64_t hidden_seed = 0x41dde7;
  bool hidden_probabilities = false;
};

/// A LogitsProvider over a toy model. Row r of `evaluate` holds log(model.next_probabilities(
/// context of row r)) with -inf where the probability is 0; the context of row 0 is the committed
/// context, that of row i + 1 the committed context followed by the tokens on the root-to-node-i
/// path (rebuilt from `parents`). It counts `calls()` and `evaluated_tokens()` (tree nodes scored,
/// the root row not included). Allocation-free after warm-up for a steady tree size (the model's
/// own next_probabilities may allocate).
template <ToyModel M>
class ModelProvider {
 public:
  explicit ModelProvider(M model, ProviderOptions options = {})
      : model_(std::move(model)), options_(options) {
    if (options.hidden_size < 0)
      detail::fail("hidden_size", "{} must be >= 0", options.hidden_size);
    if (options.hidden_window < 1) {
      detail::fail("hidden_window", "{} must be >= 1", options.hidden_window);
    }
    probabilities_.resize(static_cast<std::size_t>(vocab_size()));
  }

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(model_.vocab_size()); }
  std::int64_t hidden_size() const {
    return options_.hidden_size + (options_.hidden_probabilities ? vocab_size() : 0);
  }
  std::span<const Token> context() const { return context_; }
  std::int64_t committed_length() const { return static_cast<std::int64_t>(context_.size()); }
  const M& model() const { return model_; }

  /// Target calls made through `evaluate` / `evaluate_with_hidden` since construction or
  /// `reset_counters()`.
  std::int64_t calls() const { return calls_; }
  /// Tree nodes scored by those calls (sum of batch.size()).
  std::int64_t evaluated_tokens() const { return evaluated_tokens_; }
  void reset_counters() { calls_ = evaluated_tokens_ = 0; }

  /// Starts over from `prompt` (non-empty, tokens in range). Counters are kept.
  void reset(std::span<const Token> prompt) {
    provider::check_prompt(prompt, vocab_size());
    context_.assign(prompt.begin(), prompt.end());
  }

  /// See LogitsProvider. Throws specdec::Error for a malformed batch or a wrongly sized `logits`.
  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    provider::check_evaluate_arguments(batch, committed_length(), logits, vocab_size());
    run(batch, logits, nullptr);
  }

  /// See HiddenStateProvider. Throws specdec::Error("hidden") if hidden_size() is 0 or `hidden`
  /// is not batch.rows() x hidden_size().
  void evaluate_with_hidden(const TreeBatch& batch, MatrixView<float> logits,
                            MatrixView<float> hidden) {
    if (hidden_size() == 0) detail::fail("hidden", "this provider has hidden_size 0");
    provider::check_evaluate_arguments(batch, committed_length(), logits, vocab_size());
    if (hidden.rows != batch.rows() || hidden.cols != hidden_size() ||
        hidden.stride < hidden.cols || hidden.data == nullptr) {
      detail::fail("hidden", "is {} x {} (stride {}), expected {} x {}", hidden.rows, hidden.cols,
                   hidden.stride, batch.rows(), hidden_size());
    }
    run(batch, logits, &hidden);
  }

  /// See LogitsProvider: appends the kept path's tokens, then `next`.
  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept_nodes, Token next) {
    provider::check_commit_arguments(batch, committed_length(), kept_nodes, next, vocab_size());
    for (auto node : kept_nodes) context_.push_back(batch.tokens[static_cast<std::size_t>(node)]);
    context_.push_back(next);
  }

 private:
  void run(const TreeBatch& batch, MatrixView<float> logits, const MatrixView<float>* hidden) {
    ++calls_;
    evaluated_tokens_ += batch.size();
    for (std::int64_t r = 0; r < batch.rows(); ++r) {
      row_context_.assign(context_.begin(), context_.end());
      path_.clear();
      for (auto node = static_cast<std::int32_t>(r - 1); node >= 0;
           node = batch.parents[static_cast<std::size_t>(node)]) {
        path_.push_back(batch.tokens[static_cast<std::size_t>(node)]);
      }
      row_context_.insert(row_context_.end(), path_.rbegin(), path_.rend());
      model_.next_probabilities(row_context_, probabilities_);
      const auto out = logits.row(r);
      for (std::size_t v = 0; v < probabilities_.size(); ++v) {
        out[v] = probabilities_[v] > 0.0f ? std::log(probabilities_[v])
                                          : -std::numeric_limits<float>::infinity();
      }
      if (hidden != nullptr) {
        const auto state = hidden->row(r);
        const auto embedded = static_cast<std::size_t>(options_.hidden_size);
        context_embedding(row_context_, options_.hidden_window, options_.hidden_seed,
                          state.first(embedded));
        if (options_.hidden_probabilities) {
          std::copy(probabilities_.begin(), probabilities_.end(), state.begin() + embedded);
        }
      }
    }
  }

  M model_;
  ProviderOptions options_;
  std::vector<Token> context_;
  std::vector<Token> row_context_;
  std::vector<Token> path_;
  std::vector<float> probabilities_;
  std::int64_t calls_ = 0;
  std::int64_t evaluated_tokens_ = 0;
};

using MarkovProvider = ModelProvider<MarkovModel>;
using NGramProvider = ModelProvider<NGramModel>;

static_assert(HiddenStateProvider<MarkovProvider>);
static_assert(HiddenStateProvider<NGramProvider>);

}  // namespace specdec::toy
