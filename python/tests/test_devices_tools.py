# SPDX-License-Identifier: Apache-2.0
"""Devices, explain/variants (through the library) and check/bench (through
the CLI)."""
import unittest

import numpy as np

import support
from support import tessera


class DeviceTest(unittest.TestCase):
    def test_listing_and_selectors(self):
        devices = tessera.devices()
        selectors = [device.selector for device in devices]
        self.assertIn("cpu:0", selectors)
        cpu = tessera.device("cpu")
        self.assertIs(cpu, tessera.device("cpu:0"))
        self.assertEqual((cpu.backend, cpu.type), ("cpu", "cpu"))
        self.assertGreater(cpu.memory, 0)
        self.assertIn("f32", cpu.dtypes)
        self.assertIn("gemm", cpu.ops)
        self.assertTrue(cpu.device_key.startswith("cpu:"))
        self.assertEqual(cpu.info()["selector"], "cpu:0")
        for device in devices:
            self.assertIs(tessera.device(device.selector), device)

    def test_device_for_arrays(self):
        x = np.zeros(4, np.float32)
        self.assertIs(tessera.device_for(x), tessera.device("cpu:0"))
        tensor = tessera.empty((4,), "f32", "cpu:0")
        self.assertIs(tessera.device_for(tensor), tessera.device("cpu:0"))

    def test_vulkan_device_when_present(self):
        vulkan = [device for device in tessera.devices() if device.backend == "vulkan"]
        if not vulkan:
            self.skipTest("no Vulkan device")
        self.assertEqual(tessera.device("vulkan:0").backend, "vulkan")

    def test_copies_between_devices(self):
        data = (np.arange(3 * 5, dtype=np.float32).reshape(3, 5) - 7.0) / 4.0
        source = tessera.from_dlpack(data, device="cpu:0")
        # every other device (lavapipe, PoCL, GPUs) and back; cpu:0 itself too
        for device in tessera.devices():
            there = source.to(device)
            self.assertIs(there.device, device)
            self.assertEqual((there.shape, there.dtype), ((3, 5), "f32"))
            np.testing.assert_array_equal(there.numpy(), data)
            np.testing.assert_array_equal(there.to("cpu:0").numpy(), data)
        column = tessera.empty((3, 5), "f32", "cpu:0")
        self.assertEqual(column.to("cpu:0").shape, (3, 5))

    def test_plugin_reports(self):
        names = [report["name"] for report in tessera.context().plugin_reports()]
        self.assertIn("cpu", names)


class ExplainTest(unittest.TestCase):
    def test_explain_and_variants(self):
        cpu = tessera.device("cpu:0")
        copy = support.copy_mode(cpu)
        a = np.ones((64, 32), np.float32)
        b = np.ones((32, 48), np.float32)
        choice = tessera.explain("gemm", a, b, copy=copy)
        self.assertIsInstance(choice, tessera.Choice)
        self.assertIn(choice.rule, ("override", "tuning_db", "heuristic"))
        self.assertTrue(choice.variant and choice.device_key and choice.source)
        names = [name for name, _ in tessera.variants(tessera.gemm, a, b, copy=copy)]
        self.assertIn(choice.variant, names)
        forced = names[-1]
        self.assertEqual(tessera.explain("gemm", a, b, variant=forced, copy=copy).rule,
                         "override")
        np.testing.assert_allclose(tessera.gemm(a, b, variant=forced, copy=copy), a @ b)


class CliTest(unittest.TestCase):
    def setUp(self):
        try:
            tessera.cli_path()
        except tessera.NotFound as error:
            self.skipTest(str(error))

    def test_check_with_json_report(self):
        result = tessera.check(device="cpu:0", op="softmax", quick=True, json=True, timeout=600)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertTrue(result.ok)
        self.assertIsInstance(result.report, dict)
        self.assertEqual(result.report.get("tool"), "tessera check")

    def test_bench_list_and_a_usage_error(self):
        result = tessera.bench(device="cpu:0", op="gemm", short=True, list=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("gemm", result.stdout)
        wrong = tessera.check(no_such_option=True)
        self.assertEqual(wrong.returncode, 2)
        self.assertIn("no-such-option", wrong.stderr + wrong.stdout)


if __name__ == "__main__":
    unittest.main()
