#!/usr/bin/env bash
# Strict f32 SIMT GEMM: a previous build (build-old: lib, bin, share) against
# this one (build-gpu), gemm_bench (single / 10 queued) per size with the
# heuristic and with each SIMT variant forced, then with B stored [N][K]
# (trans_b), the suite's f32 row (cuBLASLt beside), cuda_variants, f32
# checks and memcheck.
set -uo pipefail
sizes="1024 1536 1793 2048 3072 4096 8192"
for b in build-old build-gpu; do
  [ -d $b ] || continue
  export LD_LIBRARY_PATH=$PWD/$b/lib TESSERA_PLUGIN_PATH=$PWD/$b/share/tessera/plugins.d
  for n in $sizes; do
    variants=heuristic
    [ $b = build-gpu ] && variants="heuristic simt_128x128x16 simt_128x128x16_b2"
    GEMM_DTYPE=f32 timeout 120 $b/bin/gemm_bench gemm $n $n $n $variants | sed "s/^/$b /"
  done
  for n in ${TRANS_B_SIZES:-1024 1793 4096}; do # B stored [N][K]
    GEMM_DTYPE=f32 GEMM_TRANS_B=1 timeout 120 $b/bin/gemm_bench gemm $n $n $n heuristic |
      sed "s/^/$b trans_b /"
  done
  timeout 120 $b/bin/tessera bench --suite cuda --op gemm --shape 4096x4096x4096 2>&1 |
    grep -E "^gemm +f32|f32 4096x4096x4096: tessera" | sed "s/^/$b suite: /"
done
export LD_LIBRARY_PATH=$PWD/build-gpu/lib TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d
timeout 300 build-gpu/bin/cuda_variants 2>&1 | tail -3
timeout 300 build-gpu/bin/tessera check --device cuda:0 --op gemm 2>&1 | tail -1
timeout 300 build-gpu/bin/tessera check --device cuda:0 --op grouped_gemm 2>&1 | tail -1
timeout 300 compute-sanitizer --tool memcheck build-gpu/bin/tessera check --device cuda:0 --op gemm --dtype f32 2>&1 | tail -2
for n in 1024 4096; do build-gpu/bin/tessera explain --device cuda:0 --op gemm --dtype f32 --shape ${n}x${n}x${n} 2>&1 | grep -iE "simt|strict" | head -2; done
