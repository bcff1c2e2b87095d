// SPDX-License-Identifier: MIT
// The LogitsProvider concept (a model that scores draft trees), its type-erased wrapper
// AnyLogitsProvider, and the output checks the decoding loop applies to every provider.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include "specdec/core/error.hpp"
#include "specdec/core/token.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/views.hpp"
#include "specdec/provider/tree_batch.hpp"

namespace specdec {

/// A model behind the decoding loop (the target, or a draft model), holding a committed context.
///
/// - `vocab_size()`: V, the number of logits per row.
/// - `reset(prompt)`: the committed context becomes `prompt`. Providers whose root must be a real
///   token (all providers in this library) throw specdec::Error("prompt") on an empty prompt.
/// - `context()` / `committed_length()`: the committed tokens and their count.
/// - `evaluate(batch, logits)`: scores `batch` appended to the committed context
///   (`batch.committed_length` must equal `committed_length()`). `logits` has `batch.rows()` =
///   batch.size() + 1 rows of V columns. **Row layout**: row 0 is the next-token distribution
///   after the committed context (the root); row i + 1 the distribution after node i, i.e. after
///   the context followed by the tokens on the root-to-node-i path. Rows are raw logits (any
///   additive shift per row; log-probabilities qualify), -inf for tokens that are impossible, no
///   NaN, no +inf. Evaluation does not change the committed context.
/// - `commit(batch, kept_nodes, next)`: appends to the committed context the tokens of
///   `kept_nodes` (a root-to-node path of `batch`, in order: kept_nodes[0] a child of the root,
///   each later entry a child of the one before it; may be empty) and then `next`, the correction
///   or bonus token. The context grows by kept_nodes.size() + 1. `batch` is the tree the path
///   refers to (the one the target verified); a provider may have evaluated all of it, a
///   level-order prefix of it (a draft model never evaluates the deepest level), or none of it,
///   and must keep whatever cache it holds for the kept nodes and drop the rest.
template <class P>
concept LogitsProvider = requires(P& provider, const P& cprovider, const TreeBatch& batch,
                                  MatrixView<float> logits,
                                  std::span<const std::int32_t> kept_nodes, Token next,
                                  std::span<const Token> prompt) {
  { cprovider.vocab_size() } -> std::convertible_to<std::int64_t>;
  { cprovider.context() } -> std::convertible_to<std::span<const Token>>;
  { cprovider.committed_length() } -> std::convertible_to<std::int64_t>;
  provider.evaluate(batch, logits);
  provider.commit(batch, kept_nodes, next);
  provider.reset(prompt);
};

/// A LogitsProvider that can also return one hidden state per row (for drafter heads such as
/// ReDrafter's). `hidden_size()` is H; 0 means this instance has no hidden states and
/// `evaluate_with_hidden` throws. `hidden` has batch.rows() rows of H columns, laid out like the
/// logits: row 0 is the state at the root (the last committed token), row i + 1 the state at
/// node i.
template <class P>
concept HiddenStateProvider = LogitsProvider<P> &&
    requires(P& provider, const P& cprovider, const TreeBatch& batch, MatrixView<float> logits,
             MatrixView<float> hidden) {
  { cprovider.hidden_size() } -> std::convertible_to<std::int64_t>;
  provider.evaluate_with_hidden(batch, logits, hidden);
};

namespace detail {

/// True when the row has no NaN, no +inf and at least one finite entry (a valid logits row):
/// One pass that vectorises (flags, no early exit).
inline bool logits_row_is_valid(const float* row, std::int64_t n) {
  if (n <= 0) return false;
  int bad = 0, finite = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = row[i];
    bad |= (x != x || x == std::numeric_limits<float>::infinity()) ? 1 : 0;
    finite |= x > kNegInf ? 1 : 0;
  }
  return bad == 0 && finite != 0;
}

}  // namespace detail

namespace provider {

// The checks a provider applies to what it is given and a caller to what a provider answers.

/// Checks a provider's answer before anything reads it: `logits` must have `rows` rows of `vocab`
/// columns (stride >= cols) and every row must be a valid logits row (no NaN, no +inf, not all
/// -inf). Throws specdec::Error naming `name` (or `name[r]` / `name[r][c]` for a bad row / entry).
inline void check_output(std::string_view name, MatrixView<const float> logits, std::int64_t rows,
                         std::int64_t vocab) {
  if (logits.rows != rows) detail::fail(name, "has {} rows, expected {}", logits.rows, rows);
  if (logits.cols != vocab) {
    detail::fail(name, "rows have {} logits, expected the vocabulary size {}", logits.cols, vocab);
  }
  if (logits.stride < logits.cols) {
    detail::fail(name, "stride {} is smaller than the row length {}", logits.stride, logits.cols);
  }
  if (rows > 0 && logits.data == nullptr) detail::fail(name, "points to no memory");
  for (std::int64_t r = 0; r < rows; ++r) {
    // A branch-free scan first (it vectorises); the detailed check only runs to word the error.
    if (!detail::logits_row_is_valid(logits.row_data(r), logits.cols)) {
      check_logits_row<float>(ArgName(name, r), logits.row(r));
    }
  }
}

/// Checks hidden states returned by a provider: `rows` rows of `hidden_size` finite values.
inline void check_hidden_output(std::string_view name, MatrixView<const float> hidden,
                                std::int64_t rows, std::int64_t hidden_size) {
  if (hidden.rows != rows) detail::fail(name, "has {} rows, expected {}", hidden.rows, rows);
  if (hidden.cols != hidden_size) {
    detail::fail(name, "rows have {} values, expected the hidden size {}", hidden.cols,
                 hidden_size);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = hidden.row(r);
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (!std::isfinite(row[c])) {
        detail::fail(fmt::format("{}[{}][{}]", name, r, c), "{} is not finite", row[c]);
      }
    }
  }
}

/// Draft and target must share one vocabulary. Throws specdec::Error("draft") otherwise.
inline void check_same_vocabulary(std::int64_t draft_vocab, std::int64_t target_vocab) {
  if (draft_vocab != target_vocab) {
    detail::fail("draft", "vocabulary size {} differs from the target's {}", draft_vocab,
                 target_vocab);
  }
}

/// A prompt a provider can start from: non-empty, every token in [0, vocab).
inline void check_prompt(std::span<const Token> prompt, std::int64_t vocab) {
  if (prompt.empty()) {
    detail::fail("prompt", "is empty: the root of every step is the last committed token");
  }
  detail::check_tokens<Token>("prompt", prompt, vocab);
}

/// The checks every provider's `evaluate` applies to its arguments: the batch is well formed for
/// `vocab`, was built for this context length, and `logits` has batch.rows() x vocab cells.
inline void check_evaluate_arguments(const TreeBatch& batch, std::int64_t committed_length,
                                     MatrixView<const float> logits, std::int64_t vocab) {
  if (batch.committed_length != committed_length) {
    detail::fail("batch.committed_length", "{} does not match the provider's context length {}",
                 batch.committed_length, committed_length);
  }
  batch.validate(vocab);
  if (logits.rows != batch.rows()) {
    detail::fail("logits", "has {} rows, expected {} (one for the root + one per node)",
                 logits.rows, batch.rows());
  }
  if (logits.cols != vocab)
    detail::fail("logits", "has {} columns, expected {}", logits.cols, vocab);
  if (logits.stride < logits.cols || logits.data == nullptr) {
    detail::fail("logits", "is not a valid matrix view (stride {}, cols {})", logits.stride,
                 logits.cols);
  }
}

/// The checks every provider's `commit` applies: the batch matches the context length, the path
/// is a root-to-node path of the batch, and `next` is in the vocabulary.
inline void check_commit_arguments(const TreeBatch& batch, std::int64_t committed_length,
                                   std::span<const std::int32_t> kept_nodes, Token next,
                                   std::int64_t vocab) {
  if (batch.committed_length != committed_length) {
    detail::fail("batch.committed_length", "{} does not match the provider's context length {}",
                 batch.committed_length, committed_length);
  }
  detail::check_kept_path(batch, kept_nodes);
  detail::check_token("next", next, vocab);
}

}  // namespace provider

/// A LogitsProvider of any type, chosen at run time. Owns the provider (moved or copied in), or
/// refers to one the caller keeps alive when given `std::ref(provider)`. Move-only; one virtual
/// call per method. Itself satisfies LogitsProvider and HiddenStateProvider (hidden_size() is 0
/// when the wrapped type has no hidden states).
class AnyLogitsProvider {
 public:
  AnyLogitsProvider() = default;

  template <class P>
  requires(!std::same_as<std::remove_cvref_t<P>, AnyLogitsProvider> &&
           LogitsProvider<std::unwrap_reference_t<std::remove_cvref_t<P>>>)
      AnyLogitsProvider(P&& provider)  // NOLINT: implicit, so any provider converts
      : self_(std::make_unique<Holder<std::remove_cvref_t<P>>>(std::forward<P>(provider))) {}

  bool has_value() const { return self_ != nullptr; }

  std::int64_t vocab_size() const { return get().vocab_size(); }
  std::int64_t hidden_size() const { return get().hidden_size(); }
  std::span<const Token> context() const { return get().context(); }
  std::int64_t committed_length() const { return get().committed_length(); }
  void evaluate(const TreeBatch& batch, MatrixView<float> logits) { get().evaluate(batch, logits); }
  void evaluate_with_hidden(const TreeBatch& batch, MatrixView<float> logits,
                            MatrixView<float> hidden) {
    get().evaluate_with_hidden(batch, logits, hidden);
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept_nodes, Token next) {
    get().commit(batch, kept_nodes, next);
  }
  void reset(std::span<const Token> prompt) { get().reset(prompt); }

  /// The wrapped provider if it has type P (or is a std::reference_wrapper<P>), else nullptr.
  template <class P>
  P* target() {
    if (!self_) return nullptr;
    if (auto* h = dynamic_cast<Holder<P>*>(self_.get())) return &h->provider;
    if (auto* h = dynamic_cast<Holder<std::reference_wrapper<P>>*>(self_.get())) {
      return &h->provider.get();
    }
    return nullptr;
  }

 private:
  struct Interface {
    virtual ~Interface() = default;
    virtual std::int64_t vocab_size() const = 0;
    virtual std::int64_t hidden_size() const = 0;
    virtual std::span<const Token> context() const = 0;
    virtual std::int64_t committed_length() const = 0;
    virtual void evaluate(const TreeBatch&, MatrixView<float>) = 0;
    virtual void evaluate_with_hidden(const TreeBatch&, MatrixView<float>, MatrixView<float>) = 0;
    virtual void commit(const TreeBatch&, std::span<const std::int32_t>, Token) = 0;
    virtual void reset(std::span<const Token>) = 0;
  };

  template <class Stored>
  struct Holder final : Interface {
    using P = std::unwrap_reference_t<Stored>;
    template <class Arg>
    explicit Holder(Arg&& arg) : provider(std::forward<Arg>(arg)) {}

    P& self() { return provider; }
    const P& self() const { return provider; }

    std::int64_t vocab_size() const override { return self().vocab_size(); }
    std::int64_t hidden_size() const override {
      if constexpr (HiddenStateProvider<P>) {
        return self().hidden_size();
      } else {
        return 0;
      }
    }
    std::span<const Token> context() const override { return self().context(); }
    std::int64_t committed_length() const override { return self().committed_length(); }
    void evaluate(const TreeBatch& batch, MatrixView<float> logits) override {
      self().evaluate(batch, logits);
    }
    void evaluate_with_hidden(const TreeBatch& batch, MatrixView<float> logits,
                              MatrixView<float> hidden) override {
      if constexpr (HiddenStateProvider<P>) {
        self().evaluate_with_hidden(batch, logits, hidden);
      } else {
        detail::fail("hidden", "this provider does not return hidden states");
      }
    }
    void commit(const TreeBatch& batch, std::span<const std::int32_t> kept_nodes,
                Token next) override {
      self().commit(batch, kept_nodes, next);
    }
    void reset(std::span<const Token> prompt) override { self().reset(prompt); }

    Stored provider;
  };

  Interface& get() const {
    if (!self_) detail::fail("provider", "AnyLogitsProvider is empty");
    return *self_;
  }

  std::unique_ptr<Interface> self_;
};

static_assert(HiddenStateProvider<AnyLogitsProvider>);

}  // namespace specdec
