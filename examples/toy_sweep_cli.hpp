// SPDX-License-Identifier: MIT
// The command line and CSV output compare_methods and cascade_sweep share:
// [--csv PATH] [--sequences N] [--tokens M] [--cost-ratio R], and the rows written to --csv.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace toy_sweep {

/// What the shared options set (compare_methods assumes a cheaper small model: 0.05).
struct Settings {
  std::string csv;          // --csv: where the rows go (none when empty)
  int sequences = 24;       // --sequences: sequences decoded per point
  int tokens = 64;          // --tokens: tokens generated per sequence
  double cost_ratio = 0.1;  // --cost-ratio: a small-model call's cost relative to a large one's
};

/// Reads the shared options into `s` (toy_sweep::Settings or a program's settings derived from
/// it); `extra(flag, value)` takes the program's own options and returns false
/// for a flag it does not know. False (after a line on stderr) on bad input.
template <class Extra>
bool parse_args(int argc, char** argv, Settings& s, Extra&& extra) {
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    const char* flag = argv[i];
    if (std::strcmp(flag, "--csv") == 0 && has_value) {
      s.csv = argv[++i];
    } else if (std::strcmp(flag, "--sequences") == 0 && has_value) {
      s.sequences = std::atoi(argv[++i]);
    } else if (std::strcmp(flag, "--tokens") == 0 && has_value) {
      s.tokens = std::atoi(argv[++i]);
    } else if (std::strcmp(flag, "--cost-ratio") == 0 && has_value) {
      s.cost_ratio = std::atof(argv[++i]);
    } else if (!has_value || !extra(flag, argv[i + 1])) {
      std::fprintf(stderr, "usage: %s [--csv PATH] [--sequences N] [--tokens M] [--cost-ratio R]\n",
                   argv[0]);
      return false;
    } else {
      ++i;
    }
  }
  if (s.sequences < 1 || s.tokens < 1 || !(s.cost_ratio >= 0.0)) {
    std::fprintf(stderr, "--sequences and --tokens must be >= 1, --cost-ratio >= 0\n");
    return false;
  }
  return true;
}

/// Writes `header` and then `write_row(file, row)` for each of `rows` to `path`; false (after a
/// line on stderr) when the file cannot be opened.
template <class Rows, class WriteRow>
bool write_csv(const std::string& path, const char* header, const Rows& rows,
               WriteRow&& write_row) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::fprintf(f, "%s\n", header);
  for (const auto& row : rows) write_row(f, row);
  std::fclose(f);
  std::printf("\nWrote %zu rows to %s\n", rows.size(), path.c_str());
  return true;
}

}  // namespace toy_sweep
