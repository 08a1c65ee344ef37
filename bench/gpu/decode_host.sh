#!/usr/bin/env bash
# Decode GEMMs on cuda:0 and the host time of an op call, with a build made
# elsewhere (carried to the device). Steps (STEPS, default all):
#   check     tessera check --device cuda:0 (every op), tests/cuda variants
#   host      host_overhead (bench/gpu/host_overhead.c) with this build and,
#             when BASE_LIB is set, with the libraries there (before/after);
#             with lib/libfake_cuda.so (bench/gpu/fake_libcuda.c) also on that
#             stand-in driver: tessera's own share of the host time
#   bench     gemm_bench: single call and 10 queued, decode shapes
#   torch     torch.matmul on the same shapes, single and queued, and a
#             256 MiB device copy for the bandwidth ceiling
# Logs go to $OUT (default /tmp/decode-host); a table prints last.
#
# usage: bench/gpu/decode_host.sh   env: BUILD_DIR (default build-c3, needs
#        bin/tessera, bin/cuda_variants, bin/gemm_bench, bin/host_overhead),
#        BASE_LIB, BASE_PLUGINS (a plugins.d for BASE_LIB's plugin), STEPS
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${BUILD_DIR:-$root/build-c3}" && pwd)
out=${OUT:-/tmp/decode-host}
steps=${STEPS:-check host bench torch}
mkdir -p "$out"
lib=$build/lib
plugins=$build/share/tessera/plugins.d
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TESSERA_PLUGIN_PATH=$plugins
has() { [[ " $steps " == *" $1 "* ]]; }
log=$out/decode_host.log
: >"$log"
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$log"
lscpu | grep -E "Model name" | tee -a "$log"

if has check; then
  timeout 150 "$build/bin/tessera" check --device cuda:0 >"$out/check.txt" 2>&1
  say "check: exit $? $(grep -E 'passed' "$out/check.txt" | tail -1)"
  grep -E "FAIL" "$out/check.txt" | head -5 | tee -a "$log"
  timeout 300 "$build/bin/cuda_variants" >"$out/variants.txt" 2>&1
  say "variants: exit $? $(tail -1 "$out/variants.txt")"
  grep -E "^FAIL" "$out/variants.txt" | head -20 | tee -a "$log"
fi
if has host; then
  if [[ -n "${BASE_LIB:-}" ]]; then
    LD_LIBRARY_PATH=$root/$BASE_LIB TESSERA_PLUGIN_PATH=$root/$BASE_PLUGINS timeout 120 \
      "$build/bin/host_overhead" >"$out/host_base.txt" 2>&1
    say "host_overhead, base ($BASE_LIB): exit $?"
    cat "$out/host_base.txt" | tee -a "$log"
  fi
  timeout 120 "$build/bin/host_overhead" >"$out/host_new.txt" 2>&1
  say "host_overhead, this build: exit $?"
  cat "$out/host_new.txt" | tee -a "$log"
  if [[ -f "$lib/libfake_cuda.so" ]]; then
    # the same calls on a stand-in driver whose calls return at once: tessera's
    # own host time on this CPU (GPU columns meaningless)
    TESSERA_CUDA_DRIVER=$lib/libfake_cuda.so timeout 120 "$build/bin/host_overhead" \
      >"$out/host_fake.txt" 2>&1
    say "host_overhead, this build, fake driver: exit $?"
    cat "$out/host_fake.txt" | tee -a "$log"
  fi
fi

rows=$out/bench.tsv
: >"$rows"
bench() { # bench DTYPE TRANS_B M N K VARIANT...
  local dtype=$1 trans=$2 m=$3 n=$4 k=$5
  shift 5
  GEMM_DTYPE=$dtype GEMM_TRANS_B=$trans timeout 120 "$build/bin/gemm_bench" gemm "$m" "$n" "$k" \
    "$@" >>"$rows" 2>>"$log"
}
if has bench; then
  bench bf16 0 1 8192 8192 heuristic ${BENCH_1_KN:-}
  bench bf16 1 1 8192 8192 heuristic ${BENCH_1_NK:-}
  bench bf16 0 16 4096 4096 heuristic ${BENCH_16_KN:-}
  bench bf16 1 16 4096 4096 heuristic ${BENCH_16_NK:-}
fi

torch_rows=$out/torch.tsv
: >"$torch_rows"
if has torch && command -v python3 >/dev/null; then
  timeout 200 python3 "$root/bench/gpu/torch_matmul.py" bf16,0,1,8192,8192 bf16,1,1,8192,8192 \
    bf16,0,16,4096,4096 bf16,1,16,4096,4096 >"$torch_rows" 2>>"$log"
fi

{
  echo
  printf '%-26s %-24s %8s %8s %8s %8s | %8s %8s\n' case variant single "GB/s" queued "GB/s" \
    torch1 torch10
  copy=$(awk -F'\t' '$1 == "copy_256MiB" { print $3 }' "$torch_rows")
  while IFS=$'\t' read -r name variant single srate queued qrate; do
    # weight bytes: N * K * 2
    dims=${name#gemm_bf16_}
    dims=${dims%_bt}
    IFS=x read -r m n k <<<"$dims"
    bytes=$((n * k * 2))
    t=$(awk -F'\t' -v n="$name" '$1 == n { printf "%s %s", $2, $4 }' "$torch_rows")
    printf '%-26s %-24s %8s %8.0f %8s %8.0f | %s\n' "$name" "$variant" "$single" \
      "$(awk -v b="$bytes" -v t="$single" 'BEGIN { print b / t / 1e6 }')" "$queued" \
      "$(awk -v b="$bytes" -v t="$queued" 'BEGIN { print b / t / 1e6 }')" "${t:--}"
  done <"$rows"
  [[ -n "$copy" ]] && echo "copy 256 MiB: $copy TB/s (85% of it: $(awk -v c="$copy" 'BEGIN { print c * 0.85 }'))"
  echo "(ms per call; GB/s: weight bytes N*K*2 over the time; single: events around one call,"
  echo " queued: 10 back to back; torch1 / torch10: torch.matmul single / queued ms)"
} | tee -a "$log"
