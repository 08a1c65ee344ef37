#!/usr/bin/env bash
# Vulkan cooperative-matrix GEMM on an NVIDIA GPU, with a build made
# elsewhere (build-gpu) and the loader carried in .gl (device/README.md):
# the compiler's statistics of every GEMM pipeline
# (TESSERA_VULKAN_PIPELINE_STATS), tune of f16 4096^3, the diagnosis probes
# of gemm_coopmat.comp (TESSERA_VULKAN_COOPMAT_PROBE, a sum of bits, wrong
# results on purpose) and the checks of gemm / grouped_gemm.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/c1
t=build-gpu/bin/tessera
TESSERA_LOG=info TESSERA_VULKAN_PIPELINE_STATS=1 timeout 120 $t tune --device vulkan:0 --op gemm \
  --dtype f16 --shape 4096x4096x4096 --db /tmp/t.tsv 2>&1 | grep -E "pipeline |coopmat_|simt_" |
  cut -c1-400
for probe in ${PROBES:-1 2 16}; do
  echo "probe $probe: $(TESSERA_VULKAN_COOPMAT_PROBE=$probe timeout 60 $t tune --device vulkan:0 \
    --op gemm --dtype f16 --shape 4096x4096x4096 --db /tmp/t.tsv 2>&1 |
    grep -E "^coopmat_128x128x32_2x2" | cut -c1-60 | tr '\n' ' ')"
done
for shape in ${SHAPES:-8192x8192x8192 4096x11008x4096 1024x1024x1024}; do
  timeout 120 $t tune --device vulkan:0 --op gemm --dtype f16 --shape $shape --db /tmp/t.tsv 2>&1 |
    grep -E "^(coopmat|simt)_" | cut -c1-60 | sed "s/^/$shape /"
done
timeout 120 $t tune --device vulkan:0 --op grouped_gemm --dtype f16 --shape 8x2048x1024x1024 \
  --db /tmp/t.tsv 2>&1 | grep -E "^(coopmat|simt)_" | cut -c1-60 | sed "s/^/grouped 8x2048x1024x1024 /"
for op in gemm grouped_gemm attention; do
  timeout 200 $t check --device vulkan:0 --op $op 2>&1 | grep -E "^check:|FAIL" | head -5 | sed "s/^/$op /"
done
for v in coopmat_64x64x32_2x2 coopmat_128x64x32_2x2 coopmat_128x128x32_2x2 coopmat_128x128x32_2x4; do
  TESSERA_CONFIG=gemm:$v timeout 120 $t check --device vulkan:0 --op gemm --dtype f16 2>&1 |
    grep -E "^check:|FAIL" | head -3 | sed "s/^/$v: /"
  TESSERA_CONFIG=grouped_gemm:$v timeout 120 $t check --device vulkan:0 --op grouped_gemm --dtype f16 2>&1 |
    grep -E "^check:|FAIL" | head -3 | sed "s/^/grouped $v: /"
done
# cuBLASLt (and the CUDA plugin) on the same GPU in the same run: the ratio's other side
if [ -f build-gpu/lib/libtessera-cuda.so.1 ]; then
  timeout 120 $t bench --suite cuda --op gemm --shape 4096x4096x4096 2>&1 | grep -E "^gemm|cuBLASLt:"
fi
