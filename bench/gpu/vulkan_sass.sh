#!/usr/bin/env bash
# The machine code NVIDIA's Vulkan driver makes of the cooperative-matrix
# shaders, in three steps (the device machine has nvdisasm but no zstd; this
# one the reverse):
#   1. device: OUT=$OUT bash bench/gpu/vulkan_sass.sh dump
#      the microbenchmark (bench/vulkan/out, from bench/vulkan/build.sh) with
#      --dump, timings and one pipeline cache per shader; then tessera's f16
#      GEMM pipelines (tune, KHR route) and tessera's pipeline cache.
#   2. here:   python3 bench/vulkan/nv_cache_sass.py bench/vulkan/out/raw FETCHED/*.cache FETCHED/tessera/*
#   3. device: OUT=$OUT bash bench/gpu/vulkan_sass.sh disasm
#      nvdisasm -b SM90 of every bench/vulkan/out/raw/*.raw, with a count of
#      the instructions that matter.
# Carry build-gpu/{lib,bin,share}, bench/vulkan/out and .gl (device/README.md).
set -uo pipefail
out=${OUT:-/tmp/sass}
mkdir -p "$out"
if [ "${1:-dump}" = disasm ]; then
  for f in bench/vulkan/out/raw/*.raw; do
    s=$out/$(basename "${f%.raw}").sass
    /usr/local/cuda/bin/nvdisasm -b SM90 "$f" >"$s" 2>&1
    printf '%-60s' "$(basename "$s")"
    for op in HMMA LDSM MOVM LDG STS BAR.SYNC; do printf ' %s %s' $op "$(grep -c "$op" "$s")"; done
    echo
  done
  exit 0
fi
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
v=bench/vulkan/out
timeout 240 $v/coopmat_peak --dump "$out" \
  $v/mma_16x16x16_named8.spv:262144 $v/mma_16x8x16_named8.spv:131072 \
  $v/mma_load_uvec4.spv:524288:4096 $v/mma_load_uvec4_bcol.spv:524288:4096 \
  $v/mma_load16_uvec4.spv:524288:4096 $v/mma_load16_uvec4_bcol.spv:524288:4096 \
  $v/mma_load_f16.spv:524288:4096 2>&1 | grep -vE "^    " | tee "$out/peak.txt"
export TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/sass-cache
TESSERA_LOG=info TESSERA_VULKAN_PIPELINE_STATS=1 timeout 120 build-gpu/bin/tessera tune \
  --device vulkan:0 --op gemm --dtype f16 --shape 4096x4096x4096 --db /tmp/sass.tsv 2>&1 |
  grep -E "pipeline gemm_coop|^coopmat_" | cut -c1-200
mkdir -p "$out/tessera"
cp /tmp/sass-cache/tessera/* "$out/tessera/"
