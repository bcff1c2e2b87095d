// SPDX-License-Identifier: MIT
// A small reusable thread pool for the CPU backend: fork-join over an index range.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace specdec::backend {

/// Workers sleep between jobs; `run` hands a job to up to `threads - 1` of them and works on it
/// from the calling thread too. Tasks are claimed one at a time from a shared counter, so which
/// thread runs a task varies, but a task's result must (and in specdec does) depend only on its
/// index: results are independent of the thread count. One job runs at a time; concurrent callers
/// queue on a mutex, so a task must not call `run` on the pool that runs it.
class ThreadPool {
 public:
  /// A pool that grows to the number of threads asked for (at most `max_workers` helpers).
  explicit ThreadPool(int max_workers = 256) : max_workers_(max_workers) {}
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Threads used when 0 is asked for: the hardware concurrency (at least 1), read once (glibc
  /// reads /sys for it, which cost a small batch more than its work).
  static int hardware_threads() {
    static const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    return threads;
  }
  /// The number of threads `run(count, threads, ...)` uses (the caller included).
  int resolve(std::int64_t count, int threads) const {
    const int wanted = threads <= 0 ? hardware_threads() : threads;
    return static_cast<int>(std::max<std::int64_t>(
        1, std::min<std::int64_t>({count, static_cast<std::int64_t>(wanted),
                                   static_cast<std::int64_t>(max_workers_) + 1})));
  }

  /// Calls fn(task, slot) for every task in [0, count), slot in [0, resolve(count, threads)) being
  /// the running thread's index (0 = the caller), and returns when all are done. If tasks throw,
  /// the exception of the lowest-numbered one that threw is rethrown here, whatever the timing:
  /// tasks are claimed in order, so every task below it has run; unclaimed tasks are skipped.
  template <class F>
  void run(std::int64_t count, int threads, F&& fn) {
    if (count <= 0) return;
    const int n = resolve(count, threads);
    if (n == 1) {
      for (std::int64_t i = 0; i < count; ++i) fn(i, 0);
      return;
    }
    std::lock_guard job_lock(job_mutex_);
    std::function<void(std::int64_t, int)> task = std::ref(fn);
    {
      std::lock_guard lock(mutex_);
      while (static_cast<int>(workers_.size()) < n - 1) {
        const int slot = static_cast<int>(workers_.size()) + 1;
        workers_.emplace_back([this, slot] { work(slot); });
      }
      task_ = &task;
      count_ = count;
      next_.store(0);
      helpers_ = n - 1;
      joined_ = 0;
      closed_ = false;
      error_ = nullptr;
      error_task_ = count;
      ++generation_;
    }
    wake_.notify_all();
    drain(0);
    // Every task has been claimed: helpers still asleep must not join, those that joined finish.
    // Waiting for the sleepers instead would cost a wake-up latency on every small job.
    std::unique_lock lock(mutex_);
    closed_ = true;
    done_.wait(lock, [this] { return joined_ == 0; });
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void drain(int slot) {
    for (;;) {
      const std::int64_t i = next_.fetch_add(1);
      if (i >= count_) return;
      try {
        (*task_)(i, slot);
      } catch (...) {
        std::lock_guard lock(mutex_);
        if (i < error_task_) {
          error_ = std::current_exception();
          error_task_ = i;
        }
        next_.store(count_);
      }
    }
  }
  void work(int slot) {
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock,
                 [&] { return stop_ || (generation_ != seen && slot <= helpers_ && !closed_); });
      if (stop_) return;
      seen = generation_;
      ++joined_;
      lock.unlock();
      drain(slot);
      lock.lock();
      if (--joined_ == 0) done_.notify_one();
    }
  }

  int max_workers_;
  std::mutex job_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::function<void(std::int64_t, int)>* task_ = nullptr;
  std::int64_t count_ = 0;
  std::atomic<std::int64_t> next_{0};
  int helpers_ = 0;
  int joined_ = 0;       // helpers working on the current job
  bool closed_ = false;  // the current job takes no more helpers
  std::uint64_t generation_ = 0;
  std::exception_ptr error_;
  std::int64_t error_task_ = 0;  // the task error_ came from
  bool stop_ = false;
};

/// The process-wide pool the CPU backend runs on (created on first use).
inline ThreadPool& default_thread_pool() {
  static ThreadPool pool;
  return pool;
}

}  // namespace specdec::backend
