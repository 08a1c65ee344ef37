#!/usr/bin/env bash
# The SM-paired persistent coopmat GEMM against the plain 128x128 one on an
# NVIDIA GPU (gemm_coopmat.comp, SM_PAIRED), with cuBLASLt in the same run,
# then the checks of every f16 GEMM case forced onto it. Build made elsewhere
# (build-gpu), loader in .gl (device/README.md).
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/c1
t=build-gpu/bin/tessera
TESSERA_LOG=info TESSERA_VULKAN_PIPELINE_STATS=1 timeout 120 $t tune --device vulkan:0 --op gemm \
  --dtype f16 --shape 1024x1024x1024 --db /tmp/t.tsv 2>&1 | grep -E "pipeline gemm_coop" | cut -c1-200
for shape in ${SHAPES:-4096x4096x4096 4096x4096x4096 8192x8192x8192 4096x11008x4096}; do
  timeout 120 $t tune --device vulkan:0 --op gemm --dtype f16 --shape $shape --db /tmp/t.tsv 2>&1 |
    grep -E "^coopmat_128x128x32_2x2" | cut -c1-60 | sed "s/^/$shape /"
done
for v in coopmat_128x128x32_2x2_pf; do
  TESSERA_CONFIG=gemm:$v timeout 200 $t check --device vulkan:0 --op gemm --dtype f16 2>&1 |
    grep -E "^check:|FAIL" | head -5 | sed "s/^/$v: /"
done
timeout 120 $t bench --suite cuda --op gemm --shape 4096x4096x4096 2>&1 | grep -E "^gemm|cuBLASLt:"
