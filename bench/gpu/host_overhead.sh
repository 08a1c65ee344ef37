#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Host instructions per tsr_gemm + tsr_rmsnorm pair on the CUDA plugin's op
# path, without a GPU: host_overhead runs N and 2N pairs (16x4096x4096 bf16
# GEMM, 16x4096 RMSNorm) through the stand-in driver of tests/cuda (every
# launch a no-op) under callgrind; (I(2N) - I(N)) / N is the steady-state
# count, setup and teardown cancelling out.
#
# usage: bench/gpu/host_overhead.sh [BUILD_DIR [N]]   (default build, 1000)
# needs: valgrind; a build with the CUDA plugin and BUILD_TESTING (the tree's
# default), which makes bin/host_overhead and tests/cuda/libtessera-fake-cuda.so
set -euo pipefail
build=$(realpath "${1:-build}")
pairs=${2:-1000}
driver=$build/tests/cuda/libtessera-fake-cuda.so
for f in "$build/bin/host_overhead" "$driver" "$build/tests/cuda/plugins.d/cuda.conf"; do
  [ -e "$f" ] || { echo "missing $f (build with the CUDA plugin and tests)" >&2; exit 2; }
done
export TESSERA_PLUGIN_PATH=$build/tests/cuda/plugins.d TESSERA_CUDA_DRIVER=$driver
export TESSERA_TUNING_DB=/dev/null TESSERA_CONFIG= TESSERA_LOG=warn
instructions() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/bin/host_overhead" cuda:0 "$1" \
    2>&1 >/dev/null | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
one=$(instructions "$pairs")
two=$(instructions $((2 * pairs)))
echo "host instructions per tsr_gemm + tsr_rmsnorm pair: $(((two - one) / pairs))" \
  "(callgrind, $pairs vs $((2 * pairs)) pairs, CUDA plugin through the stand-in driver)"
