# SPDX-License-Identifier: Apache-2.0
"""Zero-copy import and export through DLPack, the copy path, and capsule
ownership."""
import unittest

import numpy as np

import support
from support import tessera


class CapsuleProducer:
    """A DLPack producer that returns a given object's capsule and remembers it,
    optionally without max_version support (as NumPy 1.24)."""

    def __init__(self, array, accepts_max_version=True):
        self.array = array
        self.accepts_max_version = accepts_max_version
        self.capsules = []
        self.calls = []

    def __dlpack__(self, stream=None, max_version=None):
        self.calls.append(max_version)
        if max_version is not None and not self.accepts_max_version:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        kwargs = {} if max_version is None else {"max_version": max_version}
        capsule = self.array.__dlpack__(**kwargs)
        self.capsules.append(capsule)
        return capsule

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class ZeroCopyOnCpuTest(unittest.TestCase):
    def setUp(self):
        self.cpu = tessera.device("cpu:0")
        refusal = support.host_wrap_refusal(self.cpu)
        if refusal is not None:
            self.skipTest("cpu:0 cannot wrap host memory in this build: " + refusal)
        self.rng = np.random.default_rng(7)

    def test_output_written_in_place(self):
        x = self.rng.standard_normal((5, 32)).astype(np.float32)
        out = np.full((5, 32), np.nan, np.float32)
        # A tessera.Tensor over `out` leaves the package no copy back to make:
        # the op itself must write the NumPy array's memory.
        out_view = tessera.from_dlpack(out, copy=False)
        result = tessera.softmax(x, out=out_view, copy=False)
        self.assertIs(result, out_view)
        np.testing.assert_allclose(out, support.softmax(x.astype(np.float64)), rtol=1e-5,
                                   atol=1e-7)

    def test_input_read_in_place(self):
        x = np.zeros((4, 8), np.float32)
        x_view = tessera.from_dlpack(x, copy=False)
        x[:] = 2.0  # after the import: only a shared memory makes the op see it
        out = np.zeros((4, 8), np.float32)
        tessera.gelu(x_view, out=out, copy=False)
        np.testing.assert_allclose(out, support.gelu_erf(np.full((4, 8), 2.0)), rtol=1e-6)

    def test_returned_and_out_arrays_share_memory(self):
        a = self.rng.standard_normal((6, 4)).astype(np.float32)
        b = self.rng.standard_normal((4, 3)).astype(np.float32)
        out = np.zeros((6, 3), np.float32)
        self.assertIs(tessera.gemm(a, b, out=out), out)
        np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-6)
        x = self.rng.standard_normal((1, 3, 2, 8)).astype(np.float32)
        result = tessera.rope(x, out=x)
        self.assertTrue(np.shares_memory(result, x))
        strided = np.zeros((6, 6), np.float32)[:, ::2]  # a strided output view
        tessera.gemm(a, b, out=strided)
        np.testing.assert_allclose(strided, a @ b, rtol=1e-5, atol=1e-6)

    def test_export_to_numpy_shares_memory(self):
        x = self.rng.standard_normal((3, 16)).astype(np.float32)
        y = tessera.gelu(tessera.from_dlpack(x))  # a tessera.Tensor in, one out
        self.assertIsInstance(y, tessera.Tensor)
        first, second = np.from_dlpack(y), np.from_dlpack(y)
        self.assertTrue(np.shares_memory(first, second))
        np.testing.assert_allclose(first, support.gelu_erf(x.astype(np.float64)), rtol=1e-5)
        # An op writing y afterwards shows through the exported arrays.
        tessera.softmax(tessera.from_dlpack(x), out=y)
        expected = support.softmax(x.astype(np.float64))
        np.testing.assert_allclose(first, expected, rtol=1e-5, atol=1e-7)
        del y  # the export keeps the memory alive
        np.testing.assert_allclose(second, expected, rtol=1e-5, atol=1e-7)

    def test_consumed_capsule_is_renamed(self):
        if not tessera._lib.has("tsr_tensor_from_dlpack"):
            self.skipTest("this libtessera has no tsr_tensor_from_dlpack")
        producer = CapsuleProducer(np.ones(8, np.float32), accepts_max_version=False)
        tensor = tessera.from_dlpack(producer, copy=False)
        self.assertEqual(producer.calls, [(1, 0), None])  # asked for 1.0, then fell back
        self.assertEqual(tessera._dlpack.capsule_name(producer.capsules[-1]), b"used_dltensor")
        tensor.close()

    def test_versioned_round_trip(self):
        if not tessera._lib.has("tsr_tensor_to_dlpack_versioned"):
            self.skipTest("this libtessera has no tsr_tensor_to_dlpack_versioned")
        source = tessera.from_dlpack(np.arange(12, dtype=np.float32).reshape(3, 4))
        producer = CapsuleProducer(source)
        again = tessera.from_dlpack(producer)
        self.assertEqual(tessera._dlpack.capsule_name(producer.capsules[-1]),
                         b"used_dltensor_versioned")
        np.testing.assert_array_equal(again.numpy(), np.arange(12).reshape(3, 4))
        unused = source.__dlpack__(max_version=(1, 0))  # dropped unconsumed: the deleter runs
        self.assertEqual(tessera._dlpack.capsule_name(unused), b"dltensor_versioned")
        del unused


class CopyPathTest(unittest.TestCase):
    def test_copy_true_writes_back_and_keeps_gaps(self):
        for device in support.devices_under_test():
            with self.subTest(device=device.selector):
                rng = np.random.default_rng(3)
                a = rng.standard_normal((5, 7)).astype(np.float32)
                b = rng.standard_normal((7, 4)).astype(np.float32)
                backing = np.full((5, 8), -1.0, np.float32)
                out = backing[:, ::2]
                result = tessera.gemm(a, b, out=out, device=device, copy=True)
                self.assertIs(result, out)
                np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)
                np.testing.assert_array_equal(backing[:, 1::2], -1.0)

    def test_numpy_on_other_devices_by_default(self):
        for device in support.devices_under_test():
            if device.backend == "cpu":
                continue
            with self.subTest(device=device.selector):
                x = np.linspace(-2, 2, 64, dtype=np.float32).reshape(4, 16)
                y = tessera.softmax(x, device=device)
                self.assertIsInstance(y, np.ndarray)
                np.testing.assert_allclose(y, support.softmax(x.astype(np.float64)),
                                           rtol=1e-5, atol=1e-7)

    def test_tensor_numpy_and_empty(self):
        device = tessera.device("cpu:0")
        x = np.arange(24, dtype=np.float16).reshape(2, 3, 4)
        tensor = tessera.from_dlpack(x, copy=True)
        self.assertEqual((tensor.shape, tensor.dtype, tensor.device), ((2, 3, 4), "f16", device))
        np.testing.assert_array_equal(tensor.numpy(), x)
        blank = tessera.empty((3, 5), "bf16", device)
        self.assertEqual((blank.shape, blank.strides, blank.dtype), ((3, 5), (5, 1), "bf16"))
        blank.close()


if __name__ == "__main__":
    unittest.main()
