# SPDX-License-Identifier: Apache-2.0
"""Checks that a `tessera check` or `tessera bench` JSON report carries what
lets reports of different machines be archived side by side: the tessera
version, the host, and each device's name, arch, driver and tuning key; for
bench, every row's spread (min/median/max) and flags.

usage: report_keys.py check|bench REPORT.json
"""
import json
import re
import sys

DEVICE_KEYS = ("selector", "backend", "vendor", "name", "arch", "driver_version",
               "device_key", "physical_id", "type", "compute_units", "memory_bytes")
BENCH_FLAGS = {"above_ceiling", "spread", "copy_drift"}


def main():
    tool, path = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    problems = []

    def need(condition, what):
        if not condition:
            problems.append(what)

    need(report.get("tool") == "tessera " + tool, "tool is 'tessera %s'" % tool)
    need(re.fullmatch(r"\d+\.\d+\.\d+.*", str(report.get("version", ""))),
         "version is the tessera version")
    need(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", str(report.get("created", ""))),
         "created is a UTC time")
    host = report.get("host")
    need(isinstance(host, dict) and host.get("os") and host.get("machine"), "host os and machine")
    devices = report.get("devices")
    need(isinstance(devices, list) and devices, "a non-empty devices list")
    for device in devices or []:
        for key in DEVICE_KEYS:
            need(key in device, "device %s has %s" % (device.get("selector"), key))
        for key in ("name", "arch", "driver_version", "device_key"):
            need(isinstance(device.get(key), str) and device.get(key),
                 "device %s: %s is a non-empty string" % (device.get("selector"), key))
    if tool == "bench":
        rows = report.get("rows")
        need(isinstance(rows, list) and rows, "a non-empty rows list")
        for row in rows or []:
            name = "%s %s %s" % (row.get("op"), row.get("dtype"), row.get("shape"))
            low, mid, high = row.get("min_ms"), row.get("median_ms"), row.get("max_ms")
            need(all(isinstance(v, (int, float)) for v in (low, mid, high)) and low <= mid <= high,
                 "row %s: min_ms <= median_ms <= max_ms" % name)
            flags = row.get("flags")
            need(isinstance(flags, list) and set(flags) <= BENCH_FLAGS,
                 "row %s: flags is a list of %s" % (name, sorted(BENCH_FLAGS)))
    else:
        need(isinstance(report.get("results"), list) and report["results"], "a results list")
    for problem in problems:
        print("%s: missing or wrong: %s" % (path, problem))
    if not problems:
        print("%s: ok (%d devices)" % (path, len(devices)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
