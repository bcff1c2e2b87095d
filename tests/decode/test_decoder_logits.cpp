// SPDX-License-Identifier: MIT
// The Decoder's methods verifying from the target's logits emit, bit for bit, the tokens of the
// same methods verifying on warped target rows.
#include <catch2/catch.hpp>
#include <vector>

#include "specdec/decode/decoder.hpp"
#include "specdec/toy/providers.hpp"

using namespace specdec;

namespace {

// A built-in method that declares no needs_target_rows(): the Decoder warps every target row and
// the method verifies on them (the path before verification from logits).
template <class Draft>
class WarpedRowsStrategy {
 public:
  explicit WarpedRowsStrategy(MethodStrategy<Draft> inner) : inner_(std::move(inner)) {}
  void prepare(std::int64_t vocab, Workspace& ws) { inner_.prepare(vocab, ws); }
  void reset(std::span<const Token> prompt) { inner_.reset(prompt); }
  const DraftTree& draft(const StepContext& context) { return inner_.draft(context); }
  StepVerdict verify(const StepContext& context, const TargetScores& scores) {
    REQUIRE(scores.rows.rows == scores.batch.rows());
    return inner_.verify(context, scores);
  }
  void commit(const TreeBatch& batch, std::span<const std::int32_t> accepted, Token next) {
    inner_.commit(batch, accepted, next);
  }

 private:
  MethodStrategy<Draft> inner_;
};

}  // namespace

TEST_CASE("Decoder methods verifying from logits emit the tokens of the warped-row path",
          "[decode][logits]") {
  const Method methods[] = {Method::kAutoregressive, Method::kSd,    Method::kSdBlock,
                            Method::kSpecInfer,      Method::kSpecTr, Method::kRsdC,
                            Method::kRsdS};
  const Warp warps[] = {Warp{}, Warp{.temperature = 0.8f, .top_p = 0.9f},
                        Warp{.temperature = 1.2f, .top_k = 20}, Warp{.temperature = 0.0f}};
  // 300: rows past the short-row kernels; 8500: residuals and bonus rows drawn a block at a time.
  for (const std::int64_t vocab : {std::int64_t{300}, std::int64_t{8500}}) {
    const toy::NGramModel target_model({.vocab = vocab, .order = 2, .concentration = 0.3, .seed = 5});
    const auto draft_model = toy::NGramModel::draft_of(target_model, 0.3f, 1.2f);
    for (const auto& warp : warps) {
      for (const auto method : methods) {
        if (vocab > 300 && ((method != Method::kSd && method != Method::kSdBlock) ||
                            warp.top_p == 1.0f)) {
          continue;  // long rows for the chains only: the toy model's rows take time to make
        }
        DecodeOptions options;
        options.method = method;
        options.warp = warp;
        options.depth = 3;
        options.width = 2;
        options.branching = {2, 2};
        options.max_new_tokens = vocab > 300 ? 6 : 12;
        options.seed = 17;
        const std::vector<Token> prompt{1, 2};
        INFO(method_name(method) << " vocab " << vocab << " temperature " << warp.temperature
                                 << " top_k " << warp.top_k << " top_p " << warp.top_p);
        toy::NGramProvider target(target_model), draft(draft_model);
        CHECK_FALSE(MethodStrategy<toy::NGramProvider>(draft, options).needs_target_rows());
        const auto from_logits = decode(target, draft, prompt, options, 3);
        toy::NGramProvider row_target(target_model), row_draft(draft_model);
        Decoder<toy::NGramProvider, WarpedRowsStrategy<toy::NGramProvider>> rows(
            row_target,
            WarpedRowsStrategy<toy::NGramProvider>(
                MethodStrategy<toy::NGramProvider>(row_draft, options)),
            options.loop());
        rows.reset(prompt, 3);
        const auto from_rows = rows.run();
        CHECK(from_logits.tokens == from_rows.tokens);
        CHECK(from_logits.metrics.target_calls == from_rows.metrics.target_calls);
      }
    }
  }
}
