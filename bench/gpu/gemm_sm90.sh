#!/usr/bin/env bash
# The sm_90a wgmma GEMM on cuda:0, in one call: builds for sm_90a only, then
#   sass      HGMMA / local-memory counts of the wgmma kernels (cuobjdump)
#   check     tessera check --op gemm and --op grouped_gemm (heuristic picks)
#   variants  tests/cuda/cuda_variants (every listed variant vs fp64)
#   sanitizer compute-sanitizer memcheck over tessera check --quick
#   tune      tessera tune on the acceptance shapes (every variant timed)
#   grouped   bench/gpu/gemm_bench.c: 64 experts (beyond the CLI's 16)
#   host      bench/gpu/gemm_bench.c: one call vs 10 queued (host work exposed)
#   ksweep    tessera tune at 4096x4096xK, K = 1024..16384 (per-tile overhead)
#   torch     torch.matmul (cuBLAS) on the same shapes, and a loop of
#             per-expert matmuls for the grouped shapes
# and prints a short table last. Logs go to $OUT (default /tmp/gemm-sm90).
#
# usage: bench/gpu/gemm_sm90.sh        env: STEPS (default: all of the above),
#        BUILD_DIR (default /tmp/tessera-gemm-sm90), SHAPES (tune shapes)
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:-/tmp/gemm-sm90}
build=${BUILD_DIR:-/tmp/tessera-gemm-sm90}
steps=${STEPS:-sass check variants sanitizer tune grouped host ksweep torch}
shapes=${SHAPES:-4096x4096x4096 8192x8192x8192 4096x11008x4096 4096x4096x11008}
mkdir -p "$out"
log=$out/gemm_sm90.log
: >"$log"
tessera=$build/bin/tessera
export TESSERA_PLUGIN_PATH=$build/share/tessera/plugins.d
has() { [[ " $steps " == *" $1 "* ]]; }
say() { echo "$@" | tee -a "$log"; }
run() { # run SECONDS COMMAND...: output to the log, status printed
  local limit=$1
  shift
  say "== $*"
  local start=$SECONDS
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  say "   exit $rc after $((SECONDS - start)) s"
  return $rc
}

say "gemm_sm90 run $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm \
  --format=csv,noheader 2>&1)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
run 120 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DTESSERA_BACKEND_CUDA=ON -DTESSERA_CUDA_ARCHS=90a -DTESSERA_CUDA_PTX=OFF -DBUILD_TESTING=ON \
  -DTESSERA_BACKEND_CPU=OFF
if ! run 400 cmake --build "$build" -j "$(nproc)"; then
  grep -E "error|rror:" "$log" | head -30
  exit 1
fi

if has sass && command -v cuobjdump >/dev/null; then
  fatbin=$(find "$build" -name 'tessera_cuda_kernels.fatbin' | head -1)
  cuobjdump -sass "$fatbin" >"$out/kernels.sass" 2>>"$log"
  awk '/Function : / { name = $3 } name ~ /wgmma/ && /HGMMA/ { h[name]++ }
       name ~ /wgmma/ && /(LDL|STL)/ { l[name]++ }
       END { for (n in h) printf "sass %-40s HGMMA %d, LDL/STL %d\n", n, h[n], l[n] }' \
    "$out/kernels.sass" | sort | tee -a "$log"
fi

if has check; then
  run 200 "$tessera" check --device cuda:0 --op gemm
  grep -E "FAIL|passed|failed" "$log" | tail -8
  run 120 "$tessera" check --device cuda:0 --op grouped_gemm
  grep -E "FAIL|passed|failed" "$log" | tail -4
fi
if has variants; then
  run 300 "$build/bin/cuda_variants"
  grep -E "^FAIL|passed" "$log" | head -40
fi
if has sanitizer && command -v compute-sanitizer >/dev/null; then
  run 300 compute-sanitizer --tool memcheck --error-exitcode 99 "$tessera" check --device cuda:0 \
    --quick
  grep -E "ERROR SUMMARY|passed" "$log" | tail -3
  for op in gemm grouped_gemm; do
    run 120 compute-sanitizer --tool racecheck --error-exitcode 99 "$tessera" check \
      --device cuda:0 --quick --op $op
    grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$log" | tail -1
  done
fi

rows=$out/rows.tsv
: >"$rows"
if has tune; then
  for shape in $shapes; do
    for dtype in bf16 f16; do
      [ "$dtype" = f16 ] && [ "$shape" != 4096x4096x4096 ] && continue
      file=$out/tune_${dtype}_$shape.txt
      timeout 120 "$tessera" tune --device cuda:0 --op gemm --dtype $dtype --shape "$shape" \
        --db "$out/tuning.tsv" >"$file" 2>&1
      cat "$file" >>"$log"
      awk -v name="gemm_${dtype}_$shape" '$2 ~ /^[0-9.]+$/ && $4 ~ /\/s$/ {
          if (best == "" || $2 + 0 < best + 0) { best = $2; v = $1; r = $3 }
          if ($1 ~ /^mma_/ && (mb == "" || $2 + 0 < mb + 0)) { mb = $2; mr = $3 } }
        END { printf "%s\t%s\t%s\t%s\t%s\n", name, v, best, r, mr }' "$file" >>"$rows"
    done
  done
  for shape in ${GROUPED_SHAPES:-16x32768x2048x4096}; do
    file=$out/tune_grouped_$shape.txt
    timeout 120 "$tessera" tune --device cuda:0 --op grouped_gemm --dtype bf16 --shape "$shape" \
      --db "$out/tuning.tsv" >"$file" 2>&1
    cat "$file" >>"$log"
    awk -v name="grouped_bf16_$shape" '$2 ~ /^[0-9.]+$/ && $4 ~ /\/s$/ {
        if (best == "" || $2 + 0 < best + 0) { best = $2; v = $1; r = $3 }
        if ($1 ~ /^mma_/ && (mb == "" || $2 + 0 < mb + 0)) { mb = $2; mr = $3 } }
      END { printf "%s\t%s\t%s\t%s\t%s\n", name, v, best, r, mr }' "$file" >>"$rows"
  done
fi

cc -std=c11 -O2 -D_GNU_SOURCE -I"$root/include" "$root/bench/gpu/gemm_bench.c" \
  -L"$build/lib" -ltessera -Wl,-rpath,"$build/lib" -o "$build/gemm_bench" >>"$log" 2>&1
if has host; then
  for shape in 4096x4096x1024 4096x4096x4096 8192x8192x8192; do
    IFS=x read -r m n k <<<"$shape"
    timeout 60 "$build/gemm_bench" gemm "$m" "$n" "$k" wgmma_128x256x64_s4_ws_p 2>&1 |
      sed 's/^/host /' | tee -a "$log"
  done
fi
if has grouped; then
  for shape in ${GROUPED_BENCH:-64x32768x2048x4096}; do
    IFS=x read -r g t n k <<<"$shape"
    timeout 120 "$build/gemm_bench" grouped "$g" "$t" "$n" "$k" wgmma_128x256x64_s4_ws_p \
      wgmma_128x128x64_s6_ws_p mma_64x128x32_w2x2_s4 >"$out/grouped_bench.txt" 2>>"$log"
    cat "$out/grouped_bench.txt" | tee -a "$log"
    awk -F'\t' '{ if (best == "" || $3 + 0 < best + 0) { best = $3; v = $2; r = $4; name = $1 } }
      $2 ~ /^mma_/ { mr = $4 } END { if (best != "") printf "%s\t%s\t%s\t%s\t%s\n", name, v, best, r, mr }' \
      "$out/grouped_bench.txt" >>"$rows"
  done
fi
if has ksweep; then
  for k in 1024 2048 4096 8192 16384; do
    timeout 60 "$tessera" tune --device cuda:0 --op gemm --dtype bf16 --shape 4096x4096x$k \
      --db "$out/tuning.tsv" 2>&1 | awk -v k=$k '$1 ~ /^wgmma/ { print "ksweep 4096x4096x" k, $1, $2, $3 }' |
      tee -a "$log"
  done
  for shape in 1024x1024x1024 2048x2048x2048 16x4096x4096 4096x4096x4096; do
    "$tessera" explain --device cuda:0 --op gemm --dtype bf16 --shape $shape 2>&1 | head -3 >>"$log"
  done
fi

torch_rows=$out/torch.tsv
: >"$torch_rows"
if has torch && command -v python3 >/dev/null; then
  SHAPES="$shapes" GROUPED_SHAPES="${GROUPED_SHAPES:-16x32768x2048x4096} ${GROUPED_BENCH:-64x32768x2048x4096}" \
    timeout 200 python3 - >"$torch_rows" 2>>"$log" <<'EOF'
import os, torch
def median_ms(fn, sets, warmup=3, repeat=20):
    for i in range(warmup):
        fn(sets[i % len(sets)])
    times = []
    for i in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(sets[i % len(sets)]); b.record(); b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]
for shape in os.environ["SHAPES"].split():
    m, n, k = map(int, shape.split("x"))
    for dt, name in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        if name == "f16" and shape != "4096x4096x4096":
            continue
        sets = [(torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt))
                for _ in range(2)]
        ms = median_ms(lambda s: torch.matmul(*s), sets)
        print(f"gemm_{name}_{shape}\t{ms:.4f}\t{2.0 * m * n * k / ms / 1e9:.1f}", flush=True)
        if name == "bf16" and shape in ("4096x4096x4096", "8192x8192x8192"):
            def queued(s):
                for _ in range(10):
                    torch.matmul(*s)
            qms = median_ms(queued, sets) / 10
            print(f"queued_gemm_{name}_{shape}\t{qms:.4f}\t{2.0 * m * n * k / qms / 1e9:.1f}", flush=True)
        del sets
for shape in os.environ["GROUPED_SHAPES"].split():
    g, t, n, k = map(int, shape.split("x"))
    rows = t // g
    sets = [(torch.randn(t, k, device="cuda", dtype=torch.bfloat16),
             torch.randn(g, k, n, device="cuda", dtype=torch.bfloat16)) for _ in range(2)]
    def loop(s):
        a, b = s
        for e in range(g):
            torch.matmul(a[e * rows:(e + 1) * rows], b[e])
    ms = median_ms(loop, sets, warmup=2, repeat=10)
    print(f"grouped_bf16_{shape}\t{ms:.4f}\t{2.0 * t * n * k / ms / 1e9:.1f}", flush=True)
EOF
fi

{
  echo
  printf '%-34s %-26s %9s %9s %9s %9s %7s\n' case "tessera best" ms TFLOP/s "best mma" \
    "torch" "ratio"
  while IFS=$'\t' read -r name variant ms rate mma_rate; do
    t_ms=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$torch_rows")
    t_rate=$(awk -F'\t' -v n="$name" '$1 == n { print $3 }' "$torch_rows")
    ratio=-
    [ -n "$t_ms" ] && [ -n "$ms" ] && ratio=$(awk -v a="$t_ms" -v b="$ms" 'BEGIN { printf "%.2f", a / b }')
    printf '%-34s %-26s %9s %9s %9s %9s %7s\n' "$name" "$variant" "$ms" "$rate" "${mma_rate:--}" \
      "${t_rate:--}" "$ratio"
  done <"$rows"
  echo "(rates in TFLOP/s; ratio = torch ms / tessera ms; torch: cuBLAS via torch.matmul,"
  echo " grouped: a loop of per-expert torch.matmul)"
} | tee -a "$log"
