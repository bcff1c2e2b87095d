#!/usr/bin/env bash
# Compile-time budget of the public headers: what an engine pays to include specdec.
#   header_budget.sh CXX INCLUDE_DIR EIGEN_DIR FMT_DIR
# For each header: -fsyntax-only CPU seconds (user + system, so a loaded machine does not fail it)
# against its budget (1.7x-2.5x what the CI machine this was set on takes alone: a compile under a
# parallel ctest takes a fifth longer), and that the narrow headers preprocess without Eigen. The verifiers' header
# must also preprocess to at most 1.1x the lines of the standard and fmt headers it includes.
set -euo pipefail
cxx=$1 include=$2 eigen=$3 fmt=${4:-}
flags=(-std=c++20 -I"$include" -isystem "$eigen")
[[ -n "$fmt" ]] && flags+=(-isystem "$fmt")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0

cpu_seconds() {  # CPU seconds of one syntax-only compile of $1 (a file)
  local TIMEFORMAT='%U %S'
  { time "$cxx" "${flags[@]}" -fsyntax-only "$1" >/dev/null; } 2>&1 | awk '{printf "%.2f", $1 + $2}'
}

# Whether $1 seconds exceed the budget $2. A compile over budget is timed once more and judged on
# the second time: a compile that shared its core with a busy neighbour can take twice its time.
over() { awk -v s="$1" -v b="$2" 'BEGIN { exit !(s > b) }'; }

# header  budget (CPU seconds, syntax only)  may include Eigen
while read -r header budget eigen_ok; do
  echo "#include <$header>" >"$work/tu.cpp"
  seconds=$(cpu_seconds "$work/tu.cpp")
  if over "$seconds" "$budget"; then seconds=$(cpu_seconds "$work/tu.cpp"); fi  # once more
  lines=$("$cxx" "${flags[@]}" -E "$work/tu.cpp" | wc -l)
  verdict=ok
  if over "$seconds" "$budget"; then verdict="OVER BUDGET"; status=1; fi
  if [[ "$eigen_ok" == no ]] && "$cxx" "${flags[@]}" -M "$work/tu.cpp" | grep -q '/Eigen/'; then
    verdict="includes Eigen"; status=1
  fi
  printf '%-40s %6s s (budget %s s) %7d lines  %s\n' "$header" "$seconds" "$budget" "$lines" "$verdict"
done <<'LIST'
specdec/verify/verify.hpp 4.5 no
specdec/unchecked.hpp 4.5 no
specdec/backend/cpu/verify_batch.hpp 5 no
specdec/specdec.hpp 12 yes
LIST

# A translation unit that calls the CPU batch entries from logits for float, half and bfloat16, at
# -O2: header-only it instantiates their row kernels; with specdec::batch (SPECDEC_COMPILED_BATCH)
# it compiles none of them.
cat >"$work/calls.cpp" <<'CALLS'
#include <specdec/backend/cpu/compiled_batch.hpp>
template <class T>
void call(const specdec::ChainBatchLogitsArgs<T>& chain, const specdec::WarpBatchArgs<T>& warp,
          specdec::Workspace& ws) {
  specdec::verify_chain_batch_logits(specdec::backend::cpu, chain, ws);
  specdec::verify_chain_batch_target_only_logits(specdec::backend::cpu, chain, ws);
  specdec::warp_logits_batch(specdec::backend::cpu, warp, ws);
}
#define SPECDEC_CALL(T) \
  template void call<T>(const specdec::ChainBatchLogitsArgs<T>&, const specdec::WarpBatchArgs<T>&, \
                        specdec::Workspace&);
SPECDEC_CALL(float)
SPECDEC_CALL(Eigen::half)
SPECDEC_CALL(Eigen::bfloat16)
CALLS
compile_calls() {  # CPU seconds of compiling calls.cpp with the extra flags $1
  local TIMEFORMAT='%U %S'
  { time "$cxx" "${flags[@]}" $1 -O2 -c -o "$work/calls.o" "$work/calls.cpp"; } 2>&1 |
    awk '{printf "%.2f", $1 + $2}'
}

# mode  budget (CPU seconds, -O2 -c)  extra flags
while read -r mode budget define; do
  seconds=$(compile_calls "$define")
  if over "$seconds" "$budget"; then seconds=$(compile_calls "$define"); fi  # once more
  verdict=ok
  if over "$seconds" "$budget"; then verdict="OVER BUDGET"; status=1; fi
  printf '%-40s %6s s (budget %s s)  %s\n' "batch entries from logits, $mode" "$seconds" "$budget" \
    "$verdict"
done <<'LIST'
header-only 30 -UNONE
specdec::batch 7 -DSPECDEC_COMPILED_BATCH
LIST

# The verifiers' header against the standard and fmt headers its own headers include.
echo '#include <specdec/verify/verify.hpp>' >"$work/verify.cpp"
"$cxx" "${flags[@]}" -M "$work/verify.cpp" | tr ' \\' '\n\n' | grep "^$include/specdec/" | sort -u |
  xargs grep -h '^#include <' | sort -u |
  # a header behind a platform's #if (arm_neon.h on x86) is counted only where it exists
  sed -E 's/^#include <([^>]*)>.*/#if __has_include(<\1>)\n#include <\1>\n#endif/' \
    >"$work/dependencies.cpp"
ours=$("$cxx" "${flags[@]}" -E "$work/verify.cpp" | wc -l)
theirs=$("$cxx" "${flags[@]}" -E -x c++ "$work/dependencies.cpp" | wc -l)
ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN { printf "%.3f", a / b }')
echo "specdec/verify/verify.hpp: $ours lines, its standard and fmt headers $theirs: ${ratio}x (budget 1.1x)"
if awk -v r="$ratio" 'BEGIN { exit !(r > 1.1) }'; then status=1; fi
exit $status
