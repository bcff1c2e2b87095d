// SPDX-License-Identifier: MIT
// The ReDrafter recurrent draft head (seed 001; the reference implementation's conventions, so
// released checkpoints work): forward pass on Eigen, the reference deterministic beam search, and
// stochastic beam search through the head for exact verification.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <vector>

#include "specdec/core/error.hpp"
#include "specdec/core/numerics.hpp"
#include "specdec/core/philox.hpp"
#include "specdec/core/validate.hpp"
#include "specdec/core/workspace.hpp"
#include "specdec/draft/drafted_tree.hpp"
#include "specdec/draft/stochastic_beam.hpp"

namespace specdec {

/// Shape of a ReDrafter head.
struct ReDrafterConfig {
  std::int64_t hidden = 0;      // H: the target's hidden size (= its embedding size)
  std::int64_t exit_dim = 0;    // D: width of the residual blocks; D != 2H adds an input projection
  std::int64_t vocab = 0;       // V
  std::int32_t num_layers = 1;  // residual blocks
  bool rnn = true;              // false: the state is a running sum of embeddings
  std::int32_t top_k = 50;      // logits below the k-th largest get kLogZero (0 = keep all)

  /// The reference's stand-in for log 0 (finite, so bf16 arithmetic stays finite).
  static constexpr float kLogZero = -50000.0f;

  bool has_input_projection() const { return exit_dim != 2 * hidden; }
};

/// Weights of a ReDrafter head, in the reference's layout (PyTorch Linear: weight [out, in]).
///   state   s_t = SiLU(rnn_w e(tok) + rnn_u s_(t-1) + rnn_u_bias)   (rnn)
///           s_t = s_(t-1) + e(tok)                                   (no rnn)
///   x       = [h, s_t] (2H), then input_proj x + input_proj_bias when D != 2H
///   blocks  x = x + SiLU(block_weights[i] x + block_biases[i])
///   logits  = vocab_proj x; subtract the max; keep the top_k (others kLogZero); log-softmax.
/// `embedding` is the target model's input embedding table (V x H, row t = e(t)).
struct ReDrafterHead {
  ReDrafterConfig config;
  Eigen::MatrixXf embedding;                   // V x H
  Eigen::MatrixXf rnn_w;                       // H x H (rnn only)
  Eigen::MatrixXf rnn_u;                       // H x H (rnn only)
  Eigen::VectorXf rnn_u_bias;                  // H (rnn only)
  Eigen::MatrixXf input_proj;                  // D x 2H (only when D != 2H)
  Eigen::VectorXf input_proj_bias;             // D
  std::vector<Eigen::MatrixXf> block_weights;  // num_layers x (D x D)
  std::vector<Eigen::VectorXf> block_biases;   // num_layers x D
  Eigen::MatrixXf vocab_proj;                  // V x D (no bias)

  /// Throws specdec::Error naming the first tensor whose shape disagrees with `config`.
  void validate() const {
    const auto& c = config;
    if (c.hidden < 1) detail::fail("config.hidden", "{} must be >= 1", c.hidden);
    if (c.exit_dim < 1) detail::fail("config.exit_dim", "{} must be >= 1", c.exit_dim);
    if (c.vocab < 1) detail::fail("config.vocab", "{} must be >= 1", c.vocab);
    if (c.num_layers < 0) detail::fail("config.num_layers", "{} must be >= 0", c.num_layers);
    if (c.top_k < 0) detail::fail("config.top_k", "{} must be >= 0", c.top_k);
    const auto shape = [](std::string_view name, const Eigen::MatrixXf& m, std::int64_t rows,
                          std::int64_t cols) {
      if (m.rows() != rows || m.cols() != cols) {
        detail::fail(name, "has shape [{}, {}], expected [{}, {}]", m.rows(), m.cols(), rows, cols);
      }
    };
    const auto length = [](std::string_view name, const Eigen::VectorXf& v, std::int64_t n) {
      if (v.size() != n) detail::fail(name, "has {} elements, expected {}", v.size(), n);
    };
    shape("embedding", embedding, c.vocab, c.hidden);
    if (c.rnn) {
      shape("rnn_w", rnn_w, c.hidden, c.hidden);
      shape("rnn_u", rnn_u, c.hidden, c.hidden);
      length("rnn_u_bias", rnn_u_bias, c.hidden);
    }
    if (c.has_input_projection()) {
      shape("input_proj", input_proj, c.exit_dim, 2 * c.hidden);
      length("input_proj_bias", input_proj_bias, c.exit_dim);
    }
    detail::check_size("block_weights", block_weights.size(),
                       static_cast<std::size_t>(c.num_layers));
    detail::check_size("block_biases", block_biases.size(), static_cast<std::size_t>(c.num_layers));
    for (std::size_t i = 0; i < block_weights.size(); ++i) {
      shape(fmt::format("block_weights[{}]", i), block_weights[i], c.exit_dim, c.exit_dim);
      length(fmt::format("block_biases[{}]", i), block_biases[i], c.exit_dim);
    }
    shape("vocab_proj", vocab_proj, c.vocab, c.exit_dim);
  }

  /// A head with weights ~ normal(0, scale^2) (Box-Muller on a Philox stream keyed by `seed`,
  /// Domain::kUser), for tests and benchmarks. Throws specdec::Error for a bad config.
  static ReDrafterHead random(const ReDrafterConfig& c, std::uint64_t seed, float scale = 0.5f) {
    const RandomStream stream{.seed = seed, .domain = Domain::kUser};
    std::uint32_t node = 0;
    const auto fill = [&](std::int64_t rows, std::int64_t cols) {
      const auto s = stream.at_node(node++);
      Eigen::MatrixXf m(std::max<std::int64_t>(rows, 0), std::max<std::int64_t>(cols, 0));
      for (Eigen::Index i = 0; i < m.size(); ++i) {
        const double u1 = s.uniform(static_cast<std::uint32_t>(2 * i));
        const double u2 = s.uniform(static_cast<std::uint32_t>(2 * i + 1));
        m.data()[i] = static_cast<float>(scale * std::sqrt(-2.0 * std::log(u1)) *
                                         std::cos(6.283185307179586 * u2));
      }
      return m;
    };
    ReDrafterHead h;
    h.config = c;
    h.embedding = fill(c.vocab, c.hidden);
    if (c.rnn) {
      h.rnn_w = fill(c.hidden, c.hidden);
      h.rnn_u = fill(c.hidden, c.hidden);
      h.rnn_u_bias = fill(c.hidden, 1);
    }
    if (c.has_input_projection()) {
      h.input_proj = fill(c.exit_dim, 2 * c.hidden);
      h.input_proj_bias = fill(c.exit_dim, 1);
    }
    for (std::int32_t i = 0; i < c.num_layers; ++i) {
      h.block_weights.push_back(fill(c.exit_dim, c.exit_dim));
      h.block_biases.push_back(fill(c.exit_dim, 1));
    }
    h.vocab_proj = fill(c.vocab, c.exit_dim);
    h.validate();
    return h;
  }
};

namespace detail {

template <class Expr>
auto silu(const Expr& x) {
  return (x.array() / (1.0f + (-x.array()).exp())).matrix();
}

}  // namespace detail

/// The buffers a ReDrafter step reuses (the head's activations, the beam search's candidates):
/// keep one per drafting loop, and after the first step nothing is allocated but what Eigen's
/// products of a large head take for their blocking (Eigen has no way to hand it buffers).
struct ReDrafterScratch {
  Eigen::VectorXf hidden;                       // the context hidden state
  Eigen::MatrixXf embedded, pre, input, projected;  // H x n / D x n activations
  std::vector<float> top_k;                     // V: the head's top-k threshold search
  struct Beams {  // redrafter_beam_search's buffers, in the order it binds them
    Eigen::MatrixXf states, new_states;
    std::vector<float> rows, scores, new_history, new_scores;
    std::vector<std::int64_t> order;
    std::vector<Token> last, new_tokens;
  } beams;
};

namespace detail {

/// Next states of `n` beams (columns of `states`, H x n) after tokens[j].
inline void redrafter_update_states(const ReDrafterHead& head, const Token* tokens, std::int64_t n,
                                    Eigen::Ref<Eigen::MatrixXf> states, ReDrafterScratch& scratch) {
  const auto h = head.config.hidden;
  Eigen::MatrixXf& emb = scratch.embedded;
  emb.resize(h, n);
  for (std::int64_t j = 0; j < n; ++j) emb.col(j) = head.embedding.row(tokens[j]).transpose();
  if (head.config.rnn) {
    Eigen::MatrixXf& pre = scratch.pre;
    pre.resize(h, n);
    pre.noalias() = head.rnn_w * emb;
    pre.noalias() += head.rnn_u * states;
    pre.colwise() += head.rnn_u_bias;
    states = silu(pre);
  } else {
    states += emb;
  }
}

/// Draft log-probability rows for `n` states (columns of `states`) given the context hidden
/// state scratch.hidden: out is n x V, row-major (row j for state j).
inline void redrafter_log_probs(const ReDrafterHead& head, const Eigen::MatrixXf& states,
                                float* out, ReDrafterScratch& scratch) {
  const auto& c = head.config;
  const auto n = states.cols();
  Eigen::MatrixXf* x = &scratch.input;
  x->resize(2 * c.hidden, n);
  x->topRows(c.hidden).colwise() = scratch.hidden;
  x->bottomRows(c.hidden) = states;
  if (c.has_input_projection()) {
    scratch.projected.resize(c.exit_dim, n);
    scratch.projected.noalias() = head.input_proj * *x;
    scratch.projected.colwise() += head.input_proj_bias;
    x = &scratch.projected;
  }
  for (std::size_t i = 0; i < head.block_weights.size(); ++i) {
    scratch.pre.resize(c.exit_dim, n);
    scratch.pre.noalias() = head.block_weights[i] * *x;
    scratch.pre.colwise() += head.block_biases[i];
    *x += silu(scratch.pre);
  }
  Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> logits(out, n,
                                                                                           c.vocab);
  logits.transpose().noalias() = head.vocab_proj * *x;
  scratch.top_k.resize(static_cast<std::size_t>(c.vocab));
  for (Eigen::Index j = 0; j < n; ++j) {
    auto row = logits.row(j).array();
    row -= row.maxCoeff();
    if (c.top_k > 0 && c.top_k < c.vocab) {
      // Values below the k-th largest become kLogZero; ties with it are kept (the reference).
      Eigen::Map<Eigen::ArrayXf> copy(scratch.top_k.data(), c.vocab);
      copy = row.transpose();
      std::nth_element(scratch.top_k.begin(), scratch.top_k.begin() + (c.top_k - 1),
                       scratch.top_k.end(), std::greater<float>());
      const float kth = scratch.top_k[static_cast<std::size_t>(c.top_k - 1)];
      row = (row < kth).select(ReDrafterConfig::kLogZero, row);
    }
    row -= std::log((row - row.maxCoeff()).exp().sum()) + row.maxCoeff();
  }
}

/// scratch.hidden = hidden.
inline void set_context_hidden(std::span<const float> hidden, ReDrafterScratch& scratch) {
  scratch.hidden.resize(static_cast<Eigen::Index>(hidden.size()));
  std::copy(hidden.begin(), hidden.end(), scratch.hidden.data());
}

inline void check_hidden(const ReDrafterHead& head, std::span<const float> hidden) {
  detail::check_size("hidden", hidden.size(), static_cast<std::size_t>(head.config.hidden));
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    if (!std::isfinite(hidden[i]))
      detail::fail(fmt::format("hidden[{}]", i), "{} is not finite", hidden[i]);
  }
}

}  // namespace detail

/// One step of the head for a single state: `state` (H) is advanced by `token` in place, then
/// `log_probs` (V) receives the draft log-probabilities of the next token given the context
/// hidden state `hidden` (H). The row is the head's own output (top-k then log-softmax, no
/// temperature). Throws specdec::Error on size mismatches or an out-of-range token.
inline void redrafter_step(const ReDrafterHead& head, std::span<const float> hidden,
                           std::span<float> state, Token token, std::span<float> log_probs) {
  detail::check_hidden(head, hidden);
  detail::check_size("state", state.size(), static_cast<std::size_t>(head.config.hidden));
  detail::check_token("token", token, head.config.vocab);
  detail::check_size("log_probs", log_probs.size(), static_cast<std::size_t>(head.config.vocab));
  Eigen::Map<Eigen::MatrixXf> s(state.data(), head.config.hidden, 1);
  ReDrafterScratch scratch;
  detail::redrafter_update_states(head, &token, 1, s, scratch);
  detail::set_context_hidden(hidden, scratch);
  detail::redrafter_log_probs(head, s, log_probs.data(), scratch);
}

/// The reference ReDrafter beam search result.
struct ReDrafterBeams {
  std::int32_t width = 0;
  std::int32_t length = 0;            // L, including the init token
  std::vector<Token> tokens;          // W x L row-major; column 0 = the init token
  std::vector<float> log_probs;       // W x (L-1) x V: row (k, j) is the draft log-probability
                                      // row that produced tokens[k][j + 1]
  std::vector<float> beam_log_probs;  // W: the beams' joint log-probabilities, decreasing

  Token token(std::int32_t beam, std::int32_t position) const {
    return tokens[static_cast<std::size_t>(beam) * static_cast<std::size_t>(length) +
                  static_cast<std::size_t>(position)];
  }
  std::span<const float> row(std::int32_t beam, std::int32_t step, std::int64_t vocab) const {
    const auto r = static_cast<std::size_t>(beam) * static_cast<std::size_t>(length - 1) +
                   static_cast<std::size_t>(step);
    return {log_probs.data() + r * static_cast<std::size_t>(vocab),
            static_cast<std::size_t>(vocab)};
  }
};

/// Deterministic beam search through the head, as the reference does it: `width` beams, all
/// starting with `init_token` (the target's own next token), `length - 1` draft steps. At the
/// first step only beam 0 is alive (the others start at kLogZero), so beams differ. Each step
/// advances every beam's state by its last token, scores all W x V extensions by joint
/// log-probability, keeps the top W (sorted decreasing, ties to the lower flat index
/// beam * V + token) and reorders the beams, states and row history by parent. Deterministic:
/// draws nothing. Buffers come from `scratch` (reused across calls, nothing allocated once they
/// have grown). Throws specdec::Error for width < 1, length < 2, a bad hidden state or token.
inline void redrafter_beam_search(const ReDrafterHead& head, std::span<const float> hidden,
                                  Token init_token, std::int32_t width, std::int32_t length,
                                  ReDrafterBeams& out, ReDrafterScratch& scratch) {
  detail::check_hidden(head, hidden);
  detail::check_token("init_token", init_token, head.config.vocab);
  if (width < 1) detail::fail("width", "{} must be >= 1", width);
  if (length < 2) detail::fail("length", "{} must be >= 2 (the init token plus drafts)", length);
  const auto v = head.config.vocab;
  const auto w = static_cast<std::size_t>(width), l = static_cast<std::size_t>(length);
  const auto vs = static_cast<std::size_t>(v);
  out.width = width;
  out.length = length;
  out.tokens.assign(w * l, init_token);
  out.log_probs.assign(w * (l - 1) * vs, 0.0f);
  out.beam_log_probs.assign(w, ReDrafterConfig::kLogZero);
  out.beam_log_probs[0] = 0.0f;
  detail::set_context_hidden(hidden, scratch);
  auto& [states, new_states, rows, scores, new_history, new_scores, order, last, new_tokens] =
      scratch.beams;
  states.setZero(head.config.hidden, width);
  new_states.resize(head.config.hidden, width);
  rows.resize(w * vs);
  scores.resize(w * vs);
  order.resize(w * vs);
  last.assign(w, init_token);
  new_tokens.resize(w * l);
  new_history.resize(out.log_probs.size());
  new_scores.resize(w);
  for (std::size_t step = 0; step + 1 < l; ++step) {
    detail::redrafter_update_states(head, last.data(), width, states, scratch);
    detail::redrafter_log_probs(head, states, rows.data(), scratch);
    for (std::size_t k = 0; k < w; ++k)
      for (std::size_t x = 0; x < vs; ++x)
        scores[k * vs + x] = rows[k * vs + x] + out.beam_log_probs[k];
    std::iota(order.begin(), order.end(), std::int64_t{0});
    const auto better = [&ranked = scores](std::int64_t a, std::int64_t b) {  // not a binding:
      // clang before 16 does not capture structured bindings
      const auto sa = ranked[static_cast<std::size_t>(a)], sb = ranked[static_cast<std::size_t>(b)];
      return sa > sb || (sa == sb && a < b);
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(w), order.end(),
                      better);
    for (std::size_t k = 0; k < w; ++k) {
      const auto flat = static_cast<std::size_t>(order[k]);
      const auto parent = flat / vs, token = flat % vs;
      std::copy_n(out.tokens.begin() + static_cast<std::ptrdiff_t>(parent * l), l,
                  new_tokens.begin() + static_cast<std::ptrdiff_t>(k * l));
      new_tokens[k * l + step + 1] = static_cast<Token>(token);
      const auto hist = (l - 1) * vs;
      std::copy_n(out.log_probs.begin() + static_cast<std::ptrdiff_t>(parent * hist), hist,
                  new_history.begin() + static_cast<std::ptrdiff_t>(k * hist));
      std::copy_n(rows.begin() + static_cast<std::ptrdiff_t>(parent * vs), vs,
                  new_history.begin() + static_cast<std::ptrdiff_t>(k * hist + step * vs));
      new_states.col(static_cast<Eigen::Index>(k)) = states.col(static_cast<Eigen::Index>(parent));
      new_scores[k] = scores[flat];
      last[k] = static_cast<Token>(token);
    }
    out.tokens.swap(new_tokens);
    out.log_probs.swap(new_history);
    out.beam_log_probs.swap(new_scores);
    states.swap(new_states);
  }
}

/// redrafter_beam_search with buffers of its own (allocated per call).
inline void redrafter_beam_search(const ReDrafterHead& head, std::span<const float> hidden,
                                  Token init_token, std::int32_t width, std::int32_t length,
                                  ReDrafterBeams& out) {
  ReDrafterScratch scratch;
  redrafter_beam_search(head, hidden, init_token, width, length, out, scratch);
}

/// A draft-row callback that evaluates the head on a draft tree whose root is `init_token`
/// (rows are probabilities: exp of the head's log-probabilities, exactly 0 outside its top-k).
/// Keeps one state per node (column n + 1 for node n). Reusable: reset() starts another tree,
/// and once its buffers have grown a tree allocates nothing (but Eigen's blocking, see
/// ReDrafterScratch).
class ReDrafterTreeRows {
 public:
  explicit ReDrafterTreeRows(const ReDrafterHead& head) : head_(&head) {}
  ReDrafterTreeRows(const ReDrafterHead& head, std::span<const float> hidden, Token init_token)
      : head_(&head) {
    reset(hidden, init_token);
  }

  /// The next tree: its context hidden state and root token.
  void reset(std::span<const float> hidden, Token init_token) {
    detail::check_hidden(*head_, hidden);
    detail::check_token("init_token", init_token, head_->config.vocab);
    detail::set_context_hidden(hidden, scratch_);
    init_token_ = init_token;
  }

  /// The head's vocabulary.
  std::int64_t vocab() const { return head_->config.vocab; }

  void operator()(const DraftTree& tree, std::span<const std::int32_t> nodes,
                  MatrixView<float> rows) {
    const auto hdim = head_->config.hidden;
    const auto n = static_cast<Eigen::Index>(nodes.size());
    if (states_.cols() < tree.size() + 1) states_.conservativeResize(hdim, tree.size() + 1);
    level_.resize(hdim, n);
    tokens_.resize(nodes.size());
    for (Eigen::Index j = 0; j < n; ++j) {
      const auto node = nodes[static_cast<std::size_t>(j)];
      if (node < 0) {
        level_.col(j).setZero();
        tokens_[static_cast<std::size_t>(j)] = init_token_;
      } else {
        const auto parent = tree.parents[static_cast<std::size_t>(node)];
        level_.col(j) = states_.col(parent + 1);
        tokens_[static_cast<std::size_t>(j)] = tree.tokens[static_cast<std::size_t>(node)];
      }
    }
    detail::redrafter_update_states(*head_, tokens_.data(), n, level_, scratch_);
    for (Eigen::Index j = 0; j < n; ++j)
      states_.col(nodes[static_cast<std::size_t>(j)] + 1) = level_.col(j);
    detail::redrafter_log_probs(*head_, level_, rows.data, scratch_);
    for (Eigen::Index j = 0; j < n; ++j) {
      float* row = rows.row_data(j);
      for (std::int64_t x = 0; x < rows.cols; ++x) {
        // exp of a kLogZero entry underflows; make it exactly 0 (Eigen's exp would clamp).
        row[x] = row[x] < -80.0f ? 0.0f : std::exp(row[x]);
      }
    }
  }

 private:
  const ReDrafterHead* head_;
  Token init_token_ = 0;
  Eigen::MatrixXf states_;  // column n + 1: the state after node n's token (column 0: root)
  Eigen::MatrixXf level_;   // the states of the nodes being evaluated
  std::vector<Token> tokens_;
  ReDrafterScratch scratch_;
};

/// Exact ReDrafter drafting: stochastic beam search (RSD-S, see draft_rsd_s) through the head,
/// width `width`, `depth` draft levels below the root `init_token`. The result is verified with
/// recursive rejection sampling (lossless), unlike the reference's per-beam rule. `rows` (reset
/// here) keeps the head's buffers across calls.
/// Draws: as draft_rsd_s. Throws specdec::Error as draft_rsd_s and for a bad hidden state.
inline void redrafter_stochastic_beam_search(ReDrafterTreeRows& rows, std::span<const float> hidden,
                                             Token init_token, std::int32_t width,
                                             std::int32_t depth, const RandomStream& stream,
                                             DraftedTree& out, Workspace& workspace) {
  rows.reset(hidden, init_token);
  draft_rsd_s(width, depth, rows.vocab(), rows, stream, out, workspace);
}

/// redrafter_stochastic_beam_search with buffers of its own (allocated per call).
inline void redrafter_stochastic_beam_search(const ReDrafterHead& head,
                                             std::span<const float> hidden, Token init_token,
                                             std::int32_t width, std::int32_t depth,
                                             const RandomStream& stream, DraftedTree& out,
                                             Workspace& workspace) {
  ReDrafterTreeRows rows(head);
  redrafter_stochastic_beam_search(rows, hidden, init_token, width, depth, stream, out, workspace);
}

}  // namespace specdec
