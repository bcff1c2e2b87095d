// SPDX-License-Identifier: MIT
// Constrained chain verification with draft probabilities for ragged batches on the CPU:
// sequence b is verify_chain_draft_probs of its rows with its constraints, bit for
// bit, on the constrained chain batches' loop (constrained_batch.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "specdec/backend/cpu/constrained_batch.hpp"
#include "specdec/verify/constrained_draft_probs.hpp"

namespace specdec::constrained {

/// Bytes of Workspace verify_chain_batch_draft_probs takes on `cpu` for `shape`
/// (batch, largest gamma, vocab): the constrained chain batch's and a copy of the draft tokens.
inline std::size_t draft_probs_batch_workspace_size(const backend::Cpu& cpu,
                                                    const ChainBatchShape& shape) {
  const auto tokens = static_cast<std::size_t>(std::max<std::int64_t>(shape.batch, 0) *
                                               std::max<std::int64_t>(shape.max_gamma, 0));
  return chain_batch_workspace_size(cpu, shape) + Workspace::round_up(tokens * sizeof(Token));
}

/// verify_chain_batch_logits with the draft side given as probabilities:
/// `args.draft_logits` holds the G draft probability rows (contiguous, as vLLM's draft_probs),
/// used as given. Sequence b is verify_chain_draft_probs of its rows, tokens,
/// warps[b] (or warps[0]), streams[b] and constraints, bit for bit: a draft token outside
/// [0, V) (vLLM's placeholder -1) or of draft probability 0 is rejected with certainty. Size `ws`
/// with draft_probs_batch_workspace_size. Errors as
/// verify_chain_batch_logits (the draft rows named draft_logits).
inline void verify_chain_batch_draft_probs(const backend::Cpu& cpu,
                                           const ChainBatchLogitsArgs<float>& args,
                                           const ChainBatchConstraints& constraints,
                                           Workspace& ws) {
  const std::int64_t vocab = args.target_logits.cols;
  detail::check_contiguous("draft_logits", args.draft_logits);
  // The loop checks the tokens it reads as prefixes: it gets them with each unverifiable token
  // replaced by 0 (rows after such a token are never read), the walk the tokens as given.
  auto scope = ws.scope();
  auto tokens = ws.take<Token>(args.draft_tokens.size());
  std::transform(args.draft_tokens.begin(), args.draft_tokens.end(), tokens.begin(),
                 [&](Token t) { return t >= 0 && t < vocab ? t : Token{0}; });
  ChainBatchLogitsArgs<float> checked = args;
  checked.draft_tokens = tokens;
  detail::for_each_constrained_sequence(
      cpu, checked, constraints, ws, /*draft_rows=*/true,
      [&](const detail::LogitSequence<float>& s, const detail::LogitRows<float>& target,
          auto&&...) {
        return detail::verify_chain_draft_probs_unchecked(
            s.warp,
            {.target = target,
             .tokens = args.draft_tokens.data() + s.slice.first,
             .length = s.slice.count,
             .vocab = vocab,
             .draft_probs = args.draft_logits.row_data(s.slice.first)},
            s.stream, s.emitted.data(), ArgName("draft_tokens", s.slice.index), s.scratch);
      });
}

}  // namespace specdec::constrained
