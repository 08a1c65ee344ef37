#!/usr/bin/env bash
# Vulkan attention on an NVIDIA GPU (build-gpu with the CUDA and Vulkan
# plugins, the Vulkan loader carried in .gl): the heuristic's choice, the
# coopmat pipelines' compiler statistics, check of attention on vulkan:0 and
# against cuda:0, suite vulkan's attention rows (the CUDA plugin's beside
# them), and tune's timings of every variant of the f16 D128 row.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=$PWD/build-gpu/lib TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d
export XDG_CACHE_HOME=/tmp/vk-cache
t=build-gpu/bin/tessera
shape=4x32x32x4096x4096x128
timeout 60 $t explain --device vulkan:0 --op attention --dtype f16 --shape $shape 2>&1 | sed -n 2,5p
timeout 200 $t check --device vulkan:0 --op attention 2>&1 | tail -1
timeout 200 $t check --compare cuda:0,vulkan:0 --op attention 2>&1 | tail -1
TESSERA_VULKAN_PIPELINE_STATS=1 TESSERA_LOG=info timeout 200 $t bench --suite vulkan --op attention \
  2>&1 | grep -E "^attention|^vulkan:0|^cuda:0|pipeline attention_coopmat" | cut -c1-300
[[ -n ${NO_TUNE:-} ]] || timeout 200 $t tune --device vulkan:0 --op attention --dtype f16 --shape $shape --db /tmp/t.tsv 2>&1 | tail -12
