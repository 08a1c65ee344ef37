"""torch.matmul timings for the GEMM scripts (gemm_small.sh, decode_host.sh):
each case single (events around one call) and queued (10 calls back to back,
per call), medians over two rotated input sets; then a 256 MiB device copy,
the bandwidth ceiling (bytes read + written).

usage: python3 torch_matmul.py CASE...   CASE: dtype,trans_b,M,N,K with dtype
       bf16, f32 (strict) or tf32 (allow_tf32), trans_b 1: B stored [N][K]
prints: gemm_<dtype>_<M>x<N>x<K>[_bt] single_ms TFLOP/s queued_ms TFLOP/s,
        then copy_256MiB ms TB/s (tab-separated)"""
import sys

import torch


def median_ms(fn, sets, calls=1, warmup=3, repeat=15):
    for i in range(warmup):
        fn(sets[i % len(sets)])
    times = []
    for i in range(repeat):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for c in range(calls):
            fn(sets[(i + c) % len(sets)])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / calls)
    return sorted(times)[len(times) // 2]


for case in sys.argv[1:]:
    name, trans, m, n, k = case.split(",")
    trans, m, n, k = int(trans), int(m), int(n), int(k)
    dt = torch.bfloat16 if name == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = name == "tf32"

    def operands():
        b = torch.randn(n, k, device="cuda", dtype=dt).t() if trans else \
            torch.randn(k, n, device="cuda", dtype=dt)
        return (torch.randn(m, k, device="cuda", dtype=dt), b)

    sets = [operands() for _ in range(2)]
    fn = lambda s: torch.matmul(*s)
    single = median_ms(fn, sets)
    queued = median_ms(fn, sets, calls=10)
    flops = 2.0 * m * n * k
    print(f"gemm_{name}_{m}x{n}x{k}{'_bt' if trans else ''}\t{single:.4f}\t{flops / single / 1e9:.1f}"
          f"\t{queued:.4f}\t{flops / queued / 1e9:.1f}", flush=True)
    del sets
x = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
y = torch.empty_like(x)
ms = median_ms(lambda s: y.copy_(x), [None], repeat=20)
print(f"copy_256MiB\t{ms:.4f}\t{2 * (256 << 20) / ms / 1e9:.1f}", flush=True)
