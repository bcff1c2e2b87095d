// SPDX-License-Identifier: MIT
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "specdec/backend/cpu/thread_pool.hpp"

using specdec::backend::ThreadPool;

TEST_CASE("the thread pool runs every task exactly once", "[backend][thread_pool]") {
  ThreadPool pool;
  for (int threads : {1, 2, 3, 7}) {
    std::vector<std::atomic<int>> hits(1000);
    pool.run(1000, threads, [&](std::int64_t i, int) { hits[i].fetch_add(1); });
    int wrong = 0;
    for (auto& h : hits) wrong += h.load() != 1 ? 1 : 0;
    CHECK(wrong == 0);
  }
}

TEST_CASE("the thread pool gives each running thread its own slot", "[backend][thread_pool]") {
  ThreadPool pool;
  const int threads = pool.resolve(64, 4);
  CHECK(threads == 4);
  std::vector<std::atomic<int>> busy(threads);
  std::atomic<int> clashes{0};
  pool.run(64, 4, [&](std::int64_t, int slot) {
    if (busy[slot].fetch_add(1) != 0) clashes.fetch_add(1);
    busy[slot].fetch_sub(1);
  });
  CHECK(clashes.load() == 0);
}

TEST_CASE("the thread pool rethrows a task's exception and stays usable",
          "[backend][thread_pool]") {
  ThreadPool pool;
  CHECK_THROWS_WITH(pool.run(100, 2,
                             [](std::int64_t i, int) {
                               if (i == 42) throw std::runtime_error("task 42 failed");
                             }),
                    "task 42 failed");
  std::atomic<int> count{0};
  pool.run(10, 2, [&](std::int64_t, int) { count.fetch_add(1); });
  CHECK(count.load() == 10);
}

TEST_CASE("when several tasks throw, the lowest-numbered one's exception is rethrown",
          "[backend][thread_pool]") {
  // Task 1 waits (up to 200 ms) for a later task to throw first: the error must not depend on
  // which thread failed first.
  ThreadPool pool;
  for (int threads : {1, 2, 4}) {
    std::atomic<bool> later_threw{false};
    CHECK_THROWS_WITH(
        pool.run(8, threads,
                 [&](std::int64_t i, int) {
                   if (i == 1) {
                     for (int t = 0; t < 200 && !later_threw.load(); ++t)
                       std::this_thread::sleep_for(std::chrono::milliseconds(1));
                     throw std::runtime_error("task 1 failed");
                   }
                   if (i >= 2) {
                     later_threw.store(true);
                     throw std::runtime_error("task " + std::to_string(i) + " failed");
                   }
                 }),
        "task 1 failed");
  }
}

TEST_CASE("the thread pool never uses more threads than tasks", "[backend][thread_pool]") {
  ThreadPool pool;
  CHECK(pool.resolve(3, 8) == 3);
  CHECK(pool.resolve(0, 8) == 1);
  CHECK(pool.resolve(100, 0) == ThreadPool::hardware_threads());
}
