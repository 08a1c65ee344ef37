#!/usr/bin/env bash
# Everything the CUDA and Vulkan issues judge, on one GPU machine, for one
# build made elsewhere (build-gpu, CUDA and Vulkan plugins, carried with the
# Vulkan loader in .gl). PART=cuda: cuda_variants, bench/gpu/baselines.sh
# (row-op checks, tessera bench --suite cuda, check --compare cuda:0,cpu,
# memcheck/racecheck of gemm, cross_entropy, rmsnorm) and memcheck over
# `check --quick` of every op; PART=vulkan: bench/gpu/vulkan_suite.sh
# (suite vulkan, check on vulkan:0, --compare cuda:0,vulkan:0); unset: both
# (more than one device-tool call allows). Output under $OUT (or
# /tmp/final-check).
set -uo pipefail
out=${OUT:-/tmp/final-check}
mkdir -p "$out"
here=$(dirname "$0")
export LD_LIBRARY_PATH=$PWD/build-gpu/lib TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d
if [ "${PART:-cuda}" = cuda ]; then
  timeout 300 build-gpu/bin/cuda_variants >"$out/variants.txt" 2>&1
  echo "cuda_variants: exit $? $(tail -1 "$out/variants.txt")"
  OUT=$out/cuda BUILD=build-gpu bash "$here/baselines.sh" --compare --sanitize gemm cross_entropy rmsnorm 2>&1 |
    grep -E "check:|^cuda:0 |^suite|memcheck|racecheck|copy:"
  timeout 300 compute-sanitizer --tool memcheck build-gpu/bin/tessera check --device cuda:0 --quick \
    >"$out/memcheck-all.txt" 2>&1
  echo "memcheck, check --quick of every op: $(grep -E 'ERROR SUMMARY' "$out/memcheck-all.txt")" \
    "$(grep -E '^check:' "$out/memcheck-all.txt")"
fi
if [ "${PART:-vulkan}" = vulkan ]; then
  OUT=$out/vulkan bash "$here/vulkan_suite.sh" 2>&1 | grep -E "^vulkan:0 |^suite|^check:"
fi
