# SPDX-License-Identifier: Apache-2.0
"""PyTorch (and CuPy) CUDA tensors: every op on the caller's non-default
stream with no synchronisation before it, compared with torch's own float64
results; zero-copy out=; export to torch. Skips without torch + CUDA + a
tessera cuda device."""
import math
import unittest

import support
from support import tessera

try:
    import torch
    import torch.nn.functional as F
    HAVE_TORCH_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_TORCH_CUDA = False
try:
    import cupy
    HAVE_CUPY = cupy.cuda.runtime.getDeviceCount() > 0
except Exception:  # not installed, or no driver
    HAVE_CUPY = False


def _tessera_has_cuda():
    return any(device.backend == "cuda" for device in tessera.devices())


TOLERANCE = {"f32": 3e-5, "f16": 3e-3, "bf16": 2e-2}


def relative_error(actual, reference):
    actual, reference = actual.double(), reference.double()
    return (torch.linalg.vector_norm(actual - reference)
            / torch.linalg.vector_norm(reference).clamp_min(1e-30)).item()


@unittest.skipUnless(HAVE_TORCH_CUDA, "needs torch with a CUDA device")
class TorchCudaTest(unittest.TestCase):
    def setUp(self):
        if not _tessera_has_cuda():
            self.skipTest("tessera has no cuda device")
        self.dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
        self.generator = torch.Generator(device="cuda").manual_seed(11)
        self.stream = torch.cuda.Stream()

    def randn(self, *shape, dtype):
        # Made on the side stream: tessera must order after this work itself.
        return torch.randn(*shape, device="cuda", generator=self.generator).to(dtype)

    def check(self, actual, reference, name):
        torch.cuda.synchronize()
        self.assertLess(relative_error(actual, reference), TOLERANCE[name])

    def test_gemm_and_grouped_gemm(self):
        for name, dtype in self.dtypes.items():
            with self.subTest(dtype=name), torch.cuda.stream(self.stream):
                a = self.randn(3, 256, 128, dtype=dtype)
                b = self.randn(128, 192, dtype=dtype)
                bias = self.randn(192, dtype=dtype)
                d = tessera.gemm(a, b, bias=bias, activation="gelu_tanh")
                self.assertIsInstance(d, torch.Tensor)
                self.assertEqual(d.device, a.device)
                reference = F.gelu(a.double() @ b.double() + bias.double(), approximate="tanh")
                self.check(d, reference, name)
                at = self.randn(96, 64, dtype=dtype)
                d2 = tessera.gemm(at.t(), self.randn(96, 32, dtype=dtype).contiguous())
                self.assertEqual(tuple(d2.shape), (64, 32))
                sizes = [7, 0, 25]
                ga = self.randn(32, 64, dtype=dtype)
                gb = self.randn(3, 64, 16, dtype=dtype)
                gd = tessera.grouped_gemm(ga, gb, sizes)
                reference = torch.cat([ga[0:7].double() @ gb[0].double(),
                                       ga[7:32].double() @ gb[2].double()])
                self.check(gd, reference, name)

    def test_attention(self):
        for name, dtype in self.dtypes.items():
            with self.subTest(dtype=name), torch.cuda.stream(self.stream):
                q = self.randn(2, 64, 8, 64, dtype=dtype)
                k = self.randn(2, 96, 2, 64, dtype=dtype)
                v = self.randn(2, 96, 2, 64, dtype=dtype)
                o, lse = tessera.attention(q, k, v, causal=True, return_lse=True)
                qd, kd, vd = (x.double().transpose(1, 2) for x in (q, k, v))
                kd, vd = kd.repeat_interleave(4, dim=1), vd.repeat_interleave(4, dim=1)
                scores = qd @ kd.transpose(-1, -2) / math.sqrt(64)
                positions = torch.arange(64, device="cuda")[:, None] + 96 - 64
                mask = torch.arange(96, device="cuda")[None, :] > positions
                scores = scores.masked_fill(mask, float("-inf"))
                reference = (torch.softmax(scores, -1) @ vd).transpose(1, 2)
                self.check(o, reference, name)
                self.check(lse, torch.logsumexp(scores, -1), name)

    def test_norms_softmax_and_elementwise(self):
        for name, dtype in self.dtypes.items():
            with self.subTest(dtype=name), torch.cuda.stream(self.stream):
                x = self.randn(4, 32, 512, dtype=dtype)
                residual = self.randn(4, 32, 512, dtype=dtype)
                weight = self.randn(512, dtype=dtype)
                bias = self.randn(512, dtype=dtype)
                y, h = tessera.rmsnorm(x, weight, residual=residual, residual_out=True, eps=1e-6)
                hd = x.double() + residual.double()
                self.check(h, hd, name)
                self.check(y, hd * torch.rsqrt(hd.pow(2).mean(-1, keepdim=True) + 1e-6)
                           * weight.double(), name)
                self.check(tessera.layernorm(x, weight, bias),
                           F.layer_norm(x.double(), (512,), weight.double(), bias.double()), name)
                self.check(tessera.softmax(x, scale=0.5), torch.softmax(0.5 * x.double(), -1), name)
                self.check(tessera.swiglu(x, residual), F.silu(x.double()) * residual.double(),
                           name)
                self.check(tessera.gelu(x, approximate="tanh"),
                           F.gelu(x.double(), approximate="tanh"), name)
                self.check(tessera.gelu(x), F.gelu(x.double()), name)

    def test_rope_in_place(self):
        for name, dtype in self.dtypes.items():
            with self.subTest(dtype=name), torch.cuda.stream(self.stream):
                x = self.randn(2, 16, 4, 64, dtype=dtype)
                xd = x.double()
                half = 32
                steps = torch.arange(16, device="cuda", dtype=torch.float64)
                positions = (3 + steps)[None, :, None, None]
                angles = positions * 10000.0 ** (-2.0 * torch.arange(half, device="cuda",
                                                                     dtype=torch.float64) / 64)
                first, second = xd[..., :half], xd[..., half:]
                reference = torch.cat([first * angles.cos() - second * angles.sin(),
                                       second * angles.cos() + first * angles.sin()], -1)
                self.assertIs(tessera.rope(x, position_offset=3, out=x), x)
                self.check(x, reference, name)

    def test_cross_entropy(self):
        for name, dtype in self.dtypes.items():
            with self.subTest(dtype=name), torch.cuda.stream(self.stream):
                logits = self.randn(64, 1000, dtype=dtype)
                targets = torch.randint(0, 1000, (64,), device="cuda", dtype=torch.int32)
                targets[5] = -100
                loss = tessera.cross_entropy(logits, targets)
                reference = F.cross_entropy(logits.double(), targets.long(), reduction="none",
                                            ignore_index=-100)
                self.check(loss, reference, name)

    def test_zero_copy_out_and_export(self):
        with torch.cuda.stream(self.stream):
            x = self.randn(8, 128, dtype=torch.float32)
            out = torch.full((8, 128), float("nan"), device="cuda")
            pointer = out.data_ptr()
            self.assertIs(tessera.softmax(x, out=out), out)
            self.assertEqual(out.data_ptr(), pointer)
            self.check(out, torch.softmax(x.double(), -1), "f32")
        tensor = tessera.empty((4, 4), "f32", tessera.device_for(x))
        first, second = torch.from_dlpack(tensor), torch.from_dlpack(tensor)
        self.assertEqual(first.data_ptr(), second.data_ptr())
        self.assertEqual(first.device, x.device)


@unittest.skipUnless(HAVE_CUPY, "needs CuPy with a CUDA device")
class CupyTest(unittest.TestCase):
    def setUp(self):
        if not _tessera_has_cuda():
            self.skipTest("tessera has no cuda device")

    def test_gemm_and_softmax_on_a_side_stream(self):
        import numpy as np
        with cupy.cuda.Stream(non_blocking=True):
            a = cupy.random.standard_normal((128, 64), dtype=cupy.float32)
            b = cupy.random.standard_normal((64, 32), dtype=cupy.float32)
            d = tessera.gemm(a, b)
            s = tessera.softmax(a)
            self.assertIsInstance(d, cupy.ndarray)
            cupy.cuda.get_current_stream().synchronize()
        a64, b64 = cupy.asnumpy(a).astype(np.float64), cupy.asnumpy(b).astype(np.float64)
        self.assertLess(support.relative_error(cupy.asnumpy(d), a64 @ b64), 3e-5)
        self.assertLess(support.relative_error(cupy.asnumpy(s), support.softmax(a64)), 3e-5)


if __name__ == "__main__":
    unittest.main()
