#!/usr/bin/env bash
# The machine code NVIDIA's Vulkan driver makes of the cooperative-matrix
# shaders, and their speed: the microbenchmark (bench/vulkan, built here into
# bench/vulkan/out and carried) with --dump, whose pipeline caches hold the
# compiled code as ELF objects that nvdisasm reads; then tessera's f16 GEMM
# pipelines (KHR and NV routes) from tessera's own pipeline cache.
# Device tool: carry build-gpu/{lib,bin,share} and bench/vulkan/out; .gl holds
# the loader (device/README.md). Files go to $OUT (or /tmp/sass).
set -uo pipefail
out=${OUT:-/tmp/sass}
mkdir -p "$out/dump" "$out/tessera"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
dis=$(command -v nvdisasm || echo /usr/local/cuda/bin/nvdisasm)
sass() { # every ELF in a folder -> .sass beside it, and a count of the opcodes that matter
  for e in "$1"/*.elf; do
    [ -f "$e" ] || continue
    "$dis" -c "$e" >"${e%.elf}.sass" 2>&1 || "$dis" "$e" >"${e%.elf}.sass" 2>&1
    printf '%-50s' "$(basename "$e")"
    for op in HMMA LDSM LDS STS LDG STG BAR BRA; do
      printf ' %s %s' $op "$(grep -cE "[^A-Z]$op[ .]" "${e%.elf}.sass")"
    done
    echo
  done
}
v=bench/vulkan/out
timeout 240 $v/coopmat_peak --dump "$out/dump" \
  $v/mma_16x16x16_named8.spv:262144 $v/mma_16x8x16_named8.spv:131072 \
  $v/mma_load_uvec4.spv:524288:4096 $v/mma_load_uvec4_bcol.spv:524288:4096 \
  $v/mma_load16_uvec4.spv:524288:4096 $v/mma_load16_uvec4_bcol.spv:524288:4096 \
  $v/mma_load_f16.spv:524288:4096 2>&1 | grep -vE "^    " | tee "$out/peak.txt"
sass "$out/dump"

t=build-gpu/bin/tessera
export TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d
for route in khr nv; do
  export XDG_CACHE_HOME=/tmp/cache-$route
  if [ $route = nv ]; then export TESSERA_VULKAN_COOPMAT_NV=1; fi
  echo "== route $route"
  TESSERA_LOG=info TESSERA_VULKAN_PIPELINE_STATS=1 timeout 120 $t tune --device vulkan:0 --op gemm \
    --dtype f16 --shape 4096x4096x4096 --db /tmp/t-$route.tsv 2>&1 |
    grep -E "pipeline gemm_coop|^coopmat_" | cut -c1-200
  mkdir -p "$out/tessera/$route"
  for c in $(find /tmp/cache-$route -type f); do
    build-gpu/../bench/vulkan/out/coopmat_peak --carve "$c" "$out/tessera/$route" | tail -1
  done
  sass "$out/tessera/$route"
done
