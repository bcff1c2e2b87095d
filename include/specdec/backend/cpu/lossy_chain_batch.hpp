// SPDX-License-Identifier: MIT
// The CPU batches of the engines' lossy chain rules (vLLM's "synthetic", whose entry is
// backend/lossy_chain_batch.hpp, and "fly"): sequences in parallel on the thread pool through
// for_each_chain, each the single-chain walk bit for bit.
#pragma once

#include <span>

#include "specdec/backend/cpu/verify_batch.hpp"
#include "specdec/backend/lossy_chain_batch.hpp"
#include "specdec/verify/fly.hpp"
#include "specdec/verify/synthetic.hpp"

namespace specdec {

namespace detail {

template <>
struct ChainBatchSyntheticImpl<backend::Cpu> {
  static void run(const backend::Cpu& cpu, const ChainBatchArgs& args,
                  std::span<const float> rates, Workspace& ws) {
    const std::int64_t vocab = args.target_rows.cols;
    for_each_chain(cpu, args, ws, /*draft_rows=*/false, [&](const RowSequence& s) {
      check_target_only_chain<float>(s.target, s.tokens, vocab, s.emitted.size());
      check_synthetic_rates(rates, s.tokens.size());
      return verify_chain_synthetic_unchecked<float>(
          {.target = s.target.data(),
           .draft_tokens = s.tokens.data(),
           .length = s.tokens.size(),
           .vocab = vocab},
          rates.data(), s.stream, s.emitted.data(), s.scratch,
          TargetRowChecks<float>{s.target, static_cast<std::size_t>(vocab)});
    });
  }
};

}  // namespace detail

/// verify_chain_fly for a ragged batch in ChainBatchArgs' layout, with draft rows (sampled
/// drafts) or without (args.draft_rows empty): sequence b is verify_chain_fly of its rows with
/// `params` and streams[b]. Size the workspace as verify_chain_batch's. Throws specdec::Error
/// naming the bad argument.
inline void verify_chain_batch_fly(const backend::Cpu& cpu, const ChainBatchArgs& args,
                                   FlyParams params, Workspace& ws) {
  detail::check_fly(params);
  const std::int64_t vocab = args.target_rows.cols;
  const bool with_draft = args.draft_rows.data != nullptr;
  detail::for_each_chain(cpu, args, ws, with_draft, [&](const detail::RowSequence& s) {
    if (with_draft) {
      const Rule rule = Rejection{};
      detail::check_chain_shapes<float>(s.target, s.draft, s.tokens, vocab, s.emitted.size(), {},
                                        {});
      // Every row the window may read ahead is checked up front.
      for (std::size_t i = 0; i <= s.tokens.size(); ++i) {
        detail::ChainRowChecks<float>{
            rule, s.target, s.draft, {}, {}, s.tokens, static_cast<std::size_t>(vocab)}(i);
      }
    } else {
      detail::check_target_only_chain<float>(s.target, s.tokens, vocab, s.emitted.size());
    }
    return detail::verify_chain_fly_unchecked<float>(
        {.target = s.target.data(),
         .draft = with_draft ? s.draft.data() : nullptr,
         .draft_tokens = s.tokens.data(),
         .length = s.tokens.size(),
         .vocab = vocab},
        params, s.stream, s.emitted.data(), s.scratch,
        detail::TargetRowChecks<float>{s.target, static_cast<std::size_t>(vocab)});
  });
}

}  // namespace specdec
