// SPDX-License-Identifier: MIT
// Providers written in Python, as the C++ decoding loop calls them, and what the decoding
// bindings share: a Python exception a provider raises comes out of the loop unchanged.
//
// A Python provider is called through PyProvider, which satisfies the C++ LogitsProvider and
// HiddenStateProvider concepts: the loop runs with the GIL released and each provider call takes
// it back. The logits (and hidden states) a provider fills are NumPy views of the decoder's own
// buffer, so nothing is copied.
#pragma once

#include <fmt/format.h>

#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "rows.hpp"
#include "specdec/decode/any_strategy.hpp"
#include "specdec/provider/logits_provider.hpp"
#include "specdec/provider/tree_batch.hpp"

namespace specdec::python {

/// A copy of `batch` owned by Python (a provider may keep it past the call).
py::object batch_copy(const TreeBatch& batch);

/// What the loop unwinds with when a Python provider raised: a plain C++ exception, so that no
/// Python object crosses the C++ loop or its thread pool (which may keep the last exception past
/// the call, when no GIL can be taken to release a Python one).
struct ProviderRaised : std::exception {
  const char* what() const noexcept override { return "a Python provider raised an exception"; }
};

/// The Python exception raised by a provider during one call into the loop (the first one when
/// several sequences run at once). Lives in the binding's frame, so it is destroyed with the GIL
/// held; `rethrow` raises the original exception object unchanged.
class ProviderErrors {
 public:
  /// Keeps `error` (GIL held) unless one is kept already, and throws ProviderRaised.
  [[noreturn]] void raise(py::error_already_set&& error) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_.emplace(std::move(error));
    }
    throw ProviderRaised();
  }
  /// Raises the kept Python exception (GIL held).
  [[noreturn]] void rethrow() {
    if (!first_) throw std::logic_error("a provider raised, but no Python exception was kept");
    py::error_already_set error = std::move(*first_);
    first_.reset();
    throw error;
  }

 private:
  std::mutex mutex_;
  std::optional<py::error_already_set> first_;
};

/// Runs `loop` with the GIL released; a Python exception a provider raised comes out unchanged.
template <class F>
decltype(auto) run_unlocked(ProviderErrors& errors, F&& loop) {
  try {
    py::gil_scoped_release unlocked;
    return loop();
  } catch (const ProviderRaised&) {
    errors.rethrow();  // the GIL is back: `unlocked` ended before this handler
  }
}

/// A provider written in Python: an object with vocab_size(), context(), committed_length(),
/// reset(prompt), evaluate(batch, logits), commit(batch, kept_nodes, next) and optionally
/// hidden_size() / evaluate_with_hidden(batch, logits, hidden). Holds the object borrowed (the
/// caller keeps it alive) and takes the GIL for each call; an exception the object raises is
/// handed to `errors` and the loop unwinds with ProviderRaised.
class PyProvider {
 public:
  PyProvider(py::handle self, std::string name, ProviderErrors& errors)
      : self_(self), name_(std::move(name)), errors_(&errors) {}

  std::int64_t vocab_size() const { return integer("vocab_size"); }
  std::int64_t hidden_size() const {
    const bool has = call([&] { return py::hasattr(self_, "hidden_size"); });
    return has ? integer("hidden_size") : 0;
  }
  std::int64_t committed_length() const { return integer("committed_length"); }

  std::span<const Token> context() const {
    call([&] {
      const py::object tokens = self_.attr("context")();
      const Array array = token_arg(tokens, name_ + ".context()", 1);
      const auto values = array.span<Token>(name_ + ".context()");
      context_.assign(values.begin(), values.end());
    });
    return context_;
  }

  void reset(std::span<const Token> prompt) {
    call([&] { self_.attr("reset")(output_from<Token>(prompt, ArrayKind::numpy)); });
  }

  void evaluate(const TreeBatch& batch, MatrixView<float> logits) {
    call([&] { self_.attr("evaluate")(batch_copy(batch), rows_view(logits)); });
  }

  void evaluate_with_hidden(const TreeBatch& batch, MatrixView<float> logits,
                            MatrixView<float> hidden) {
    call([&] {
      if (!py::hasattr(self_, "evaluate_with_hidden")) {
        throw Error(name_, "has no evaluate_with_hidden(batch, logits, hidden) method");
      }
      self_.attr("evaluate_with_hidden")(batch_copy(batch), rows_view(logits), rows_view(hidden));
    });
  }

  void commit(const TreeBatch& batch, std::span<const std::int32_t> kept_nodes, Token next) {
    call([&] {
      self_.attr("commit")(batch_copy(batch),
                           output_from<std::int32_t>(kept_nodes, ArrayKind::numpy), next);
    });
  }

 private:
  /// Runs `f` with the GIL held (every Python object it makes ends inside).
  template <class F>
  std::invoke_result_t<F&> call(F&& f) const {
    py::gil_scoped_acquire locked;
    try {
      return f();
    } catch (py::error_already_set& error) {
      errors_->raise(std::move(error));
    }
  }

  std::int64_t integer(const char* method) const {
    return call([&]() -> std::int64_t {
      const py::object value = self_.attr(method)();
      try {
        return value.cast<std::int64_t>();
      } catch (const py::cast_error&) {
        throw Error(
            fmt::format("{}.{}()", name_, method),
            fmt::format("returned {}; expected an int", py::repr(value).cast<std::string>()));
      }
    });
  }

  py::handle self_;
  std::string name_;
  ProviderErrors* errors_;
  mutable std::vector<Token> context_;
};

static_assert(HiddenStateProvider<PyProvider>);

/// A provider argument as the loop sees it: a toy provider is used in place (no GIL taken in
/// the loop); any other object is called as a Python provider.
AnyLogitsProvider provider_arg(py::handle obj, const std::string& name, ProviderErrors& errors);

/// A writable float32 matrix of `rows` x `cols` from a NumPy array or a CPU torch tensor; `keep`
/// holds the array while the view is used.
MatrixView<float> writable_rows(py::handle obj, std::string_view name, std::int64_t rows,
                                std::int64_t cols, Array& keep);

/// A prompt (any 1-D integer array or sequence) as tokens.
std::vector<Token> prompt_arg(py::handle prompt);

/// The Python name of a method's enum value ("SD_BLOCK").
std::string python_method_name(Method method);

/// The providers of one run: a draft of None is allowed where the strategy drafts without one
/// (Method.AUTOREGRESSIVE, NGramOptions): the target then stands in for it, never asked for
/// draft rows.
struct Providers {
  AnyLogitsProvider target;
  AnyLogitsProvider draft;
  bool draft_is_target = false;

  Providers(py::handle target_obj, py::handle draft_obj, const StrategyOptions& strategy,
            ProviderErrors& errors)
      : target(provider_arg(target_obj, "target", errors)) {
    if (draft_obj.is_none()) {
      if (uses_draft(strategy)) {
        const auto* options = std::get_if<DecodeOptions>(&strategy);
        throw Error("draft", fmt::format("is None; Method.{} needs a draft provider",
                                         python_method_name(options ? options->method
                                                                    : Method::kSd)));
      }
      draft_is_target = true;
    } else {
      draft = provider_arg(draft_obj, "draft", errors);
    }
  }
  AnyLogitsProvider& draft_provider() { return draft_is_target ? target : draft; }
};

void bind_tree_batch(py::module_& m);      // TreeBatch
void bind_toys(py::module_& m);            // toy models and providers
void bind_decode_options(py::module_& m);  // methods, strategy options, results, metrics

}  // namespace specdec::python
