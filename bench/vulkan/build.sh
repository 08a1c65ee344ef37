#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the cooperative-matrix microbenchmark: every shader variant (glslc, GL_NV_cooperative_matrix),
# checked with spirv-val, and coopmat_peak itself, all into one folder.
#
# usage: bench/vulkan/build.sh [OUTDIR]      (default bench/vulkan/out)
# env:   CC (default cc), CFLAGS (default -std=c11 -O2 -Wall -Wextra -Werror)
# needs: glslc (shaderc; Debian 12's 2023.2 has GL_NV_cooperative_matrix, not the KHR one),
#        spirv-val (spirv-tools), a C compiler, the Vulkan headers (libvulkan-dev)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/out}
mkdir -p "$out"

# name, source and glslc defines of each variant (see the sources' headers):
# mma.comp multiplies fragments held in registers, mma_load.comp loads them
# from shared memory in the loop (as the GEMM does)
variants=(
  "mma_16x16x16_named4        mma.comp      -DNACC=4"
  "mma_16x16x16_named8        mma.comp      -DNACC=8"
  "mma_16x8x16_named8         mma.comp      -DNACC=8 -DMMA_N=8"
  "mma_16x16x16_array8        mma.comp      -DNACC=8 -DACC_ARRAY=1"
  "mma_16x16x16_f16acc_named8 mma.comp      -DNACC=8 -DACC_BITS=16"
  "mma_load_f16               mma_load.comp -DSH_UVEC4=0 -DB_COLMAJOR=0"
  "mma_load_uvec4             mma_load.comp -DSH_UVEC4=1 -DB_COLMAJOR=0"
  "mma_load_f16_bcol          mma_load.comp -DSH_UVEC4=0 -DB_COLMAJOR=1"
  "mma_load_uvec4_bcol        mma_load.comp -DSH_UVEC4=1 -DB_COLMAJOR=1"
  "mma_load16_uvec4           mma_load.comp -DSH_UVEC4=1 -DB_COLMAJOR=0 -DB_N=16"
  "mma_load16_uvec4_bcol      mma_load.comp -DSH_UVEC4=1 -DB_COLMAJOR=1 -DB_N=16"
  "mma_gload_uvec4            mma_load.comp -DSH_UVEC4=1 -DB_COLMAJOR=0 -DSRC_GLOBAL=1"
  "mma_gload_uvec4_bcol       mma_load.comp -DSH_UVEC4=1 -DB_COLMAJOR=1 -DSRC_GLOBAL=1"
)
for v in "${variants[@]}"; do
  read -r name source defines <<<"$v"
  # shellcheck disable=SC2086  # the defines are separate words
  glslc --target-env=vulkan1.2 -O $defines "$here/$source" -o "$out/$name.spv"
done
glslc --target-env=vulkan1.2 -O "$here/fma_f32_peak.comp" -o "$out/fma_f32_peak.spv"

for spv in "$out"/*.spv; do
  spirv-val --target-env vulkan1.2 "$spv"
done

# shellcheck disable=SC2086  # CFLAGS is a list of flags
${CC:-cc} ${CFLAGS:--std=c11 -O2 -Wall -Wextra -Werror} -o "$out/coopmat_peak" \
  "$here/coopmat_peak.c" -ldl
echo "built coopmat_peak and the shaders (SPIR-V valid) in $out"
