#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Every check of the CUDA backend that needs a GPU, in one run: the CUDA tests, compute-sanitizer's
# memcheck on the full-vocabulary cases and its racecheck, initcheck and synccheck on small ones
# (they are slow), then specdec_bench_cuda beside bench/torch_reference.py (the same chain step in
# eager PyTorch) on the same GPU.
#
#   bench/cuda/check_on_gpu.sh [--dry-run] [--profile] BUILD_DIR [OUT_DIR]
#
# BUILD_DIR: a build configured with -DSPECDEC_WITH_CUDA=ON in which test_backend_cuda and
# specdec_bench_cuda are built. Each step writes OUT_DIR/<step>.log (OUT_DIR defaults to
# BUILD_DIR/gpu-checks) and runs under its own time limit (SPECDEC_GPU_STEP_SECONDS, 300 by
# default), so one slow step does not take the others' time. --profile adds Nsight Compute's
# kernel times for `specdec_bench_cuda profile`; --dry-run prints the steps and runs none.
# Prints one line per step and exits 1 when any failed.
set -uo pipefail

dry_run=0 profile=0
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --dry-run) dry_run=1 ;;
    --profile) profile=1 ;;
    *) echo "check_on_gpu.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: check_on_gpu.sh [--dry-run] [--profile] BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
build=$1
out=${2:-$build/gpu-checks}
limit=${SPECDEC_GPU_STEP_SECONDS:-300}
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
tests=$build/tests/backend/test_backend_cuda
bench=$build/bench/cuda/specdec_bench_cuda
printf -v tests_q '%q' "$tests"  # the command lines below are run by bash -c
printf -v bench_q '%q' "$bench"
printf -v reference_q '%q' "$source_dir/bench/torch_reference.py"
# compute-sanitizer and ncu from PATH, else from the CUDA toolkit's bin directory.
cuda_tool() {
  local found
  found=$(command -v "$1" 2>/dev/null) || found=${CUDA_HOME:-/usr/local/cuda}/bin/$1
  printf '%q' "$found"
}
sanitizer=$(cuda_tool compute-sanitizer)
ncu=$(cuda_tool ncu)
# The sanitizers' small cases: every kernel family at a few rows of a small vocabulary.
small_cases='verify_chain_batch_logits*,batched top-k*,top-k and top-p*,verify_tree_batch equals*,gumbel_top_k_batch equals*'

steps=() commands=()
step() {  # a named step and its command line
  steps+=("$1")
  commands+=("$2")
}
step tests "$tests_q"
step memcheck "$sanitizer --tool memcheck --error-exitcode 1 $tests_q '[cuda_full_vocab]'"
for tool in racecheck initcheck synccheck; do
  step "$tool" "$sanitizer --tool $tool --error-exitcode 1 $tests_q '$small_cases'"
done
step bench "$bench_q"
step torch "python3 $reference_q"
if [[ $profile == 1 ]]; then
  step profile "$ncu --csv --metrics gpu__time_duration.sum,launch__grid_size $bench_q profile"
fi

if [[ $dry_run == 1 ]]; then
  for i in "${!steps[@]}"; do printf '%s: %s\n' "${steps[$i]}" "${commands[$i]}"; done
  exit 0
fi
for binary in "$tests" "$bench"; do
  if [[ ! -x $binary ]]; then
    echo "check_on_gpu.sh: $binary is not built (configure with -DSPECDEC_WITH_CUDA=ON)" >&2
    exit 2
  fi
done
mkdir -p "$out"
failed=0
for i in "${!steps[@]}"; do
  name=${steps[$i]}
  start=$SECONDS
  timeout "$limit" bash -c "${commands[$i]}" >"$out/$name.log" 2>&1
  status=$?
  verdict=passed
  if [[ $status == 124 ]]; then
    verdict="timed out after $limit s"
  elif [[ $status == 77 ]]; then
    verdict="no GPU (exit 77)"
  elif [[ $status != 0 ]]; then
    verdict="failed (exit $status)"
  fi
  [[ $verdict == passed ]] || failed=1
  printf '%-10s %-24s %4d s  %s\n' "$name" "$verdict" $((SECONDS - start)) "$out/$name.log"
done
exit $failed
