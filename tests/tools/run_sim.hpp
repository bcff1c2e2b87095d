// SPDX-License-Identifier: MIT
// Runs the built specdec-sim as a process: a request in, stdout, stderr and the exit status out;
// and the shared check that bad input exits with status 2, one stderr line and empty stdout.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace specdec::test {

struct SimRun {
  int status = -1;
  std::string out, err;
};

inline std::string read_text_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// `specdec-sim <command> <options> <request file>`. File names are unique per process and call,
/// since ctest runs the cases in parallel.
inline SimRun run_sim(const std::string& command, const std::string& request,
                      const std::string& options = "") {
  static int counter = 0;
  const std::string base = "specdec_sim_" + command + "_test_" + std::to_string(getpid()) + "_" +
                           std::to_string(++counter);
  const std::string in = base + ".json", err = base + ".err";
  std::ofstream(in) << request;
  const std::string line = std::string("\"") + SPECDEC_SIM_PATH + "\" " + command + " " + options +
                           " " + in + " 2> " + err;
  SimRun r;
  FILE* pipe = popen(line.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_text_file(err);
  std::remove(in.c_str());
  std::remove(err.c_str());
  return r;
}

/// Bad input: exit status 2, exactly one line on stderr naming `field`, nothing on stdout.
inline void check_sim_usage_error(const std::string& command, const std::string& request,
                                  const std::string& field, const std::string& options = "") {
  INFO(request);
  const SimRun r = run_sim(command, request, options);
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(field));
}

}  // namespace specdec::test
