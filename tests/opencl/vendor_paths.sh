#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Compiles rows.cl's vendor paths with clang, for devices no machine here has:
# Intel's sub-group reductions (cl_intel_subgroups) and NVIDIA's inline PTX
# (warp shuffles, f16 words), each in every dtype and cache layout. A syntax
# or type error there would otherwise surface only on such a device. NVIDIA's
# path also runs for real on the GPU machine; Intel's only compiles here.
# Usage: vendor_paths.sh KERNEL_DIR. Exit 77 (skip) without clang.
set -eu
kernels=$1
clang=${CLANG:-clang}
command -v "$clang" >/dev/null || { echo "no $clang: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The program text as program.c assembles it: feature macros, then
# opencl_types.h, the params headers (sorted), common.cl, then the source.
program() { # FP16 SUBGROUPS INTEL WARP CLASS NV_SM SOURCE
  printf '#define TSR_CL_DEVICE_FP16 %s\n#define TSR_CL_DEVICE_SUBGROUPS %s\n' "$1" "$2"
  printf '#define TSR_CL_DEVICE_INTEL_SUBGROUPS %s\n#define TSR_CL_DEVICE_WARP %s\n' "$3" "$4"
  printf '#define TSR_CL_DEVICE_CLASS %s\n#define TSR_CL_DEVICE_NV_SM %s\n' "$5" "$6"
  [ "$1" = 1 ] && printf '#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n'
  cat "$kernels/opencl_types.h"
  for header in $(ls "$kernels"/params_*.h | sort); do cat "$header"; done
  cat "$kernels/common.cl" "$kernels/$7"
}

# class codes: opencl_class in opencl_internal.h (1 NVIDIA, 3 Intel)
program 1 1 1 0 3 0 rows.cl >"$work/intel.cl"
program 0 0 0 32 1 90 rows.cl >"$work/nvidia.cl"
intel=(-target spir64 -cl-std=CL2.0 -Xclang -cl-ext=+cl_khr_fp16,+cl_intel_subgroups,+cl_khr_subgroups)
nvidia=(-target nvptx64-nvidia-nvcl -cl-std=CL1.2 -Xclang -cl-ext=+cl_khr_fp16)
failures=0
# dtype, work items, cached units, vector width, and rmsnorm/layernorm flags
for layout in "256 8 4" "128 4 8" "64 0 8" "32 2 1" "256 0 1"; do
  read -r threads items vec <<<"$layout"
  for dtype in 1 2 3; do
    for target in intel nvidia; do
      for flags in "" "-DTSR_ROW_FLAGS=3 -DTSR_ROW_PARAMS_UNIT=1"; do
        [ "$target" = intel ] && args=("${intel[@]}") || args=("${nvidia[@]}")
        # shellcheck disable=SC2086
        if ! "$clang" "${args[@]}" -Xclang -finclude-default-header -O1 -c -emit-llvm \
          -Werror -DTSR_DTYPE=$dtype -DTSR_THREADS=$threads -DTSR_ITEMS=$items \
          -DTSR_VEC=$vec $flags "$work/$target.cl" -o "$work/out.bc"; then
          echo "FAILED: $target dtype $dtype threads $threads items $items vec $vec $flags"
          failures=$((failures + 1))
        fi
      done
    done
  done
done
# The paths must be the ones compiled: the builtins and the PTX are there.
"$clang" "${intel[@]}" -Xclang -finclude-default-header -O1 -S -emit-llvm -DTSR_DTYPE=1 \
  -DTSR_THREADS=256 -DTSR_ITEMS=8 -DTSR_VEC=4 "$work/intel.cl" -o "$work/intel.ll"
grep -q "sub_group_reduce_add" "$work/intel.ll" || { echo "FAILED: no sub_group_reduce_add on Intel"; failures=$((failures + 1)); }
"$clang" "${nvidia[@]}" -Xclang -finclude-default-header -O1 -S -emit-llvm -DTSR_DTYPE=2 \
  -DTSR_THREADS=256 -DTSR_ITEMS=4 -DTSR_VEC=8 "$work/nvidia.cl" -o "$work/nvidia.ll"
for ptx in shfl.sync.bfly.b32 cvt.f32.f16 cvt.rn.f16x2.f32; do
  grep -q "$ptx" "$work/nvidia.ll" || { echo "FAILED: no $ptx on NVIDIA"; failures=$((failures + 1)); }
done
echo "vendor paths: $failures failures"
[ "$failures" = 0 ]
