// SPDX-License-Identifier: MIT
// Decoding under examples/kjv_constrained's grammar allocates nothing per step after warm-up:
// the masks, node states and draft rows are sized once, the verifiers take the workspace (a
// program of its own with test_kjv_allocation.cpp: it counts every heap allocation). The loop is
// the Decoder's, written out, so that only the strategy and the providers are counted (the
// Decoder's output and metrics vectors grow the first time a step emits more tokens or drafts a
// deeper tree than before, which the unmasked draft may do late), and a whole sequence warms it
// up (the tree strategy's acceptance counts grow with the deepest path accepted so far).
#include <catch2/catch.hpp>
#include <string_view>
#include <vector>

#include "examples/kjv_pair.hpp"
#include "kjv_constrained.hpp"
#include "kjv_provider.hpp"
#include "specdec/decode/decoder.hpp"
#include "support/allocation_counter.hpp"

namespace {

long constrained_step_allocations(kjv::ConstrainedOptions options, bool masked) {
  const auto& pair = specdec::test::kjv_pair();
  kjv::ModelProvider target(pair.target), draft(pair.draft);
  kjv::GrammarDraft<kjv::ModelProvider> grammar(draft, masked);
  kjv::ConstrainedStrategy<kjv::ModelProvider> strategy(grammar, options);
  const auto vocab = target.vocab_size();
  specdec::Workspace workspace;
  strategy.prepare(vocab, workspace);
  constexpr std::string_view text = "Genesis 1:3 And God said, Let there be light\n";
  const std::vector<specdec::Token> prompt(text.begin(), text.end());
  specdec::SequenceState state;
  specdec::TreeBatch batch;
  std::vector<float> logits;
  logits.reserve(64 * static_cast<std::size_t>(vocab));
  std::vector<specdec::Token> emitted;
  emitted.reserve(64);
  const auto step = [&] {
    const specdec::StepContext context{state, vocab, workspace};
    const auto& tree = strategy.draft(context);
    batch.assign(tree, state.length());
    logits.resize(static_cast<std::size_t>(batch.rows() * vocab));
    target.evaluate(batch, specdec::MatrixView<float>(logits.data(), batch.rows(), vocab));
    const auto verdict = strategy.verify(
        context, {.batch = batch,
                  .logits = specdec::MatrixView<const float>(logits.data(), batch.rows(), vocab),
                  .rows = {},
                  .hidden = {},
                  .warp = options.warp});
    target.commit(batch, verdict.accepted, verdict.next);
    strategy.commit(batch, verdict.accepted, verdict.next);
    emitted.clear();
    for (const auto node : verdict.accepted) {
      emitted.push_back(tree.tokens[static_cast<std::size_t>(node)]);
    }
    emitted.push_back(verdict.next);
    state.append(emitted);
  };
  const auto start = [&](std::uint32_t sequence) {
    state = specdec::SequenceState(prompt, vocab, 5, sequence);
    state.tokens.reserve(128);
    target.reset(prompt);
    strategy.reset(prompt);
  };
  start(0);
  while (state.generated_count() < 60) step();
  start(1);
  return specdec::test::allocations_after_warm_up(step, 10, 0);
}

}  // namespace

TEST_CASE("SD steps under the verse grammar allocate nothing after warm-up",
          "[examples][allocation][constrained]") {
  const kjv::ConstrainedOptions options{.drafting = kjv::Drafting::kChain, .length = 4};
  CHECK(constrained_step_allocations(options, true) == 0);
  CHECK(constrained_step_allocations(options, false) == 0);
}

TEST_CASE("EAGLE-2 tree steps under the verse grammar allocate nothing after warm-up",
          "[examples][allocation][constrained]") {
  const kjv::ConstrainedOptions options{
      .drafting = kjv::Drafting::kTree,
      .tree = {.shape = specdec::TreeShapePolicy::kEagle2, .width = 3, .depth = 4, .budget = 12}};
  CHECK(constrained_step_allocations(options, true) == 0);
  CHECK(constrained_step_allocations(options, false) == 0);
}
