// SPDX-License-Identifier: MIT
// Toy distributions and models (tests, benchmarks, examples).
#pragma once

#include "specdec/toy/distributions.hpp"
#include "specdec/toy/markov.hpp"
#include "specdec/toy/markov_head.hpp"
#include "specdec/toy/providers.hpp"
#include "specdec/toy/random.hpp"
