#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds tessera with the CUDA plugin (Release, TESSERA_BACKEND_CUDA=ON) and,
# on cuda:0, runs:
#   1. tessera check (every case),
#   2. compute-sanitizer --tool memcheck over tessera check --quick,
#   3. tessera bench --short,
#   4. tessera bench --suite cuda (bench/suites/cuda-llm.suite): the CUDA
#      acceptance rows, each GEMM row with cuBLASLt timed in the same run
#      on the same buffers (the library is found by the dynamic linker, else
#      TESSERA_CUBLASLT, else the pip copy torch uses:
#      site-packages/nvidia/cublas/lib), row ops against the
#      copy bandwidth, and the verdicts,
#   5. tessera tune on the same shapes (every variant timed; optional),
#   6. PyTorch on the same shapes where it is installed (torch_reference.py):
#      the baseline for attention (SDPA flash / cuDNN) and a cross-check,
# and prints one table last: tessera vs cuBLASLt from the suite, torch
# beside it. Everything it prints is also in $OUT/run.log;
# JSON of check and bench, the tuning rows and the table go to $OUT too
# (OUT defaults to $BUILD_DIR/results).
#
# usage: bench/gpu/run.sh [--no-build] [--no-sanitizer] [--no-tune] [--no-torch]
# env:   BUILD_DIR (default /tmp/tessera-gpu-build), CUDA_ARCHS (default 90a),
#        JOBS (default: all CPUs), CHECK_SECONDS / SANITIZER_SECONDS (300 each),
#        CMAKE_EXTRA_ARGS (more configure arguments, e.g. -DTESSERA_BACKEND_CPU=OFF)
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-/tmp/tessera-gpu-build}
out=${OUT:-$build/results}
archs=${CUDA_ARCHS:-90a}
jobs=${JOBS:-$(nproc)}
do_build=1 do_sanitizer=1 do_tune=1 do_torch=1
for arg in "$@"; do
  case $arg in
  --no-build) do_build=0 ;;
  --no-sanitizer) do_sanitizer=0 ;;
  --no-tune) do_tune=0 ;;
  --no-torch) do_torch=0 ;;
  *)
    echo "usage: $0 [--no-build] [--no-sanitizer] [--no-tune] [--no-torch]" >&2
    exit 2
    ;;
  esac
done
mkdir -p "$out"
log=$out/run.log
table=$out/table.txt
rows=$out/rows.tsv
: >"$log"
: >"$rows"
tessera=$build/bin/tessera
export TESSERA_PLUGIN_PATH=$build/share/tessera/plugins.d

say() { echo "$@" | tee -a "$log"; }
# step NAME SECONDS COMMAND...: runs it (killed after SECONDS) with its output
# in the log; keeps its status (124: timed out).
declare -A status
step() {
  local name=$1 limit=$2
  shift 2
  say "== $name: $*"
  local start=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  status[$name]=$?
  say "   exit ${status[$name]} after $((SECONDS - start)) s"
}

say "tessera GPU run, $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 |
  tee -a "$log"
command -v nvcc >/dev/null && nvcc --version | tail -2 | tee -a "$log"

if [ $do_build = 1 ]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  step configure 120 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTESSERA_BACKEND_CUDA=ON "-DTESSERA_CUDA_ARCHS=$archs" -DBUILD_TESTING=OFF \
    ${CMAKE_EXTRA_ARGS:-}
  step build 400 cmake --build "$build" -j "$jobs"
  if [ "${status[build]}" != 0 ]; then
    tail -40 "$log"
    exit 1
  fi
fi

step devices 30 "$tessera" devices --verbose
step info 30 "$tessera" info cuda:0
sed -n '/^== info/,/^   exit/p' "$log"
step explain 60 "$tessera" explain --device cuda:0 --op gemm --dtype bf16 --shape 4096x4096x4096
step check "${CHECK_SECONDS:-300}" "$tessera" check --device cuda:0 --json "$out/check.json"
sed -n '/^== check/,/^   exit/p' "$log" | tail -60

# Every kernel variant (not only the heuristic's picks) against the fp64
# reference: tests/cuda/cuda_variants.c, built here against the build's
# libtessera.
cc -std=c11 -O2 -D_GNU_SOURCE -I"$root/include" "$root/tests/cuda/cuda_variants.c" \
  -L"$build/lib" -ltessera -lm -Wl,-rpath,"$build/lib" -o "$build/cuda_variants" >>"$log" 2>&1
step variants 240 "$build/cuda_variants"
sed -n '/^== variants/,/^   exit/p' "$log" | grep -E "FAIL|passed|exit" | head -40

if [ $do_sanitizer = 1 ] && command -v compute-sanitizer >/dev/null; then
  step sanitizer "${SANITIZER_SECONDS:-300}" compute-sanitizer --tool memcheck --error-exitcode 99 \
    "$tessera" check --device cuda:0 --quick
  sed -n '/^== sanitizer/,/^   exit/p' "$log" | grep -E "ERROR SUMMARY|Invalid|==|exit" | head -30
  # Shared-memory races in the tiled kernels (cp.async pipelines, reductions).
  for op in gemm grouped_gemm attention rmsnorm softmax cross_entropy rope; do
    step "racecheck_$op" 120 compute-sanitizer --tool racecheck --error-exitcode 99 \
      "$tessera" check --device cuda:0 --quick --op "$op"
    sed -n "/^== racecheck_$op/,/^   exit/p" "$log" | grep -E "RACECHECK SUMMARY|ERROR SUMMARY|exit"
  done
fi

step bench 100 "$tessera" bench --device cuda:0 --short --json "$out/bench.json"
sed -n '/^== bench/,/^   exit/p' "$log" | grep -v "^==\|^   exit"

# cuBLASLt for bench: the system's, else the copy PyTorch's wheels carry.
if [ -z "${TESSERA_CUBLASLT:-}" ] && ! "$tessera" __cublaslt-probe >/dev/null 2>&1; then
  lt=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
  [ -z "$lt" ] && lt=$(find / -path '*site-packages/nvidia/*/lib/libcublasLt.so*' 2>/dev/null | head -1 | xargs -r dirname)
  [ -n "$lt" ] && export TESSERA_CUBLASLT=$lt
fi
say "cuBLASLt for bench: $("$tessera" __cublaslt-probe 2>&1)"
step suite 400 "$tessera" bench --suite cuda --json "$out/suite.json"
sed -n '/^== suite/,/^   exit/p' "$log" | grep -E "^suite|PASS|FAIL|n/a" | tail -30

# tune NAME OP DTYPE SHAPE [--causal]: the fastest variant's row.
tune() {
  local name=$1 op=$2 dtype=$3 shape=$4
  shift 4
  local file=$out/tune.tmp
  timeout 60 "$tessera" tune --device cuda:0 --op "$op" --dtype "$dtype" --shape "$shape" "$@" \
    --db "$out/tuning.tsv" >"$file" 2>&1
  local rc=$?
  cat "$file" >>"$log"
  # variant  median-ms  rate unit  description...
  awk -v name="$name" -v rc="$rc" '
    $2 ~ /^[0-9.]+$/ && $4 ~ /\/s$/ { if (best == "" || $2 + 0 < best + 0) { best = $2; v = $1; r = $3; u = $4 } }
    END { if (best == "") print name "\t-\tfailed(rc=" rc ")\t-\t-"; else print name "\t" v "\t" best "\t" r "\t" u }
  ' "$file" >>"$rows"
  rm -f "$file"
}

if [ $do_tune = 1 ]; then
  say "== tune (every variant; fastest kept)"
  start=$SECONDS
  tune gemm_bf16_4096 gemm bf16 4096x4096x4096
  tune gemm_f16_4096 gemm f16 4096x4096x4096
  tune gemm_bf16_8192 gemm bf16 8192x8192x8192
  tune gemm_bf16_4096x11008x4096 gemm bf16 4096x11008x4096
  tune gemm_bf16_4096x4096x11008 gemm bf16 4096x4096x11008
  tune gemm_bf16_1793 gemm bf16 1793x1793x1793
  tune gemm_f32_4096 gemm f32 4096x4096x4096
  tune gemv_bf16_1x8192x8192 gemm bf16 1x8192x8192
  tune gemm_bf16_16x4096x4096 gemm bf16 16x4096x4096
  tune grouped_bf16_16x32768x2048x4096 grouped_gemm bf16 16x32768x2048x4096
  tune attention_bf16_b4h32s4096d128 attention bf16 4x32x32x4096x4096x128
  tune attention_bf16_b4h32s4096d128_causal attention bf16 4x32x32x4096x4096x128 --causal
  tune attention_bf16_b16h16s1024d64 attention bf16 16x16x16x1024x1024x64
  tune rmsnorm_bf16_16384x8192 rmsnorm bf16 16384x8192
  tune softmax_bf16_16384x8192 softmax bf16 16384x8192
  tune swiglu_bf16_16384x8192 swiglu bf16 16384x8192
  tune rope_bf16_4x4096x32x128 rope bf16 4x4096x32x128
  tune cross_entropy_bf16_16384x8192 cross_entropy bf16 16384x8192
  say "   tune took $((SECONDS - start)) s"
fi

torch_rows=$out/torch.tsv
: >"$torch_rows"
if [ $do_torch = 1 ] && command -v python3 >/dev/null; then
  say "== torch: python3 bench/gpu/torch_reference.py"
  start=$SECONDS
  timeout 240 python3 "$root/bench/gpu/torch_reference.py" >"$torch_rows" 2>>"$log"
  status[torch]=$?
  cat "$torch_rows" >>"$log"
  say "   exit ${status[torch]} after $((SECONDS - start)) s"
fi

{
  echo
  echo "tessera bench --suite cuda on cuda:0: tessera (heuristic's variant) vs cuBLASLt on the same"
  echo "buffers in the same run; torch on the same shapes (its own buffers, same call) beside it"
  python3 - "$out/suite.json" "$out/torch.tsv" <<'PY' || echo "(no suite table: python3 or suite.json missing)"
import json, sys
suite = json.load(open(sys.argv[1]))
torch = {}
try:
    for line in open(sys.argv[2]):
        f = line.rstrip("\n").split("\t")
        if len(f) >= 3 and not f[0].startswith("#"):
            torch[f[0]] = (float(f[1]), f[2])
except OSError:
    pass
def torch_name(r):
    op, dt, shape = r["op"], r["dtype"], r["shape"]
    e = shape.split()[0].split("x")
    if op == "gemm":
        if e[0] == "1" and dt == "bf16":
            return "gemv_bf16_" + shape
        if "tf32" in shape:
            return "gemm_tf32_4096"
        if e[0] == e[1] == e[2]:
            return f"gemm_{dt}_{e[0]}"
        return f"gemm_{dt}_{shape}"
    if op == "attention":
        return "attention_bf16_b4h32s4096d128" + ("_causal" if "causal" in shape else "")
    if op in ("rmsnorm", "softmax"):
        return f"{op}_bf16_{shape}"
    return None
print(f"{'op':13} {'dtype':5} {'shape':30} {'ms':>9} {'rate':>14} {'cuBLASLt ms':>11} {'x LT':>6} {'torch ms':>9} {'x torch':>7}")
for r in suite["rows"]:
    ms = r["median_ms"]
    if ms is None:
        print(f"{r['op']:13} {r['dtype']:5} {r['shape']:30} failed")
        continue
    rate = f"{r['gflops'] / 1e3:.1f} TFLOP/s" if r.get("gflops") else f"{r['gbs']:.0f} GB/s"
    lt = r.get("cublaslt_ms")
    t = torch.get(torch_name(r) or "")
    print(f"{r['op']:13} {r['dtype']:5} {r['shape']:30} {ms:9.4f} {rate:>14} "
          f"{(f'{lt:.4f}' if lt else '-'):>11} {(f'{lt / ms:.2f}' if lt else '-'):>6} "
          f"{(f'{t[0]:.4f}' if t else '-'):>9} {(f'{t[0] / ms:.2f}' if t else '-'):>7}")
print("(x: baseline time / tessera time; > 1 means tessera is faster)")
for c in suite["criteria"]:
    m = c["measured"]
    print(f"  {c['verdict']:4} {c['criterion']}: {('%.2f' % m) if m is not None else '-'} (needs {c['threshold']:g})")
PY
  echo
  echo "tessera on cuda:0 (fastest variant of 'tessera tune') vs PyTorch on the same shapes"
  printf '%-40s %-26s %10s %12s %10s %12s %7s\n' case "tessera variant" "ms" "rate" "torch ms" \
    "torch rate" "ratio"
  while IFS=$'\t' read -r name variant ms rate unit; do
    t_ms=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$torch_rows")
    t_rate=$(awk -F'\t' -v n="$name" '$1 == n { print $3 }' "$torch_rows")
    ratio=-
    if [ -n "$t_ms" ] && [[ $ms =~ ^[0-9.]+$ ]]; then
      ratio=$(awk -v a="$t_ms" -v b="$ms" 'BEGIN { printf "%.2f", a / b }')
    fi
    printf '%-40s %-26s %10s %12s %10s %12s %7s\n' "$name" "$variant" "$ms" "$rate $unit" \
      "${t_ms:--}" "${t_rate:--}" "$ratio"
  done <"$rows"
  copy=$(awk -F'\t' '$1 == "copy_256MiB" { print $3 }' "$torch_rows")
  [ -n "$copy" ] && echo "device copy (torch, read + write): $copy GB/s"
  echo "(ratio: torch time / tessera time; > 1 means tessera is faster)"
  echo
  echo "steps:"
  for name in configure build devices info explain check variants sanitizer racecheck_gemm \
    racecheck_grouped_gemm racecheck_attention racecheck_rmsnorm racecheck_softmax \
    racecheck_cross_entropy racecheck_rope bench suite torch; do
    [ -n "${status[$name]+x}" ] && printf '  %-10s exit %s\n' "$name" "${status[$name]}"
  done
} | tee "$table" | tee -a "$log"

for name in check variants sanitizer racecheck_gemm racecheck_grouped_gemm racecheck_attention \
  racecheck_rmsnorm racecheck_softmax racecheck_cross_entropy racecheck_rope; do
  if [ -n "${status[$name]+x}" ] && [ "${status[$name]}" != 0 ]; then
    exit 1
  fi
done
exit 0
