// SPDX-License-Identifier: MIT
// Rows where top-k and top-p cut through signed zeros, -inf, denormals and exact ties, with the
// tokens every backend must keep: the same cases for the CPU row warp, the batched backends and
// the CUDA warp kernel.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "specdec/core/numerics.hpp"
#include "specdec/core/warp.hpp"

namespace specdec::test {

struct WarpEdgeCase {
  std::string name;
  std::vector<float> logits;
  Warp warp;
  std::vector<std::int64_t> kept;  // the ids with a positive probability, increasing
};

inline std::vector<WarpEdgeCase> warp_edge_cases() {
  const float denorm = std::numeric_limits<float>::denorm_min();
  std::vector<WarpEdgeCase> cases = {
      // -0 and +0 compare equal: the second zero kept is the lowest id, whatever its sign.
      {"signed zeros, top-k 2", {-0.0f, 5.0f, 0.0f, -0.0f, -1.0f}, {.top_k = 2}, {0, 1}},
      {"signed zeros, top-k 3", {-0.0f, 5.0f, 0.0f, -0.0f, -1.0f}, {.top_k = 3}, {0, 1, 2}},
      {"+0 before -0, top-k 2", {0.0f, -1.0f, -0.0f, 5.0f}, {.top_k = 2}, {0, 3}},
      // -inf entries may fill top-k's quota but are never drawn.
      {"-inf, top-k past the finite entries",
       {kNegInf, 1.0f, kNegInf, 0.5f, kNegInf},
       {.top_k = 4},
       {1, 3}},
      {"-inf, top-k 1", {kNegInf, kNegInf, -3.0f, kNegInf}, {.top_k = 1}, {2}},
      // Denormals order by value, and +-0 below the positive ones tie.
      {"denormals, top-k 2",
       {denorm, -denorm, 0.0f, 2.0f * denorm, -0.0f},
       {.top_k = 2},
       {0, 3}},
      {"denormals, top-k 3",
       {denorm, -denorm, -0.0f, 2.0f * denorm, 0.0f},
       {.top_k = 3},
       {0, 2, 3}},
      // Exact ties: 1/8 each, the nucleus of 0.3 is the three lowest ids.
      {"eight ties, top-p 0.3", std::vector<float>(8, 1.5f), {.top_p = 0.3f}, {0, 1, 2}},
      {"eight ties, top-k 5", std::vector<float>(8, -2.0f), {.top_k = 5}, {0, 1, 2, 3, 4}},
  };
  // Long rows take the radix paths: 128 ties of 1/128 each, half the mass is ids 0..63.
  WarpEdgeCase long_top_p{"128 ties, top-p 0.5", std::vector<float>(128, 0.25f), {.top_p = 0.5f},
                          {}};
  for (std::int64_t i = 0; i < 64; ++i) long_top_p.kept.push_back(i);
  cases.push_back(long_top_p);
  WarpEdgeCase long_zeros{"200 signed zeros, top-k 7", {}, {.top_k = 7}, {0, 1, 2, 3, 4, 5, 6}};
  for (int i = 0; i < 200; ++i) long_zeros.logits.push_back(i % 2 == 0 ? -0.0f : 0.0f);
  cases.push_back(long_zeros);
  return cases;
}

/// The ids of the positive entries of a warped row.
inline std::vector<std::int64_t> kept_ids(const float* warped, std::int64_t n) {
  std::vector<std::int64_t> ids;
  for (std::int64_t i = 0; i < n; ++i) {
    if (warped[i] > 0.0f) ids.push_back(i);
  }
  return ids;
}

/// Warps that cut inside groups of tied logits (rows on a coarse grid): top-k and top-p alone,
/// both at once (top-k `joint_top_k`), and greedy.
inline std::vector<Warp> tie_cutting_warps(std::int32_t joint_top_k) {
  return {{.top_k = 100},
          {.top_k = 3},
          {.top_p = 0.5f},
          {.top_p = 0.97f},
          {.top_k = joint_top_k, .top_p = 0.41f},
          {.temperature = 0.0f}};
}

}  // namespace specdec::test
