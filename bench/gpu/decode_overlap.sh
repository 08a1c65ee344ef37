#!/usr/bin/env bash
# Decode GEMMs launched to overlap the kernel ahead (programmatic dependent
# launch, B prefetched into L2 before the wait): gemm_bench (single / 10
# queued per call) with the overlap off and on, per prefetch depth and
# trigger point, then the suite's decode rows (weights over copy) off and
# on, `check --op gemm` with the overlap on, and memcheck over the decode
# cases. Build carried (BUILD, default build-gpu, with bin/gemm_bench).
set -uo pipefail
build=${BUILD:-build-gpu}
export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$PWD/$build/share/tessera/plugins.d
t=$build/bin/tessera
gb=$build/bin/gemm_bench
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
$gb copy 32 64 256
run() { # label, env...
  local label=$1; shift
  for shape in "16 4096 4096" "1 8192 8192" "16 4096 16384"; do
    env "$@" timeout 60 $gb gemm $shape heuristic | sed "s/^/$label /"
  done
}
run "overlap=off" TESSERA_CUDA_OVERLAP=0
for tr in ${TRIGGERS:-0 1}; do
  for pf in ${PREFETCHES:-0 8 16 32 64}; do
    run "trigger=$tr prefetch=$pf" TSR_EXP_TRIGGER=$tr TSR_EXP_PREFETCH=$pf
  done
done
run "overlap=off" TESSERA_CUDA_OVERLAP=0
for round in 1 2; do
  for ov in 0 1; do
    for shape in 1x8192x8192 16x4096x4096; do
      TESSERA_CUDA_OVERLAP=$ov timeout 120 $t bench --suite cuda --op gemm --shape $shape 2>&1 |
        grep -E "^gemm|GB/s of the weights" | sed "s/^/suite overlap=$ov round $round: /"
    done
  done
done
timeout 300 $t check --device cuda:0 --op gemm 2>&1 | tail -2
timeout 120 $t check --device cuda:0 --op gemm --dtype bf16 --quick 2>&1 | tail -1
if command -v compute-sanitizer >/dev/null; then
  timeout 300 compute-sanitizer --tool memcheck $t check --device cuda:0 --op gemm --quick 2>&1 | tail -3
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
