#!/usr/bin/env bash
set -uo pipefail
build=build-gpu
export LD_LIBRARY_PATH=$PWD/$build/lib
export TESSERA_PLUGIN_PATH=$PWD/$build/share/tessera/plugins.d
t=$build/bin/tessera
row() { # label env...
  local label=$1; shift
  for shape in 16x4096x4096 1x8192x8192; do
    env "$@" timeout 60 $t bench --suite cuda --op gemm --shape $shape 2>&1 | grep -E "^gemm|GB/s of the weights" | awk -v l="$label" '/^gemm/{ms=$4} /weights/{print l, $4, ms, $(NF-4)}'
  done
}
row "off" TESSERA_CUDA_OVERLAP=0
for sp in 0 1 2; do
  row "off split=$sp" TESSERA_CUDA_OVERLAP=0 TSR_EXP_SPLIT=$sp
  for pf in 16 32 64 9999; do
    for tr in 0 1; do
      row "on split=$sp pf=$pf tr=$tr" TSR_EXP_SPLIT=$sp TSR_EXP_PREFETCH=$pf TSR_EXP_TRIGGER=$tr
    done
  done
done
row "off" TESSERA_CUDA_OVERLAP=0
