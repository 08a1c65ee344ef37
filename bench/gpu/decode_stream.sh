#!/usr/bin/env bash
# The decode GEMM (stream_16x32_* configs: M <= 16, weights streamed into
# mma.sync fragments) and the Vulkan cooperative-matrix GEMM, on a GPU
# machine with a build made elsewhere (BUILD, default build-gpu, carried with
# bin/tessera, bin/cuda_variants, bin/gemm_bench) and, for Vulkan, the
# loader carried in .gl (device/README.md). Output under $OUT.
#   correctness: cuda_variants (every variant vs fp64), check --op gemm on
#                cuda:0, memcheck and racecheck over check --quick --op gemm;
#                vulkan:0 check --op gemm (heuristic and forced coopmat)
#   timing:      gemm_bench (single call / 10 queued) per decode variant and
#                B layout; tessera bench --suite cuda; tune of Vulkan f16 4096^3
set -uo pipefail
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/decode-stream}
mkdir -p "$out"
if compgen -G ".gl/*.deb" >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_DRIVER_FILES=$icd
export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$PWD/$build/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/cache
t=$build/bin/tessera
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
steps=${STEPS:-variants check sanitize time suite vulkan}
has() { [[ " $steps " == *" $1 "* ]]; }
if has variants; then
  timeout 300 "$build/bin/cuda_variants" >"$out/variants.txt" 2>&1
  echo "cuda_variants: exit $? $(tail -1 "$out/variants.txt")"
  grep -E "^FAIL" "$out/variants.txt" | head -20
  grep -E "stream_16x32" "$out/variants.txt" | head -12
fi
if has check; then
  timeout 200 $t check --device cuda:0 --op gemm 2>&1 | grep -E "^check:|FAIL" | head
fi
if has sanitize; then
  timeout 200 compute-sanitizer --tool memcheck $t check --device cuda:0 --quick --op gemm 2>&1 |
    grep -E "ERROR SUMMARY" | sed 's/^/memcheck gemm: /'
  timeout 200 compute-sanitizer --tool racecheck $t check --device cuda:0 --quick --op gemm 2>&1 |
    grep -E "RACECHECK SUMMARY" | sed 's/^/racecheck gemm: /'
fi
if has time; then
  for tb in 0 1; do
    for shape in "16 4096 4096" "1 8192 8192" "8 4096 4096" "16 8192 28672"; do
      GEMM_DTYPE=bf16 GEMM_TRANS_B=$tb timeout 120 $build/bin/gemm_bench gemm $shape heuristic \
        stream_16x32_w8_u2 stream_16x32_w4_u2 stream_16x32_w8_u1 mma_16x128x64_w1x4_s4 |
        sed "s/^/trans_b=$tb /"
    done
  done | tee "$out/decode.tsv"
fi
if has suite; then
  timeout 300 $t bench --suite cuda --json "$out/suite.json" >"$out/suite.txt" 2>&1
  grep -E "^cuda:0 |^suite|^gemm .*(1x8192|16x4096)" "$out/suite.txt"
fi
if has vulkan; then
  timeout 120 $t check --device vulkan:0 --op gemm 2>&1 | grep -E "^check:|FAIL" | head
  for v in coopmat_128x128x32_2x2 coopmat_64x64x32_2x2; do
    TESSERA_CONFIG=gemm:$v timeout 120 $t check --device vulkan:0 --op gemm --dtype f16 2>&1 |
      grep -E "^check:|FAIL" | head -5 | sed "s/^/$v: /"
  done
  timeout 200 $t tune --device vulkan:0 --op gemm --dtype f16 --shape 4096x4096x4096 --db /tmp/t.tsv 2>&1 |
    grep -E "coopmat|simt" | tee "$out/vulkan_tune.txt"
fi
