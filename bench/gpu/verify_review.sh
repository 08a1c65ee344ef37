set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export LD_LIBRARY_PATH=$PWD/build-gpu/lib TESSERA_PLUGIN_PATH=$PWD/build-gpu/share/tessera/plugins.d XDG_CACHE_HOME=/tmp/c9
t=build-gpu/bin/tessera
timeout 300 build-gpu/bin/cuda_variants > $OUT/variants.txt 2>&1; echo "cuda_variants exit $? $(tail -1 $OUT/variants.txt)"; grep ^FAIL $OUT/variants.txt | head
$t check --device cuda:0 --op gemm | tail -1
compute-sanitizer --tool memcheck $t check --device cuda:0 --quick --op gemm 2>&1 | grep "ERROR SUMMARY"
for shape in 1x8192x8192 16x4096x4096; do $t bench --suite cuda --op gemm --shape $shape 2>&1 | grep -E "^gemm|GB/s of the weights"; done
$t check --device vulkan:0 --op gemm | tail -1; $t check --device vulkan:0 --op grouped_gemm | tail -1
for v in coopmat_64x64x32_2x2 coopmat_128x64x32_2x2 coopmat_128x128x32_2x2 coopmat_128x128x32_2x4; do TESSERA_CONFIG=gemm:$v $t check --device vulkan:0 --op gemm --dtype f16 | tail -1 | sed "s/^/$v /"; done
$t tune --device vulkan:0 --op gemm --dtype f16 --shape 4096x4096x4096 --db /tmp/t.tsv 2>&1 | grep "^coopmat" | cut -c1-60
$t tune --device vulkan:0 --op gemm --dtype f16 --shape 4096x4096x4096 --db /tmp/t.tsv 2>&1 | grep "^coopmat" | cut -c1-60
