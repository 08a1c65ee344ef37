#!/usr/bin/env bash
# The decode rows of `tessera bench --suite cuda` (single call between
# events, cuBLASLt beside), twice, with the heuristic's choice, and gemm_bench
# (single / 10 queued) on the same shapes; build carried (BUILD, default
# build-gpu, with bin/gemm_bench). Output under $OUT.
set -uo pipefail
build=${BUILD:-build-gpu}
export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$PWD/$build/share/tessera/plugins.d
t=$build/bin/tessera
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
for shape in 1x8192x8192 16x4096x4096; do
  timeout 60 $t explain --device cuda:0 --op gemm --dtype bf16 --shape $shape 2>&1 | grep -iE "variant|rule|heuristic" | head -3
done
for round in 1 2; do
  for shape in 1x8192x8192 16x4096x4096; do
    timeout 120 $t bench --suite cuda --op gemm --shape $shape 2>&1 | grep -E "^gemm|GB/s of the weights" | sed "s/^/round $round: /"
  done
done
for tb in 0 1; do
  GEMM_DTYPE=bf16 GEMM_TRANS_B=$tb timeout 120 $build/bin/gemm_bench gemm 1 8192 8192 heuristic \
    stream_16x32_w8_u1 stream_16x32_w8_u2 mma_16x128x64_w1x4_s4 gemv_splitk | sed "s/^/trans_b=$tb /"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
