# SPDX-License-Identifier: Apache-2.0
"""The in-tree build backend: the wheel holds every module with a valid
RECORD, the sdist and the editable wheel build, all without an index."""
import base64
import hashlib
import importlib.util
import os
import tarfile
import tempfile
import unittest
import zipfile

PYTHON_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def _backend():
    path = os.path.join(PYTHON_DIR, "build_backend", "tessera_build.py")
    spec = importlib.util.spec_from_file_location("tessera_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildBackendTest(unittest.TestCase):
    def setUp(self):
        self.backend = _backend()
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)

    def test_wheel_has_every_module_and_a_valid_record(self):
        self.assertEqual(self.backend.get_requires_for_build_wheel(), [])
        name = self.backend.build_wheel(self.directory.name)
        self.assertRegex(name, r"^tessera-\d+\.\d+\.\d+-py3-none-any\.whl$")
        with zipfile.ZipFile(os.path.join(self.directory.name, name)) as wheel:
            members = set(wheel.namelist())
            modules = {"tessera/" + entry for entry in
                       os.listdir(os.path.join(PYTHON_DIR, "tessera")) if entry.endswith(".py")}
            self.assertTrue(modules <= members, modules - members)
            dist_info = name.split("-py3")[0] + ".dist-info"
            record = wheel.read(dist_info + "/RECORD").decode().splitlines()
            self.assertIn("Name: tessera", wheel.read(dist_info + "/METADATA").decode())
            for line in record:
                path, digest, size = line.rsplit(",", 2)
                if path.endswith("RECORD"):
                    continue
                data = wheel.read(path)
                expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
                self.assertEqual(digest, "sha256=" + expected.decode(), path)
                self.assertEqual(int(size), len(data), path)

    def test_sdist_and_editable(self):
        sdist = self.backend.build_sdist(self.directory.name)
        with tarfile.open(os.path.join(self.directory.name, sdist)) as archive:
            names = archive.getnames()
        base = sdist[:-len(".tar.gz")]
        for member in ("pyproject.toml", "PKG-INFO", "tessera/__init__.py",
                       "build_backend/tessera_build.py"):
            self.assertIn(base + "/" + member, names)
        editable = self.backend.build_editable(self.directory.name)
        with zipfile.ZipFile(os.path.join(self.directory.name, editable)) as wheel:
            self.assertEqual(wheel.read("tessera_editable.pth").decode().strip(), PYTHON_DIR)


if __name__ == "__main__":
    unittest.main()
