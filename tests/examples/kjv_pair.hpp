// SPDX-License-Identifier: MIT
// The trained pair of examples/models, loaded once per test program through examples/kjv_model.hpp,
// and the prompt the tests decode from.
#pragma once

#include <string_view>
#include <vector>

#include "kjv_model.hpp"

namespace specdec::test {

inline const kjv::ModelPair& kjv_pair() {
  static const kjv::ModelPair pair = kjv::read_pair(SPECDEC_MODELS_DIR);
  return pair;
}

inline std::vector<Token> kjv_prompt() {
  constexpr std::string_view text = "And the LORD said unto";
  return {text.begin(), text.end()};
}

}  // namespace specdec::test
