// SPDX-License-Identifier: MIT
// The trained pair of examples/models, loaded once per test program through examples/kjv_model.hpp,
// and the prompt the tests decode from.
#pragma once

#include <string_view>
#include <vector>

#include "kjv_model.hpp"

namespace specdec::test {

struct KjvPair {
  kjv::Transformer target, draft;
};

inline const KjvPair& kjv_pair() {
  static const KjvPair pair = [] {
    const auto target = kjv::read_pair_entry(SPECDEC_MODELS_DIR, "target");
    const auto draft = kjv::read_pair_entry(SPECDEC_MODELS_DIR, "draft");
    return KjvPair{kjv::Transformer(target.config, target.weights),
                   kjv::Transformer(draft.config, draft.weights)};
  }();
  return pair;
}

inline std::vector<Token> kjv_prompt() {
  constexpr std::string_view text = "And the LORD said unto";
  return {text.begin(), text.end()};
}

}  // namespace specdec::test
