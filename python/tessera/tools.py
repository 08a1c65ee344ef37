# SPDX-License-Identifier: Apache-2.0
"""explain / variants (through the library) and check / bench (through the
`tessera` command-line tool, which they run as a child process)."""
import json as _json
import os
import shutil
import subprocess
import tempfile

from . import _call, _lib
from .errors import python_error
from .ops import OPS


def _op_function(op):
    if callable(op):
        return op
    function = OPS.get(op)
    if function is None:
        raise python_error("TSR_ERROR_INVALID_VALUE",
                           "op %r is not one of %s" % (op, ", ".join(sorted(OPS))))
    return function


def _ask(mode, op, args, kwargs):
    token = _call.action.set(mode)
    try:
        return _op_function(op)(*args, **kwargs)
    finally:
        _call.action.reset(token)


def explain(op, *args, **kwargs):
    """Which kernel variant `op(*args, **kwargs)` would use on its device, and
    why (tsr_op_explain): a tessera.Choice. Nothing runs; outputs that are not
    given are allocated (and discarded)."""
    return _ask("explain", op, args, kwargs)


def variants(op, *args, **kwargs):
    """The kernel variants that can run `op(*args, **kwargs)` (tsr_op_variants):
    a list of (name, description)."""
    return _ask("variants", op, args, kwargs)


def cli_path():
    """The `tessera` CLI: TESSERA_CLI, else bin/tessera beside the library's
    lib/ directory (build and install trees), else `tessera` on PATH."""
    explicit = os.environ.get("TESSERA_CLI")
    if explicit:
        return explicit
    library_dir = os.path.dirname(_lib.library_path())
    beside = os.path.join(os.path.dirname(library_dir), "bin", "tessera")
    if os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which("tessera")
    if on_path:
        return on_path
    raise python_error("TSR_ERROR_NOT_FOUND",
                       "the tessera CLI is neither at %s nor on PATH; set TESSERA_CLI" % beside)


class CliResult:
    """A finished CLI run: returncode, stdout, stderr, the command, and `report`
    (the parsed --json file, or None)."""

    def __init__(self, command, completed, report):
        self.command = command
        self.returncode = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        self.report = report

    @property
    def ok(self):
        return self.returncode == 0

    def __repr__(self):
        return "<tessera.CliResult %r exit %d>" % (" ".join(self.command[1:]), self.returncode)


def _options(options):
    arguments = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            arguments.append(flag)
        elif value is None or value is False:
            continue
        elif isinstance(value, (list, tuple)):
            arguments += [flag, ",".join(str(item) for item in value)]
        else:
            arguments += [flag, str(value)]
    return arguments


def run_cli(command, *args, json=False, timeout=None, **options):
    """Runs `tessera COMMAND ARGS --option value ...` and returns a CliResult.
    Keyword options become flags (device="cpu:0" -> --device cpu:0, quick=True
    -> --quick); json=True adds --json FILE and parses it into .report."""
    argv = [cli_path(), command] + [str(arg) for arg in args] + _options(options)
    report_path = None
    if json:
        handle, report_path = tempfile.mkstemp(prefix="tessera-", suffix=".json")
        os.close(handle)
        argv += ["--json", report_path]
    try:
        completed = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                   check=False)
        report = None
        if report_path and os.path.getsize(report_path):
            with open(report_path, encoding="utf-8") as report_file:
                report = _json.load(report_file)
    finally:
        if report_path:
            os.unlink(report_path)
    return CliResult(argv, completed, report)


def check(*args, json=False, timeout=None, **options):
    """Runs `tessera check` (the CLI) with these arguments: e.g.
    check(device="cpu:0", op="gemm", quick=True, json=True)."""
    return run_cli("check", *args, json=json, timeout=timeout, **options)


def bench(*args, json=False, timeout=None, **options):
    """Runs `tessera bench` (the CLI) with these arguments: e.g.
    bench(device="cpu:0", op="gemm", shape="256x256x256", json=True)."""
    return run_cli("bench", *args, json=json, timeout=timeout, **options)
