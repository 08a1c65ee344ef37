#!/usr/bin/env bash
# Issue 5's acceptance on an NVIDIA GPU, with a build made elsewhere (BUILD,
# default build-gpu, CUDA and Vulkan plugins) and the Vulkan loader carried
# in .gl (device/README.md): tessera bench --suite vulkan (Vulkan rows,
# the CUDA device's rows and cuBLASLt as the same run's reference) and
# tessera check on vulkan:0 and --compare cuda:0,vulkan:0. Output under $OUT.
set -uo pipefail
build=${BUILD:-build-gpu}
out=${OUT:-/tmp/vulkan-suite}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$PWD/$build/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/vk-cache
t=$build/bin/tessera
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
timeout 300 $t bench --suite vulkan --json "$out/suite.json" 2>&1 | tee "$out/suite.txt" |
  grep -vE "^(of peak|copy|OB-|cuBLASLt \(GPU|others):"
timeout 200 $t check --device vulkan:0 2>&1 | tail -3
timeout 300 $t check --compare cuda:0,vulkan:0 2>&1 | tail -4
