// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>
#include <cstdint>

#include "specdec/core/workspace.hpp"

using namespace specdec;

TEST_CASE("workspace hands out aligned, disjoint storage", "[core][workspace]") {
  Workspace ws(1024);
  auto scope = ws.scope();
  auto a = ws.take<float>(10);
  auto b = ws.take<std::int32_t>(10);
  CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % Workspace::kAlignment == 0);
  CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % Workspace::kAlignment == 0);
  CHECK(static_cast<void*>(a.data() + a.size()) <= static_cast<void*>(b.data()));
}

TEST_CASE("workspace grows during warm-up, then stops allocating", "[core][workspace]") {
  Workspace ws;
  for (int step = 0; step < 5; ++step) {
    auto scope = ws.scope();
    auto a = ws.take<float>(1000);
    auto b = ws.take<float>(3000);
    a[999] = 1.0f;
    b[2999] = 2.0f;
  }
  const auto after_warm_up = ws.allocations();
  for (int step = 0; step < 5; ++step) {
    auto scope = ws.scope();
    ws.take<float>(1000);
    ws.take<float>(3000);
  }
  CHECK(ws.allocations() == after_warm_up);
  CHECK(ws.capacity() >= 4000 * sizeof(float));
}

TEST_CASE("a workspace sized up front never allocates", "[core][workspace]") {
  Workspace ws(Workspace::round_up(100 * sizeof(double)));
  const auto initial = ws.allocations();
  {
    auto scope = ws.scope();
    ws.take<double>(100);
  }
  CHECK(ws.allocations() == initial);
}
