# SPDX-License-Identifier: Apache-2.0
"""PyTorch on the same shapes as bench/gpu/run.sh's tessera rows, for a
baseline in the same run: torch.matmul (cuBLAS), scaled_dot_product_attention
(flash and cuDNN backends), rms_norm, softmax and a device copy. Medians of
CUDA-event timings after warm-up, over two rotated random input sets.
Prints one tab-separated line per row: name, milliseconds, rate, unit."""
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("# PyTorch not installed: no torch baseline", file=sys.stderr)
    sys.exit(0)
if not torch.cuda.is_available():
    print("# PyTorch sees no GPU: no torch baseline", file=sys.stderr)
    sys.exit(0)


def median_ms(run, sets, warmup=3, repeat=20):
    for i in range(warmup):
        run(sets[i % len(sets)])
    times = []
    for i in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(sets[i % len(sets)])
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def emit(name, ms, amount, unit):
    rate = amount / (ms * 1e-3) / (1e12 if unit == "TFLOP/s" else 1e9)
    print(f"{name}\t{ms:.4f}\t{rate:.2f}\t{unit}", flush=True)


def matmul(name, m, n, k, dtype, tf32=False):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    sets = [(torch.randn(m, k, device="cuda", dtype=dtype), torch.randn(k, n, device="cuda", dtype=dtype))
            for _ in range(2)]
    emit(name, median_ms(lambda s: torch.matmul(*s), sets), 2.0 * m * n * k, "TFLOP/s")
    torch.backends.cuda.matmul.allow_tf32 = False


def attention(name, b, h, s, d, causal, backend):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sets = [tuple(torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            for _ in range(2)]
    flops = 4.0 * b * h * d * (s * (s + 1) / 2 if causal else s * s)
    try:
        with sdpa_kernel(backend):
            ms = median_ms(lambda t: F.scaled_dot_product_attention(*t, is_causal=causal), sets)
        emit(name, ms, flops, "TFLOP/s")
    except RuntimeError as error:
        print(f"# {name}: {error}".splitlines()[0], file=sys.stderr)


def rows(name, fn, r, n, streams):
    sets = [torch.randn(r, n, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    emit(name, median_ms(fn, sets), streams * r * n * 2.0, "GB/s")


# The lengths tessera's SHAPE option lens=LO-HI draws (tools/problem_attention.c,
# attention_skewed_lengths) for the serving suite's rows.
DECODE_LENS = [2701, 3934, 1872, 7274, 3057, 4025, 3153, 7600, 2492, 1593, 3785, 7814, 2902,
               642, 890, 8099, 2610, 2980, 4382, 7120, 3607, 4757, 2755, 7327, 2406, 2716, 4900,
               7312, 702, 3886, 4352, 7947]
PREFILL_LENS = [910, 877, 2019, 3430, 1552, 423, 2346, 3417, 1143, 911, 1194, 3458, 1588, 1468,
                1301, 3627]


def serving():
    """SDPA on the padded dense batch of the serving suite's rows: decode (one
    query per sequence, GQA 32/8, keys padded to the longest and masked by
    length) reported in GB/s of the key/value bytes the sequences use, as
    tessera's rows count them; causal prefill padded to the longest, in
    TFLOP/s of the sequences' own causal work."""
    b, hq, hkv, d = len(DECODE_LENS), 32, 8, 128
    longest = max(DECODE_LENS)
    lens = torch.tensor(DECODE_LENS, device="cuda")
    mask = (torch.arange(longest, device="cuda")[None, :] < lens[:, None])[:, None, None, :]
    sets = [(torch.randn(b, hq, 1, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, hkv, longest, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, hkv, longest, d, device="cuda", dtype=torch.bfloat16))
            for _ in range(2)]
    kv_bytes = 2.0 * 2.0 * sum(DECODE_LENS) * hkv * d
    try:
        ms = median_ms(lambda t: F.scaled_dot_product_attention(*t, attn_mask=mask,
                                                                enable_gqa=True), sets)
        emit("serving_decode_padded_sdpa", ms, kv_bytes, "GB/s")
    except (RuntimeError, TypeError) as error:
        print(f"# serving_decode_padded_sdpa: {error}".splitlines()[0], file=sys.stderr)
    b, longest = len(PREFILL_LENS), max(PREFILL_LENS)
    sets = [(torch.randn(b, hq, longest, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, hkv, longest, d, device="cuda", dtype=torch.bfloat16),
             torch.randn(b, hkv, longest, d, device="cuda", dtype=torch.bfloat16))
            for _ in range(2)]
    flops = 4.0 * hq * d * sum(n * (n + 1) / 2 for n in PREFILL_LENS)
    try:
        ms = median_ms(lambda t: F.scaled_dot_product_attention(*t, is_causal=True,
                                                                enable_gqa=True), sets)
        emit("serving_prefill_padded_sdpa", ms, flops, "TFLOP/s")
    except (RuntimeError, TypeError) as error:
        print(f"# serving_prefill_padded_sdpa: {error}".splitlines()[0], file=sys.stderr)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "serving":
        serving()
        return
    from torch.nn.attention import SDPBackend
    size = 1 << 28
    src, dst = torch.empty(size, dtype=torch.uint8, device="cuda"), torch.empty(size, dtype=torch.uint8, device="cuda")
    emit("copy_256MiB", median_ms(lambda s: dst.copy_(s), [src]), 2.0 * size, "GB/s")
    matmul("gemm_bf16_4096", 4096, 4096, 4096, torch.bfloat16)
    matmul("gemm_f16_4096", 4096, 4096, 4096, torch.float16)
    matmul("gemm_bf16_8192", 8192, 8192, 8192, torch.bfloat16)
    matmul("gemm_bf16_4096x11008x4096", 4096, 11008, 4096, torch.bfloat16)
    matmul("gemm_bf16_4096x4096x11008", 4096, 4096, 11008, torch.bfloat16)
    matmul("gemm_bf16_1793", 1793, 1793, 1793, torch.bfloat16)
    matmul("gemm_f32_4096", 4096, 4096, 4096, torch.float32)
    matmul("gemm_tf32_4096", 4096, 4096, 4096, torch.float32, tf32=True)
    matmul("gemv_bf16_1x8192x8192", 1, 8192, 8192, torch.bfloat16)
    matmul("gemm_bf16_16x4096x4096", 16, 4096, 4096, torch.bfloat16)
    attention("attention_bf16_b4h32s4096d128", 4, 32, 4096, 128, False, SDPBackend.FLASH_ATTENTION)
    attention("attention_bf16_b4h32s4096d128_causal", 4, 32, 4096, 128, True, SDPBackend.FLASH_ATTENTION)
    attention("attention_bf16_b16h16s1024d64", 16, 16, 1024, 64, False, SDPBackend.FLASH_ATTENTION)
    attention("cudnn_attention_bf16_b4h32s4096d128", 4, 32, 4096, 128, False, SDPBackend.CUDNN_ATTENTION)
    rows("rmsnorm_bf16_16384x8192", lambda x: F.rms_norm(x, (x.shape[-1],)), 16384, 8192, 2)
    rows("softmax_bf16_16384x8192", lambda x: torch.softmax(x, -1), 16384, 8192, 2)


main()
