# SPDX-License-Identifier: Apache-2.0
"""The ctypes mirrors against the C headers: a small C program compiled here
prints sizeof/offsetof of every mirrored struct and the value of every
mirrored enum constant, and each must equal the Python side."""
import ctypes
import os
import shutil
import subprocess
import tempfile
import unittest

from support import tessera
from tessera import _abi, _dlpack

REPOSITORY = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = os.path.join(REPOSITORY, "include")
DLPACK_HEADER = os.path.join(INCLUDE, "tessera", "tessera_dlpack.h")


def _constants():
    """(C expression, the Python value) of each mirrored enum constant."""
    pairs = [("TSR_%s" % name[len("TSR_"):], value)
             for value, name in _abi.STATUS_NAMES.items()]
    pairs += [("TSR_DTYPE_%s" % name.upper(), value) for name, value in _abi.DTYPE_BY_NAME.items()]
    pairs += [("TSR_OP_%s" % name.upper(), value) for name, value in _abi.OP_BY_NAME.items()]
    pairs += [("TSR_OP_COUNT_", len(_abi.OP_NAMES)), ("TSR_MAX_RANK", _abi.MAX_RANK),
              ("TSR_MAX_VARIANTS", _abi.MAX_VARIANTS)]
    pairs += [("TSR_ACT_%s" % name.upper(), value) for name, value in _abi.ACTIVATIONS.items()
              if name is not None]
    pairs += [("TSR_COMPUTE_%s" % name.upper(), value)
              for name, value in _abi.COMPUTE_MODES.items()]
    pairs += [("TSR_ROPE_%s" % name.upper(), value) for name, value in _abi.ROPE_STYLES.items()]
    pairs += [("TSR_GELU_ERF", _abi.GELU_APPROXIMATIONS["erf"]),
              ("TSR_GELU_TANH", _abi.GELU_APPROXIMATIONS["tanh"])]
    pairs += [("TSR_CHOICE_%s" % name.upper(), value)
              for value, name in _abi.CHOICE_RULES.items()]
    pairs += [("TSR_EXTERNAL_HOST_POINTER", _abi.EXTERNAL_HOST_POINTER),
              ("TSR_EXTERNAL_CUDA_DEVICE_POINTER", _abi.EXTERNAL_CUDA_DEVICE_POINTER),
              ("TSR_EXTERNAL_HIP_DEVICE_POINTER", _abi.EXTERNAL_HIP_DEVICE_POINTER)]
    pairs += [("TSR_DEVICE_%s" % name.upper(), value)
              for value, name in _abi.DEVICE_TYPE_NAMES.items()]
    return pairs


def _struct_table():
    table = dict(_abi.C_NAMES)
    if os.path.exists(DLPACK_HEADER):
        table.update(_dlpack.C_NAMES)
    return table


def _python_layout(table):
    lines = []
    for struct_class, c_name in table.items():
        lines.append("%s sizeof %d" % (c_name, ctypes.sizeof(struct_class)))
        for field_name, *_ in struct_class._fields_:
            offset = getattr(struct_class, field_name).offset
            lines.append("%s.%s %d" % (c_name, field_name, offset))
    lines += ["%s = %d" % (expression, value) for expression, value in _constants()]
    return lines


def _c_program(table):
    includes = "#include <stddef.h>\n#include <stdio.h>\n#include <tessera/tessera.h>\n"
    if os.path.exists(DLPACK_HEADER):
        includes += "#include <tessera/tessera_dlpack.h>\n"
    body = []
    for struct_class, c_name in table.items():
        body.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (c_name, c_name))
        for field_name, *_ in struct_class._fields_:
            body.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));'
                        % (c_name, field_name, c_name, field_name))
    for expression, _ in _constants():
        body.append('printf("%s = %%lld\\n", (long long)(%s));' % (expression, expression))
    return includes + "int main(void) {\n  " + "\n  ".join(body) + "\n  return 0;\n}\n"


class AbiTest(unittest.TestCase):
    def test_structs_and_enums_match_the_headers(self):
        compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if compiler is None:
            self.skipTest("no C compiler")
        table = _struct_table()
        with tempfile.TemporaryDirectory() as directory:
            source = os.path.join(directory, "layout.c")
            program = os.path.join(directory, "layout")
            with open(source, "w", encoding="utf-8") as handle:
                handle.write(_c_program(table))
            subprocess.run([compiler, "-std=c11", "-I", INCLUDE, source, "-o", program],
                           check=True, capture_output=True)
            printed = subprocess.run([program], check=True, capture_output=True,
                                     text=True).stdout.splitlines()
        self.assertEqual(_python_layout(table), printed)

    def test_descriptor_defaults_follow_the_init_macros(self):
        gemm = _abi.new_desc(_abi.GemmDesc, alpha=1.0)
        self.assertEqual(gemm.struct_size, ctypes.sizeof(_abi.GemmDesc))
        self.assertEqual((gemm.alpha, gemm.beta, gemm.a.buffer), (1.0, 0.0, None))

    def test_library_version(self):
        self.assertRegex(tessera.library_version(), r"^\d+\.\d+\.\d+$")
        self.assertTrue(os.path.exists(tessera.library_path()))


if __name__ == "__main__":
    unittest.main()
