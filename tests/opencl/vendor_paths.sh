#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Compiles the kernels' vendor paths with clang, for devices no machine here
# has: rows.cl's Intel sub-group reductions (cl_intel_subgroups) and NVIDIA's
# inline PTX (warp shuffles, f16 words), each in every dtype and cache
# layout; and the attention programs (flash, generic, split-KV decode with
# its warp shuffles and f16 words, every serving layout) and kv_append on
# both targets. A syntax or type error there would otherwise surface only on
# such a device. NVIDIA's path also runs for real on the GPU machine; Intel's
# only compiles here.
# Usage: vendor_paths.sh KERNEL_DIR. Exit 77 (skip) without clang.
set -eu
kernels=$1
clang=${CLANG:-clang}
command -v "$clang" >/dev/null || { echo "no $clang: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The program text as program.c assembles it: feature macros, then
# opencl_types.h, the params headers (sorted), common.cl, then the sources
# (attention programs open with attention_common.cl).
program() { # FP16 SUBGROUPS INTEL WARP CLASS NV_SM SOURCE...
  printf '#define TSR_CL_DEVICE_FP16 %s\n#define TSR_CL_DEVICE_SUBGROUPS %s\n' "$1" "$2"
  printf '#define TSR_CL_DEVICE_INTEL_SUBGROUPS %s\n#define TSR_CL_DEVICE_WARP %s\n' "$3" "$4"
  printf '#define TSR_CL_DEVICE_CLASS %s\n#define TSR_CL_DEVICE_NV_SM %s\n' "$5" "$6"
  [ "$1" = 1 ] && printf '#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n'
  cat "$kernels/opencl_types.h"
  for header in $(ls "$kernels"/params_*.h | sort); do cat "$header"; done
  cat "$kernels/common.cl"
  shift 6
  for source in "$@"; do cat "$kernels/$source"; done
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

# Attention and kv_append: TARGET PROGRAM then options, one compile each.
compile() {
  local target=$1 file=$2
  shift 2
  [ "$target" = intel ] && args=("${intel[@]}") || args=("${nvidia[@]}")
  if ! "$clang" "${args[@]}" -Xclang -finclude-default-header -O1 -c -emit-llvm -Werror "$@" \
    "$work/$file" -o "$work/out.bc"; then
    echo "FAILED: $target $file $*"
    failures=$((failures + 1))
  fi
}
for target in intel nvidia; do
  [ "$target" = intel ] && features="1 1 1 0 3 0" || features="0 0 0 32 1 90"
  # shellcheck disable=SC2086
  program $features attention_common.cl attention.cl >"$work/$target-attention.cl"
  # shellcheck disable=SC2086
  program $features attention_common.cl attention_decode.cl >"$work/$target-decode.cl"
  # shellcheck disable=SC2086
  program $features kv_append.cl >"$work/$target-kv_append.cl"
done
serving_layouts=("" "-DTSR_ATT_SERVING=1 -DTSR_ATT_PACKED_Q=1 -DTSR_ATT_KV=1"
  "-DTSR_ATT_SERVING=1 -DTSR_ATT_KV=2 -DTSR_ATT_SEQLENS=1 -DTSR_ATT_SOFTCAP=1")
for dtype in 1 2 3; do
  for target in intel nvidia; do
    compile $target $target-kv_append.cl -DTSR_DTYPE=$dtype -DTSR_KV_THREADS=64
    for serving in "${serving_layouts[@]}"; do
      # shellcheck disable=SC2086
      compile $target $target-attention.cl -DTSR_DTYPE=$dtype -DTSR_ATT_THREADS=64 \
        -DTSR_ATT_CPT=4 $serving
      # shellcheck disable=SC2086
      compile $target $target-attention.cl -DTSR_DTYPE=$dtype -DTSR_ATT_FLASH -DTSR_ATT_DP=128 \
        -DTSR_ATT_BQ=16 -DTSR_ATT_BKV=32 -DTSR_ATT_RQ=2 -DTSR_ATT_TPR=8 -DTSR_ATT_VQ=1 \
        -DTSR_ATT_VK=1 -DTSR_ATT_VV=0 -DTSR_ATT_VO=1 -DTSR_ATT_SPLIT=0 $serving
      # dp, rows, keys per step, work items, vector access, split
      for layout in "64 1 4 128 2 0" "128 4 2 128 2 1" "256 8 1 128 1 1" "128 2 4 64 0 0"; do
        read -r dp rt nb wg vec split <<<"$layout"
        # shellcheck disable=SC2086
        compile $target $target-decode.cl -DTSR_DTYPE=$dtype -DTSR_ATT_DECODE -DTSR_ATT_DP=$dp \
          -DTSR_ATT_RT=$rt -DTSR_ATT_NB=$nb -DTSR_ATT_WG=$wg -DTSR_ATT_VQ=$vec -DTSR_ATT_VK=$vec \
          -DTSR_ATT_VV=$vec -DTSR_ATT_SPLIT=$split $serving
      done
    done
    compile $target $target-attention.cl -DTSR_DTYPE=$dtype -DTSR_ATT_FLASH -DTSR_ATT_DP=64 \
      -DTSR_ATT_BQ=64 -DTSR_ATT_BKV=32 -DTSR_ATT_RQ=4 -DTSR_ATT_TPR=8 -DTSR_ATT_SPLIT=1
  done
done
# Decode's NVIDIA path: warp shuffles and f16 words converted by cvt.
"$clang" "${nvidia[@]}" -Xclang -finclude-default-header -O1 -S -emit-llvm -DTSR_DTYPE=2 \
  -DTSR_ATT_DECODE -DTSR_ATT_DP=128 -DTSR_ATT_RT=4 -DTSR_ATT_NB=2 -DTSR_ATT_WG=128 \
  -DTSR_ATT_VQ=2 -DTSR_ATT_VK=2 -DTSR_ATT_VV=2 -DTSR_ATT_SPLIT=1 "$work/nvidia-decode.cl" \
  -o "$work/decode.ll"
for ptx in shfl.sync.bfly.b32 cvt.f32.f16; do
  grep -q "$ptx" "$work/decode.ll" || { echo "FAILED: no $ptx in NVIDIA decode"; failures=$((failures + 1)); }
done
echo "vendor paths: $failures failures"
[ "$failures" = 0 ]
