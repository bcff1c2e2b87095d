// SPDX-License-Identifier: MIT
// Block verification straight from logits: the same tokens as warping every row and calling
// verify_block, with the weights w_i read from p and q at the drafted tokens only (the rows'
// statistics, core/warp/logit_stats.hpp). The stopping tests run from the last position down, so a block
// accepted whole writes no row (h_L = w_L needs none) and only the bonus row is drawn from; a
// shorter block writes the row pairs of the positions tested and the residual's. Past a drafted
// token of target probability 0 every weight and stopping probability is 0 (the uniforms are
// positive): the target rows after it are never read, as a chain's after its first rejection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "specdec/verify/block.hpp"
#include "specdec/verify/chain_logits.hpp"

namespace specdec::detail {

/// verify_block of `chain` (as ChainLogitRows documents) on warp `w`, from logits; same draws and
/// tokens. `weights` holds length + 1 doubles. A drafted token of draft probability 0 is
/// reported as `token_name[i]`, a bad row by its name and index. Returns tau; writes tau + 1
/// tokens to `out`.
template <class T, UniformSource U>
std::int32_t block_verify_logits_unchecked(const Warp& w, const ChainLogitRows<T>& chain,
                                           const U& uniforms, double* weights,
                                           const ArgName& token_name,
                                           const ChainLogitsScratch& scratch, Token* out) {
  const LogitRows<T>& target = chain.target;
  const LogitRows<T>& draft = chain.draft;
  const float* draft_probs = chain.draft_probs;
  const Token* tokens = chain.tokens;
  const auto length = static_cast<std::int32_t>(chain.length);
  const std::int64_t vocab = chain.vocab;
  // Writes the warped target and draft rows of position i into the scratch; returns the draft's.
  const auto write_rows = [&](std::int64_t i) {
    write_warp_of_row(w, target, i, vocab, scratch.warp, scratch.target_row);
    if (draft_probs != nullptr) return draft_probs + i * vocab;
    write_warp_of_row(w, draft, i, vocab, scratch.warp, scratch.draft_row);
    return static_cast<const float*>(scratch.draft_row);
  };
  weights[0] = 1.0;
  for (std::int32_t i = 1; i <= length; ++i) {
    const Token x = tokens[i - 1];
    // After a zero weight every weight is 0: the target rows past it are not read.
    const bool reached = weights[i - 1] > 0.0;
    const WarpStats t =
        reached ? checked_warp_stats(w, target, i - 1, vocab, scratch.warp) : WarpStats{};
    float qx;
    if (draft_probs != nullptr) {
      qx = draft_probs[(i - 1) * vocab + x];
    } else {
      const WarpStats d = checked_warp_stats(w, draft, i - 1, vocab, scratch.warp);
      qx = warped_probability(d, to_float(draft.row(i - 1)[x]), x);
    }
    if (!(qx > 0.0f)) fail(token_name[i - 1], "token {} has draft probability 0", x);
    // block_verify_row's weight, on the same floats.
    const double p = reached ? warped_probability(t, to_float(target.row(i - 1)[x]), x) : 0.0;
    const double q = qx;
    const double wp = weights[i - 1] * p;
    weights[i] = q > 0.0 && wp < q ? wp / q : 1.0;
    if (weights[i - 1] == 0.0) weights[i] = 0.0;
  }
  // tau is the largest i with u_i <= h_i: test from the top, stop at the first that passes.
  std::int32_t tau = 0;
  std::int64_t written = -1;  // the position whose rows the scratch holds
  const float* q_row = nullptr;
  for (std::int32_t i = length; i >= 1; --i) {
    // A zero weight stops with probability h_i = 0, and u_i > 0: its rows are not read.
    if (!(weights[i] > 0.0)) continue;
    double h = weights[length];
    if (i < length) {
      q_row = write_rows(i);
      written = i;
      h = block_stop_probability(scratch.target_row, q_row, weights[i], vocab);
    }
    if (uniforms.uniform(static_cast<std::uint32_t>(i - 1)) <= h) {
      tau = i;
      break;
    }
  }
  for (std::int32_t i = 0; i < tau; ++i) out[i] = tokens[i];
  const float u = uniforms.uniform(static_cast<std::uint32_t>(length));
  if (tau == length || !(weights[tau] > 0.0)) {
    out[tau] = sample_warped_logits(w, target, tau, vocab, u, scratch);
    return tau;
  }
  if (written != tau) q_row = write_rows(tau);
  const double mass = residual_update(scratch.target_row, q_row,
                                      1.0f / static_cast<float>(weights[tau]), vocab,
                                      scratch.residual, kResidualFloor);
  out[tau] = mass < 0.0 ? sample_row(scratch.target_row, vocab, u)
                        : sample_row(scratch.residual, vocab, u);
  return tau;
}

}  // namespace specdec::detail

namespace specdec {

/// Bytes of Workspace verify_block_logits takes for `length` draft tokens over rows of `vocab`.
inline std::size_t verify_block_logits_workspace_size(std::size_t length, std::int64_t vocab) {
  return verify_chain_logits_workspace_size(vocab) +
         Workspace::round_up((length + 1) * sizeof(double));
}

/// verify_block on the rows `warp` makes of logits, without writing them all: the same tokens
/// and draws as warping every row (warp_logits) and calling verify_block. Layout as
/// verify_chain_logits's (`target_logits` L + 1 rows, `draft_logits` L rows of `vocab`). The
/// weights read p and q at the drafted tokens only; the stopping tests run from position L down
/// and end at the first that passes, so a block accepted whole writes no row, and a shorter one
/// writes the rows of the positions above it and its residual's (two rows of scratch, reused).
/// Target rows after a drafted token of target probability 0 are never read (no block passes it).
/// Throws specdec::Error naming the bad argument (vocab, a field of the warp, target_logits,
/// draft_logits, draft_tokens[i], out); rows are checked as they are read.
template <class T = float, UniformSource U>
ChainVerdict verify_block_logits(const Warp& warp,
                                 std::type_identity_t<std::span<const T>> target_logits,
                                 std::type_identity_t<std::span<const T>> draft_logits,
                                 std::span<const Token> draft_tokens, std::int64_t vocab,
                                 const U& uniforms, std::span<Token> out, Workspace& ws) {
  detail::check_chain_logits_shapes<T>(warp, target_logits, draft_logits, draft_tokens, vocab,
                                       out.size());
  const auto length = draft_tokens.size();
  detail::check_count("draft_tokens", length, 0, std::size_t{1} << 20);
  auto scope = ws.scope();
  auto bytes = ws.take<std::byte>(detail::chain_logits_scratch_size(vocab));
  auto weights = ws.take<double>(length + 1);
  const auto tau = detail::block_verify_logits_unchecked<T>(
      warp, detail::chain_logit_rows<T>(target_logits, draft_logits, draft_tokens, vocab),
      uniforms, weights.data(), "draft_tokens", detail::chain_logits_scratch(bytes.data(), vocab),
      out.data());
  return {tau, tau + 1};
}

}  // namespace specdec
