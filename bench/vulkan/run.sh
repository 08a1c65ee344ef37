#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs coopmat_peak on every shader that build.sh made, with each one's FLOP count.
#
# usage: bench/vulkan/run.sh [OUTDIR] [coopmat_peak options: --device N --groups N --iters N ...]
# env:   FMA_ITERS: loop count of fma_f32_peak (default 32768: ~10 ms on an H100, which does
#        ~60 TFLOP/s of f32; the coopmat shaders use --iters, default 16384)
#
# FLOP per workgroup per iteration: a workgroup is 4 subgroups of 32 (local size 128);
# a 16x16x16 MulAdd is 2*16*16*16 = 8192 FLOP per subgroup, a 16x8x16 one 4096.
#   named4:  4 MulAdds * 8192 * 4 subgroups = 131072
#   named8, array8, f16acc_named8: 8 * 8192 * 4 = 262144
#   16x8x16 named8: 8 * 4096 * 4 = 131072
#   fma_f32_peak: 128 invocations * 16 vec4 FMAs * 4 lanes * 2 = 16384
#   mma_load_*: 32 16x8x16 MulAdds * 4096 * 4 subgroups = 524288 (4096 iterations)
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$here/out
if [[ $# -gt 0 && $1 != -* ]]; then
  out=$1
  shift
fi
exec "$out/coopmat_peak" "$@" \
  "$out/mma_16x16x16_named4.spv:131072" \
  "$out/mma_16x16x16_named8.spv:262144" \
  "$out/mma_16x8x16_named8.spv:131072" \
  "$out/mma_16x16x16_array8.spv:262144" \
  "$out/mma_16x16x16_f16acc_named8.spv:262144" \
  "$out/mma_load_f16.spv:524288:4096" \
  "$out/mma_load_uvec4.spv:524288:4096" \
  "$out/mma_load_f16_bcol.spv:524288:4096" \
  "$out/mma_load_uvec4_bcol.spv:524288:4096" \
  "$out/mma_load16_uvec4.spv:524288:4096" \
  "$out/mma_load16_uvec4_bcol.spv:524288:4096" \
  "$out/mma_gload_uvec4.spv:524288:4096" \
  "$out/mma_gload_uvec4_bcol.spv:524288:4096" \
  "$out/fma_f32_peak.spv:16384:${FMA_ITERS:-32768}"
