#!/usr/bin/env bash
# Attention on cuda:0 in one call of the device machine: builds the CUDA
# plugin alone (sm_90a, no PTX, no CPU backend), checks attention against the
# fp64 reference (tessera check; tests/cuda/cuda_variants.c, every listed
# variant), optionally runs compute-sanitizer over the quick check, times
# every attention variant with `tessera tune` on the acceptance shapes and
# PyTorch's scaled_dot_product_attention (flash, cuDNN) on the same shapes in
# the same run, and prints one table last. Logs, tune output and SASS of the
# flash kernels go to $OUT.
#
# usage: bench/gpu/attention.sh
# env:   OUT (default /tmp/attn-results), BUILD_DIR (default /tmp/tessera-attn-build),
#        PREBUILT (a build directory made elsewhere, e.g. carried: used as is,
#        no build here; nvcc on the device machine takes about 90 s),
#        SANITIZE=1 (memcheck + racecheck), VARIANTS=0 (skip cuda_variants),
#        TORCH=0 (skip the PyTorch rows),
#        SHAPES ("NAME DTYPE SHAPE [--causal]" lines; default the acceptance shapes)
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/attn-results}
build=${PREBUILT:-${BUILD_DIR:-/tmp/tessera-attn-build}}
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p "$out"
log=$out/attention.log
: >"$log"
tessera=$build/bin/tessera
export TESSERA_PLUGIN_PATH=$build/share/tessera/plugins.d

say() { echo "$@" | tee -a "$log"; }
step() {
  local limit=$1
  shift
  say "== $*"
  local start=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  say "   exit $rc after $((SECONDS - start)) s"
  return $rc
}

say "attention run, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw --format=csv,noheader |
  tee -a "$log"

if [ -z "${PREBUILT:-}" ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  step 120 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_BACKEND_CUDA=ON -DTESSERA_CUDA_ARCHS=90a -DTESSERA_CUDA_PTX=OFF \
    -DTESSERA_BACKEND_CPU=OFF -DBUILD_TESTING=OFF || exit 1
  step 300 cmake --build "$build" -j "$(nproc)" || {
    tail -40 "$log"
    exit 1
  }
fi

fatbin=$build/backends/cuda/tessera_cuda_kernels.fatbin
if command -v cuobjdump >/dev/null; then
  cuobjdump -res-usage "$fatbin" 2>/dev/null | grep -A1 "attention_flash_bf16" >"$out/resources.txt"
  for k in tsr_attention_wgmma_bf16_d128_192x64_o0 tsr_attention_flash_bf16_d128_128x64_w4; do
    cuobjdump -sass -fun "$k" "$fatbin" >"$out/$k.sass" 2>&1
    printf '%s: HMMA %s LDSM %s MUFU.EX2 %s STL %s LDL %s\n' "$k" \
      "$(grep -c HMMA "$out/$k.sass")" "$(grep -c LDSM "$out/$k.sass")" \
      "$(grep -c MUFU.EX2 "$out/$k.sass")" "$(grep -c STL "$out/$k.sass")" \
      "$(grep -c LDL "$out/$k.sass")" | tee -a "$log"
  done
fi

step 60 "$tessera" check --device cuda:0 --op attention
check_rc=$?
grep -E "attention|passed|FAIL" "$log" | tail -5
variants_rc=-
if [ "${VARIANTS:-1}" = 1 ]; then
  variants=$build/bin/cuda_variants
  if [ ! -x "$variants" ]; then
    variants=$build/cuda_variants
    cc -std=c11 -O2 -D_GNU_SOURCE -I"$root/include" "$root/tests/cuda/cuda_variants.c" \
      -L"$build/lib" -ltessera -lm -Wl,-rpath,"$build/lib" -o "$variants" >>"$log" 2>&1
  fi
  step 90 "$variants"
  variants_rc=$?
  sed -n '/cuda_variants$/,$p' "$log" | grep -E "FAIL|passed" | head -20
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  step 120 compute-sanitizer --tool memcheck --error-exitcode 99 "$tessera" check \
    --device cuda:0 --quick --op attention
  grep "ERROR SUMMARY" "$log" | tail -1
  step 120 compute-sanitizer --tool racecheck --error-exitcode 99 "$tessera" check \
    --device cuda:0 --quick --op attention
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$log" | tail -1
fi

default_shapes="b4h32s4096d128 bf16 4x32x32x4096x4096x128
b4h32s4096d128_causal bf16 4x32x32x4096x4096x128 --causal
b16h16s1024d64 bf16 16x16x16x1024x1024x64
b16h16s1024d64_causal bf16 16x16x16x1024x1024x64 --causal"
rows=$out/tune_rows.tsv
: >"$rows"
while read -r name dtype shape causal; do
  [ -z "$name" ] && continue
  file=/tmp/attn_tune_$name.txt
  timeout 60 "$tessera" tune --device cuda:0 --op attention --dtype "$dtype" --shape "$shape" \
    $causal --db /tmp/attn_tuning.tsv >"$file" 2>&1
  cat "$file" >>"$log"
  # variant  median-ms  rate unit ...: every flash variant's rate, then the fastest.
  awk -v name="$name" '$2 ~ /^[0-9.]+$/ && $4 ~ /\/s$/ { print name "\t" $1 "\t" $2 "\t" $3 }' \
    "$file" >>"$rows"
done <<<"${SHAPES:-$default_shapes}"

torch_rows=$out/torch.tsv
: >"$torch_rows"
if [ "${TORCH:-1}" = 1 ] && python3 -c "import torch" 2>/dev/null; then
  say "== torch scaled_dot_product_attention (bench/gpu/torch_reference.py's timing)"
  timeout 120 python3 - "$root/bench/gpu/torch_reference.py" >"$torch_rows" 2>>"$log" <<'EOF'
import sys
source = open(sys.argv[1]).read().replace("\nmain()\n", "\n")
exec(source)
from torch.nn.attention import SDPBackend
for backend, tag in ((SDPBackend.FLASH_ATTENTION, "fa2"), (SDPBackend.CUDNN_ATTENTION, "cudnn")):
    attention(f"b4h32s4096d128\t{tag}", 4, 32, 4096, 128, False, backend)
    attention(f"b4h32s4096d128_causal\t{tag}", 4, 32, 4096, 128, True, backend)
    attention(f"b16h16s1024d64\t{tag}", 16, 16, 1024, 64, False, backend)
    attention(f"b16h16s1024d64_causal\t{tag}", 16, 16, 1024, 64, True, backend)
EOF
  cat "$torch_rows" >>"$log"
fi

{
  echo
  echo "attention bf16 on cuda:0: every tessera variant (tune median) and torch SDPA, TFLOP/s"
  echo "(tessera counts causal as half the flops; torch_reference.py counts s(s+1)/2)"
  awk -F'\t' '{ printf "%-24s %-30s %9s ms %8s\n", $1, $2, $3, $4 }' "$rows"
  awk -F'\t' '{ printf "%-24s torch %-24s %9s ms %8s\n", $1, $2, $3, $4 }' "$torch_rows"
  echo "check exit $check_rc, cuda_variants exit $variants_rc"
} | tee "$out/table.txt" | tee -a "$log"
