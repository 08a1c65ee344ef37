# SPDX-License-Identifier: Apache-2.0
"""Bad input raises the tessera.Error subclass of its tsr_status, carrying the
library's own sentence (tsr_last_error())."""
import unittest

import numpy as np

import support
from support import tessera


class FakeGpuArray:
    """Claims to live on CUDA device 0 (which this host may not have)."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, max_version=None):
        raise AssertionError("never asked for memory: the device lookup fails first")


class OpenClMemory:
    """A NumPy array whose DLPack capsule claims OpenCL memory (device type 4),
    which no tessera device can use in place and the package cannot copy."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None, max_version=None):
        capsule = self.array.__dlpack__()
        _, managed, _ = tessera._dlpack.managed_from_capsule(capsule)
        managed.dl_tensor.device.device_type = 4
        return capsule

    def __dlpack_device__(self):
        return (4, 0)


class ErrorTest(unittest.TestCase):
    def setUp(self):
        self.cpu = tessera.device("cpu:0")
        self.copy = support.copy_mode(self.cpu)
        self.rng = np.random.default_rng(5)

    def test_dtypes_that_do_not_fit(self):
        a = np.ones((4, 3), np.float32)
        b = np.ones((3, 2), np.float16)
        with self.assertRaisesRegex(tessera.DtypeMismatch, r"^tsr_gemm: .*dtype") as caught:
            tessera.gemm(a, b, copy=self.copy)
        self.assertEqual(caught.exception.status_name, "TSR_ERROR_DTYPE_MISMATCH")
        self.assertIsInstance(caught.exception, ValueError)

    def test_dtype_tessera_has_not(self):
        with self.assertRaisesRegex(tessera.Error, "(?i)dtype|float|code 2, 64 bits") as caught:
            tessera.softmax(np.ones((2, 3), np.float64), copy=self.copy)
        self.assertIsInstance(caught.exception, (tessera.Unsupported, tessera.DtypeMismatch))

    def test_shapes_that_do_not_fit(self):
        a = np.ones((4, 3), np.float32)
        b = np.ones((5, 2), np.float32)
        with self.assertRaisesRegex(tessera.ShapeMismatch, r"tsr_gemm: .*3.*5|5.*3"):
            tessera.gemm(a, b, copy=self.copy)
        with self.assertRaisesRegex(tessera.ShapeMismatch, "tsr_swiglu"):
            tessera.swiglu(np.ones((2, 4), np.float32), np.ones((2, 5), np.float32),
                           copy=self.copy)
        with self.assertRaisesRegex(tessera.ShapeMismatch, "tsr_softmax"):
            tessera.softmax(np.ones((2, 4), np.float32), out=np.ones((2, 3), np.float32),
                            copy=self.copy)

    def test_rank(self):
        with self.assertRaisesRegex(tessera.RankError, "rank"):
            tessera.attention(np.ones((2, 4, 8), np.float32), np.ones((2, 4, 8), np.float32),
                              np.ones((2, 4, 8), np.float32), copy=self.copy)

    def test_unknown_device_and_missing_backend(self):
        with self.assertRaisesRegex(tessera.NotFound, "no-such-backend") as caught:
            tessera.device("no-such-backend:0")
        self.assertEqual(caught.exception.status, 12)
        if not any(device.backend == "cuda" for device in tessera.devices()):
            with self.assertRaises(tessera.NotFound):
                tessera.gelu(FakeGpuArray())

    def test_device_that_cannot_use_memory_in_place(self):
        refused = [(device, support.host_wrap_refusal(device))
                   for device in support.devices_under_test()]
        refused = [(device, reason) for device, reason in refused if reason is not None]
        if not refused:
            self.skipTest("every device under test wraps host memory")
        for device, reason in refused:
            with self.subTest(device=device.selector):
                with self.assertRaises(tessera.Unsupported) as caught:
                    tessera.gelu(np.ones(8, np.float32), device=device, copy=False)
                self.assertIn(reason.split(" (")[0], str(caught.exception))

    def test_memory_no_device_can_use(self):
        memory = OpenClMemory(np.ones(8, np.float32))
        with self.assertRaises(tessera.Unsupported) as refused:
            tessera.gelu(memory, device="cpu:0", copy=False)
        self.assertIn("pass copy=True", str(refused.exception))
        with self.assertRaisesRegex(tessera.Unsupported, "only host memory is copied"):
            tessera.gelu(memory, device="cpu:0")
        with self.assertRaises(tessera.NotFound):
            tessera.gelu(memory)  # no device holds OpenCL DLPack memory

    def test_checks_made_in_python(self):
        x = np.ones((2, 4), np.float32)
        with self.assertRaisesRegex(tessera.InvalidValue, "not a DLPack array"):
            tessera.gelu([1.0, 2.0])
        with self.assertRaisesRegex(tessera.InvalidValue, "activation = 'tanh'"):
            tessera.gemm(x, x.T, activation="tanh", copy=self.copy)
        with self.assertRaisesRegex(tessera.InvalidValue, "style"):
            tessera.rope(np.ones((1, 1, 1, 4), np.float32), style="llama", copy=self.copy)
        with self.assertRaisesRegex(tessera.InvalidValue, "beta"):
            tessera.gemm(x, x.T, beta=0.5, copy=self.copy)
        with self.assertRaisesRegex(tessera.InvalidValue, "op .conv."):
            tessera.explain("conv", x)

    def test_error_found_while_running(self):
        logits = np.zeros((3, 5), np.float32)
        targets = np.array([0, 7, 1], np.int32)  # 7 is outside [0, 5)
        with self.assertRaises(tessera.InvalidValue) as caught:
            tessera.cross_entropy(logits, targets, copy=self.copy)
        self.assertTrue(str(caught.exception))

    def test_unknown_variant(self):
        x = np.ones((2, 8), np.float32)
        with self.assertRaisesRegex(tessera.NotFound, "no_such_variant"):
            tessera.softmax(x, variant="no_such_variant", copy=self.copy)


if __name__ == "__main__":
    unittest.main()
