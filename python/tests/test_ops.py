# SPDX-License-Identifier: Apache-2.0
"""Every op against a float64 NumPy reference, on cpu:0 and every Vulkan
device, in f32, f16 and bf16 (bf16 as uint16 bit patterns)."""
import unittest

import numpy as np

import support
from support import tessera


class OpTestCase(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng(1234)

    def cases(self):
        """(device, dtype, copy) for every device under test and float dtype it has."""
        for device in support.devices_under_test():
            copy = support.copy_mode(device)
            for dtype in support.FLOAT_DTYPES:
                if dtype in device.dtypes:
                    yield device, dtype, copy

    def assertClose(self, result, reference, dtype, tolerance=None):
        error = support.relative_error(support.values_of(result, dtype), reference)
        self.assertLess(error, tolerance or support.TOLERANCE[dtype])


class GemmTest(OpTestCase):
    def test_plain_and_epilogues(self):
        for device, dtype, copy in self.cases():
            for activation in (None, "relu", "gelu_tanh", "gelu_erf", "silu"):
                with self.subTest(device=device.selector, dtype=dtype, activation=activation):
                    a, a64 = support.make(self.rng, (17, 24), dtype)
                    b, b64 = support.make(self.rng, (24, 9), dtype)
                    bias, bias64 = support.make(self.rng, (9,), dtype)
                    d = tessera.gemm(a, b, bias=bias, alpha=0.5, activation=activation,
                                     device=device, copy=copy)
                    reference = support.ACTIVATIONS[activation](0.5 * a64 @ b64 + bias64)
                    self.assertEqual(support.values_of(d, dtype).shape, (17, 9))
                    self.assertClose(d, reference, dtype)

    def test_transposed_views_batch_and_accumulate(self):
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                at, at64 = support.make(self.rng, (3, 24, 16), dtype)  # a = at^T per batch
                b, b64 = support.make(self.rng, (24, 8), dtype)  # shared across the batch
                a = (tessera.bfloat16(at.array.transpose(0, 2, 1)) if dtype == "bf16"
                     else at.transpose(0, 2, 1))
                d = tessera.gemm(a, b, device=device, copy=copy)
                reference = at64.transpose(0, 2, 1) @ b64
                self.assertClose(d, reference, dtype)
                # out += a @ b (beta = 1 on out itself)
                c, c64 = support.make(self.rng, (3, 16, 8), dtype)
                result = tessera.gemm(a, b, out=c, accumulate=True, device=device, copy=copy)
                self.assertIs(result, c)
                self.assertClose(c.array if dtype == "bf16" else c, reference + c64, dtype)

    def test_f32_output_of_16_bit_inputs(self):
        for device, dtype, copy in self.cases():
            if dtype == "f32":
                continue
            with self.subTest(device=device.selector, dtype=dtype):
                a, a64 = support.make(self.rng, (8, 32), dtype)
                b, b64 = support.make(self.rng, (32, 8), dtype)
                c = np.asarray(self.rng.standard_normal((8, 8)), np.float32)
                d = tessera.gemm(a, b, c=c, beta=2.0, out_dtype="f32", device=device, copy=copy)
                self.assertEqual(d.dtype, np.float32)
                self.assertClose(d, a64 @ b64 + 2.0 * c, "f32", 1e-5)


class GroupedGemmTest(OpTestCase):
    def test_groups(self):
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                sizes = [5, 0, 11, 3]
                a, a64 = support.make(self.rng, (sum(sizes), 16), dtype)
                b, b64 = support.make(self.rng, (len(sizes), 16, 12), dtype)
                bias, bias64 = support.make(self.rng, (len(sizes), 12), dtype)
                d = tessera.grouped_gemm(a, b, sizes, bias=bias, activation="relu",
                                         device=device, copy=copy)
                reference, start = np.zeros((sum(sizes), 12)), 0
                for group, size in enumerate(sizes):
                    rows = slice(start, start + size)
                    reference[rows] = np.maximum(a64[rows] @ b64[group] + bias64[group], 0)
                    start += size
                self.assertClose(d, reference, dtype)


class AttentionTest(OpTestCase):
    def test_variants_of_masking_and_gqa(self):
        settings = [dict(), dict(causal=True), dict(scale=0.3, window_left=3),
                    dict(causal=True, window_left=2)]
        for device, dtype, copy in self.cases():
            for options in settings:
                with self.subTest(device=device.selector, dtype=dtype, **options):
                    q, q64 = support.make(self.rng, (2, 5, 4, 16), dtype)
                    k, k64 = support.make(self.rng, (2, 7, 2, 16), dtype)
                    v, v64 = support.make(self.rng, (2, 7, 2, 16), dtype)
                    o, lse = tessera.attention(q, k, v, return_lse=True, device=device,
                                               copy=copy, **options)
                    o_ref, lse_ref = support.attention(q64, k64, v64, **options)
                    self.assertClose(o, o_ref, dtype)
                    self.assertEqual(lse.dtype, np.float32)
                    self.assertClose(lse, lse_ref, "f32", support.TOLERANCE[dtype])

    def test_serving_forms(self):
        """Packed prefill, then decode against a paged cache filled by kv_append
        (blocks in shuffled order), with softcap; each sequence against the dense
        reference of its own slice."""
        lengths, hq, hkv, d, block = [3, 0, 9], 4, 2, 16, 8
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                total = sum(lengths)
                cu = np.array([0] + list(np.cumsum(lengths)), np.int32)
                q, q64 = support.make(self.rng, (total, hq, d), dtype)
                k, k64 = support.make(self.rng, (total, hkv, d), dtype)
                v, v64 = support.make(self.rng, (total, hkv, d), dtype)
                o, lse = tessera.attention(q, k, v, causal=True, cu_seqlens_q=cu,
                                           cu_seqlens_kv=cu, max_seqlen_q=9, max_seqlen_kv=9,
                                           softcap=3.0, return_lse=True, device=device,
                                           copy=copy)
                o = support.values_of(o, dtype)
                for b, (start, end) in enumerate(zip(cu[:-1], cu[1:])):
                    if start == end:
                        continue
                    o_ref, lse_ref = support.attention(q64[None, start:end], k64[None, start:end],
                                                       v64[None, start:end], causal=True,
                                                       softcap=3.0)
                    self.assertLess(support.relative_error(o[start:end], o_ref[0]),
                                    support.TOLERANCE[dtype])
                    self.assertLess(support.relative_error(lse[:, start:end], lse_ref[0]),
                                    support.TOLERANCE[dtype])

                # The same keys appended into a shuffled paged cache, then one
                # decode query per sequence.
                blocks = 6
                cache_shape = (blocks, block, hkv, d)
                zeros = np.zeros(cache_shape, np.float64)
                k_cache, _ = support.make(self.rng, cache_shape, dtype, 0.0)
                v_cache, _ = support.make(self.rng, cache_shape, dtype, 0.0)
                table = np.array([[4, 1], [0, 0], [2, 5]], np.int32)
                slots = np.array([table[b, j // block] * block + j % block
                                  for b, n in enumerate(lengths) for j in range(n)], np.int32)
                tessera.kv_append(k, k_cache, slots, v_new=v, v_cache=v_cache, device=device,
                                  copy=copy)
                kc = support.values_of(k_cache.array if dtype == "bf16" else k_cache, dtype)
                self.assertLess(support.relative_error(kc[4, :3], k64[0:3]), 1e-12)
                self.assertEqual(np.count_nonzero(kc[3]), np.count_nonzero(zeros[3]))
                qd, qd64 = support.make(self.rng, (len(lengths), 1, hq, d), dtype)
                seqlens = np.array(lengths, np.int32)
                od = tessera.attention(qd, k_cache, v_cache, block_table=table,
                                       seqlens_kv=seqlens, device=device, copy=copy)
                od = support.values_of(od, dtype)
                for b, (start, end) in enumerate(zip(cu[:-1], cu[1:])):
                    if start == end:
                        self.assertFalse(np.any(od[b]))  # no keys: o = 0
                        continue
                    o_ref, _ = support.attention(qd64[b:b + 1], k64[None, start:end],
                                                 v64[None, start:end])
                    self.assertLess(support.relative_error(od[b], o_ref[0]),
                                    support.TOLERANCE[dtype])

    def test_bhsd_view(self):
        device = tessera.device("cpu:0")
        q = self.rng.standard_normal((1, 3, 6, 8)).astype(np.float32)  # B H S D
        k = self.rng.standard_normal((1, 3, 6, 8)).astype(np.float32)
        v = self.rng.standard_normal((1, 3, 6, 8)).astype(np.float32)
        views = [x.transpose(0, 2, 1, 3) for x in (q, k, v)]  # BSHD views of BHSD data
        o = tessera.attention(*views, causal=True, device=device,
                              copy=support.copy_mode(device))
        reference, _ = support.attention(*(x.astype(np.float64) for x in views), causal=True)
        self.assertClose(o, reference, "f32")


class NormTest(OpTestCase):
    def test_rmsnorm_with_residual(self):
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                x, x64 = support.make(self.rng, (3, 5, 64), dtype)
                residual, residual64 = support.make(self.rng, (3, 5, 64), dtype)
                weight = np.asarray(self.rng.standard_normal(64), np.float32)  # f32 weight
                y, h = tessera.rmsnorm(x, weight, residual=residual, residual_out=True,
                                       eps=1e-5, device=device, copy=copy)
                self.assertClose(h, x64 + residual64, dtype)
                self.assertClose(y, support.rmsnorm(x64 + residual64, weight, 1e-5), dtype)
                plain = tessera.rmsnorm(x, device=device, copy=copy)
                self.assertClose(plain, support.rmsnorm(x64), dtype)

    def test_layernorm(self):
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                x, x64 = support.make(self.rng, (7, 48), dtype, scale=3.0)
                weight, weight64 = support.make(self.rng, (48,), dtype)
                bias, bias64 = support.make(self.rng, (48,), dtype)
                y = tessera.layernorm(x, weight, bias, eps=1e-4, device=device, copy=copy)
                self.assertClose(y, support.layernorm(x64, weight64, bias64, 1e-4), dtype)

    def test_softmax(self):
        for device, dtype, copy in self.cases():
            for scale in (None, 0.25):
                with self.subTest(device=device.selector, dtype=dtype, scale=scale):
                    x, x64 = support.make(self.rng, (4, 3, 40), dtype)
                    y = tessera.softmax(x, scale=scale, device=device, copy=copy)
                    self.assertClose(y, support.softmax(x64 * (scale or 1.0)), dtype)


class ElementwiseTest(OpTestCase):
    def test_rope_styles_and_in_place(self):
        for device, dtype, copy in self.cases():
            for style, rotary_dim in (("neox", None), ("gptj", 8)):
                with self.subTest(device=device.selector, dtype=dtype, style=style):
                    x, x64 = support.make(self.rng, (2, 6, 3, 16), dtype)
                    y = tessera.rope(x, position_offset=5, theta=500.0, rotary_dim=rotary_dim,
                                     style=style, device=device, copy=copy)
                    reference = support.rope(x64, 5, 500.0, rotary_dim, style)
                    self.assertClose(y, reference, dtype)
                    tessera.rope(x, position_offset=5, theta=500.0, rotary_dim=rotary_dim,
                                 style=style, out=x, device=device, copy=copy)
                    self.assertClose(x.array if dtype == "bf16" else x, reference, dtype)

    def test_swiglu_and_gelu(self):
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                gate, gate64 = support.make(self.rng, (6, 33), dtype)
                up, up64 = support.make(self.rng, (6, 33), dtype)
                y = tessera.swiglu(gate, up, device=device, copy=copy)
                self.assertClose(y, support.silu(gate64) * up64, dtype)
                self.assertClose(tessera.gelu(gate, device=device, copy=copy),
                                 support.gelu_erf(gate64), dtype)
                self.assertClose(tessera.gelu(gate, approximate="tanh", device=device,
                                              copy=copy), support.gelu_tanh(gate64), dtype)

    def test_cross_entropy(self):
        for device, dtype, copy in self.cases():
            with self.subTest(device=device.selector, dtype=dtype):
                logits, logits64 = support.make(self.rng, (9, 50), dtype, scale=2.0)
                targets = self.rng.integers(0, 50, 9).astype(np.int32)
                targets[3] = -1
                loss, lse = tessera.cross_entropy(logits, targets, ignore_index=-1,
                                                  return_lse=True, device=device, copy=copy)
                loss_ref, lse_ref = support.cross_entropy(logits64, targets, ignore_index=-1)
                self.assertEqual(loss.dtype, np.float32)
                self.assertEqual(loss[3], 0.0)
                self.assertClose(loss, loss_ref, "f32", support.TOLERANCE[dtype])
                self.assertClose(lse, lse_ref, "f32", support.TOLERANCE[dtype])


if __name__ == "__main__":
    unittest.main()
