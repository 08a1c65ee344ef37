#!/usr/bin/env bash
# On a GPU machine, with a build tree carried along (BUILD, default build-c2):
# finds cuBLASLt (the system's, else the pip copy torch uses), then runs the
# row-op checks, `tessera bench --suite cuda` (tessera vs cuBLASLt on the
# same buffers, rows vs copy bandwidth) and optionally check --compare.
# usage: bench/gpu/baselines.sh [--compare] [--sanitize OPS...]   (output under $OUT)
set -uo pipefail
build=${BUILD:-build-c2}
out=${OUT:-/tmp/baselines}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$PWD/$build/share/tessera/plugins.d
t=$build/bin/tessera
if [ -z "${TESSERA_CUBLASLT:-}" ] && ! $t __cublaslt-probe >/dev/null 2>&1; then
  lib=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
  [ -z "$lib" ] && lib=$(dirname "$(find / -path '*site-packages/nvidia/*/lib/libcublasLt.so*' 2>/dev/null | head -1)")
  export TESSERA_CUBLASLT=$lib
fi
echo "TESSERA_CUBLASLT=${TESSERA_CUBLASLT:-}"
$t __cublaslt-probe
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
compare=0 sanitize=()
while [ $# -gt 0 ]; do
  case $1 in
  --compare) compare=1 ;;
  --sanitize) shift; sanitize=("$@"); break ;;
  esac
  shift
done
for op in rmsnorm layernorm softmax cross_entropy rope swiglu; do
  timeout 60 $t check --device cuda:0 --op $op 2>&1 | grep "^check:" | sed "s/^/$op /"
done
timeout 300 $t bench --suite cuda --json "$out/suite.json" 2>&1 | tee "$out/suite.txt" | grep -v "^ *$" | tail -60
if [ $compare = 1 ]; then
  timeout 200 $t check --compare cuda:0,cpu 2>&1 | tee "$out/compare.txt" | tail -8
fi
for op in "${sanitize[@]}"; do
  timeout 120 compute-sanitizer --tool memcheck $t check --device cuda:0 --quick --op $op 2>&1 | grep -E "ERROR SUMMARY" | sed "s/^/memcheck $op: /"
  timeout 120 compute-sanitizer --tool racecheck $t check --device cuda:0 --quick --op $op 2>&1 | grep -E "RACECHECK SUMMARY|ERROR SUMMARY" | sed "s/^/racecheck $op: /"
done
# TUNE_ROWS=1: every row variant of the row ops at the acceptance shapes.
if [ "${TUNE_ROWS:-0}" = 1 ]; then
  for spec in "rmsnorm 16384x8192" "softmax 16384x8192" "cross_entropy 16384x8192" "layernorm 16384x8192" "rope 4x4096x32x128"; do
    set -- $spec
    timeout 60 $t tune --device cuda:0 --op $1 --dtype bf16 --shape $2 --db "$out/tune.tsv" 2>&1 | grep -E "^(rows|elementwise)_" | sed "s/^/tune $1: /"
  done
fi
