// SPDX-License-Identifier: MIT
// The engine loop of examples/kjv_generate allocates nothing per step after warm-up: the
// transformer's scratch, the KV cache and the provider's buffers are sized once (a program of
// its own: it counts every heap allocation of the process).
#include <catch2/catch.hpp>

#include "examples/kjv_pair.hpp"
#include "kjv_provider.hpp"
#include "specdec/decode/decoder.hpp"
#include "specdec/decode/topk_tree_strategy.hpp"
#include "support/allocation_counter.hpp"

TEST_CASE("SD steps on the trained pair allocate nothing after warm-up", "[examples][allocation]") {
  const auto& pair = specdec::test::kjv_pair();
  kjv::ModelProvider target(pair.target), draft(pair.draft);
  specdec::DecodeOptions options;
  options.depth = 4;
  options.max_new_tokens = 90;
  specdec::MethodDecoder<kjv::ModelProvider, kjv::ModelProvider> decoder(target, draft, options);
  decoder.reset(specdec::test::kjv_prompt());
  CHECK(specdec::test::allocations_after_warm_up([&] { decoder.step(); }, 8, 4) == 0);
}

TEST_CASE("EAGLE-2 tree steps on the trained pair allocate nothing after warm-up",
          "[examples][allocation]") {
  const auto& pair = specdec::test::kjv_pair();
  kjv::ModelProvider target(pair.target), draft(pair.draft);
  using Strategy = specdec::TopKTreeStrategy<kjv::ModelProvider>;
  specdec::Decoder<kjv::ModelProvider, Strategy> decoder(
      target,
      Strategy(draft,
               {.shape = specdec::TreeShapePolicy::kEagle2, .width = 3, .depth = 4, .budget = 12}),
      specdec::LoopOptions{.max_new_tokens = 90});
  decoder.reset(specdec::test::kjv_prompt());
  CHECK(specdec::test::allocations_after_warm_up([&] { decoder.step(); }, 8, 4) == 0);
}
