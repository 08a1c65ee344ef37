#!/usr/bin/env bash
# Everything the CUDA and Vulkan issues judge, on one GPU machine, for one
# build made elsewhere (build-gpu, CUDA and Vulkan plugins, carried with the
# Vulkan loader in .gl): cuda_variants, bench/gpu/baselines.sh (row-op
# checks, tessera bench --suite cuda, check --compare cuda:0,cpu,
# memcheck/racecheck of gemm, cross_entropy, rmsnorm), then
# bench/gpu/vulkan_suite.sh (suite vulkan, check on vulkan:0, --compare
# cuda:0,vulkan:0). Output under $OUT (or /tmp/final-check).
set -uo pipefail
out=${OUT:-/tmp/final-check}
mkdir -p "$out"
here=$(dirname "$0")
export LD_LIBRARY_PATH=$PWD/build-gpu/lib TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d
timeout 300 build-gpu/bin/cuda_variants >"$out/variants.txt" 2>&1
echo "cuda_variants: exit $? $(tail -1 "$out/variants.txt")"
OUT=$out/cuda BUILD=build-gpu bash "$here/baselines.sh" --compare --sanitize gemm cross_entropy rmsnorm 2>&1 |
  grep -E "check:|^cuda:0 |^suite|memcheck|racecheck|copy:"
OUT=$out/vulkan bash "$here/vulkan_suite.sh" 2>&1 | grep -E "^vulkan:0 |^suite|^check:"
