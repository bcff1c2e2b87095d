// SPDX-License-Identifier: MIT
// Runs every case, then prints each one's time as a ratio to BM_MemoryRead at the same vocabulary
// size measured in the same run: absolute times drift on a shared machine, the ratios hold.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace {

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.error_occurred) continue;
      const auto v = run.counters.find("V");
      if (v == run.counters.end()) continue;
      const double ns = run.GetAdjustedRealTime();
      const auto vocab = static_cast<long long>(v->second.value);
      const std::string name = run.benchmark_name();
      if (name.rfind("BM_MemoryRead/", 0) == 0) reference_[vocab] = ns;
      results_.push_back({name, vocab, ns});
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\n%-60s %10s %14s %12s\n", "case", "V", "time/iter(us)", "x mem-read");
    for (const auto& r : results_) {
      const auto ref = reference_.find(r.vocab);
      const double ratio = ref == reference_.end() ? 0.0 : r.ns / ref->second;
      std::printf("%-60s %10lld %14.2f %12.2f\n", r.name.c_str(), r.vocab, r.ns / 1e3, ratio);
    }
  }

 private:
  struct Result {
    std::string name;
    long long vocab;
    double ns;
  };
  std::map<long long, double> reference_;
  std::vector<Result> results_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
