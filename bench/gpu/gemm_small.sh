#!/usr/bin/env bash
# GEMM shapes off the big-square path, on cuda:0, with a build made elsewhere
# (carried to the device): awkward sizes (1793^3: operands packed for TMA),
# tf32 (wgmma), strict f32 (SIMT), decode (M = 1 and 16: 16-row tiles split
# over K), plus the correctness runs of the GEMM family. Steps:
#   check     tessera check --op gemm / grouped_gemm (heuristic picks)
#   variants  tests/cuda/cuda_variants (every listed variant vs fp64)
#   memcheck  compute-sanitizer memcheck over check --quick --op gemm
#   bench     gemm_bench: single call and 10 queued, per variant
#   torch     torch.matmul on the same shapes (tf32 with allow_tf32), and a
#             256 MiB device copy for the bandwidth ceiling
# Logs and tables go to $OUT (default /tmp/gemm-small); a table prints last.
#
# usage: bench/gpu/gemm_small.sh   env: BUILD_DIR (default build-c1, needs
#        bin/tessera, bin/cuda_variants, bin/gemm_bench), STEPS
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${BUILD_DIR:-$root/build-c1}" && pwd)
out=${OUT:-/tmp/gemm-small}
steps=${STEPS:-check variants memcheck bench torch}
mkdir -p "$out"
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$build/share/tessera/plugins.d
tessera=$build/bin/tessera
has() { [[ " $steps " == *" $1 "* ]]; }
log=$out/gemm_small.log
: >"$log"
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$log"

if has check; then
  for op in gemm grouped_gemm; do
    timeout 150 "$tessera" check --device cuda:0 --op $op >"$out/check_$op.txt" 2>&1
    say "check $op: exit $? $(grep -E 'passed' "$out/check_$op.txt" | tail -1)"
    grep -E "FAIL" "$out/check_$op.txt" | head -5 | tee -a "$log"
  done
fi
if has variants; then
  timeout 300 "$build/bin/cuda_variants" >"$out/variants.txt" 2>&1
  say "variants: exit $? $(tail -1 "$out/variants.txt")"
  grep -E "^FAIL" "$out/variants.txt" | head -20 | tee -a "$log"
fi
if has memcheck && command -v compute-sanitizer >/dev/null; then
  for op in gemm grouped_gemm; do
    timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$tessera" check \
      --device cuda:0 --quick --op $op >"$out/memcheck_$op.txt" 2>&1
    say "memcheck $op: exit $? $(grep -E 'ERROR SUMMARY' "$out/memcheck_$op.txt" | tail -1)"
  done
fi

rows=$out/bench.tsv
: >"$rows"
bench() { # bench DTYPE TRANS_B M N K VARIANT...
  local dtype=$1 trans=$2 m=$3 n=$4 k=$5
  shift 5
  GEMM_DTYPE=$dtype GEMM_TRANS_B=$trans timeout 120 "$build/bin/gemm_bench" gemm "$m" "$n" "$k" \
    "$@" >>"$rows" 2>>"$log"
}
if has bench; then
  bench bf16 0 1793 1793 1793 heuristic mma_128x256x32_w2x4_s3
  bench bf16 0 1 8192 8192 heuristic gemv_splitk
  bench bf16 1 1 8192 8192 heuristic mma_16x128x64_w1x4_s4
  bench bf16 0 16 4096 4096 heuristic wgmma_128x128x64_s6_ws_p
  bench bf16 1 16 4096 4096 heuristic
  bench tf32 0 4096 4096 4096 heuristic tf32_128x128x16_w2x4_s4
  bench tf32 1 4096 4096 4096 heuristic
  bench f32 0 4096 4096 4096 heuristic
  bench f32 1 4096 4096 4096 heuristic
  bench bf16 0 4096 4096 4096 heuristic
  bench bf16 0 4096 4096 11008 heuristic
fi

torch_rows=$out/torch.tsv
: >"$torch_rows"
if has torch && command -v python3 >/dev/null; then
  timeout 200 python3 "$root/bench/gpu/torch_matmul.py" bf16,0,1793,1793,1793 bf16,0,1,8192,8192 \
    bf16,1,1,8192,8192 bf16,0,16,4096,4096 bf16,1,16,4096,4096 tf32,0,4096,4096,4096 \
    f32,0,4096,4096,4096 f32,1,4096,4096,4096 bf16,0,4096,4096,4096 bf16,0,4096,4096,11008 \
    >"$torch_rows" 2>>"$log"
fi

{
  echo
  printf '%-30s %-26s %9s %8s %9s %8s | %9s %8s %9s %8s\n' case variant single rate queued rate \
    torch "rate" "queued" rate
  while IFS=$'\t' read -r name variant single srate queued qrate; do
    t=$(awk -F'\t' -v n="$name" '$1 == n { printf "%s %s %s %s", $2, $3, $4, $5 }' "$torch_rows")
    printf '%-30s %-26s %9s %8s %9s %8s | %s\n' "$name" "$variant" "$single" "$srate" "$queued" \
      "$qrate" "${t:--}"
  done <"$rows"
  grep copy_ "$torch_rows"
  echo "(ms per call; rates TFLOP/s; single: events around one call, queued: 10 back to back;"
  echo " torch: torch.matmul, tf32 rows with allow_tf32; copy: GB/s read + write)"
} | tee -a "$log"
