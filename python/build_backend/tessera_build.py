# SPDX-License-Identifier: Apache-2.0
"""A minimal PEP 517 / PEP 660 build backend for the pure-Python tessera package.

It writes a py3-none-any wheel of the tessera/ directory (with a bundled
tessera/lib and tessera/share tree when one has been copied in), an sdist, and
an editable wheel (a .pth file pointing at this directory). Standard library
only, so `pip install ./python` needs nothing from an index.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "tessera"
# Timestamp for archive members: reproducible wheels.
FIXED_DATE = (1980, 1, 1, 0, 0, 0)


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as handle:
        text = handle.read()
    fields = {}
    for key in ("name", "version", "description", "requires-python"):
        match = re.search(r'^%s\s*=\s*"([^"]*)"' % re.escape(key), text, re.MULTILINE)
        fields[key] = match.group(1) if match else ""
    return fields


def _metadata():
    project = _project()
    lines = ["Metadata-Version: 2.1", "Name: %s" % project["name"],
             "Version: %s" % project["version"], "Summary: %s" % project["description"],
             "License: Apache-2.0", "Requires-Python: %s" % project["requires-python"]]
    readme = os.path.join(ROOT, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as handle:
            body = "\n" + handle.read()
    return "\n".join(lines) + "\n" + body


def _dist_info_name():
    project = _project()
    return "%s-%s.dist-info" % (project["name"], project["version"])


def _wheel_name(tag="py3-none-any"):
    project = _project()
    return "%s-%s-%s.whl" % (project["name"], project["version"], tag)


def _package_files():
    base = os.path.join(ROOT, PACKAGE)
    for directory, subdirectories, files in os.walk(base):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(directory, name)
            yield path, os.path.relpath(path, ROOT).replace(os.sep, "/")


def _record_line(archive_name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (archive_name, digest, len(data))


def _write_wheel(wheel_directory, members):
    """members: list of (archive name, bytes, unix mode)."""
    dist_info = _dist_info_name()
    members = list(members)
    members.append((dist_info + "/METADATA", _metadata().encode(), 0o644))
    wheel_text = ("Wheel-Version: 1.0\nGenerator: tessera_build\nRoot-Is-Purelib: true\n"
                  "Tag: py3-none-any\n")
    members.append((dist_info + "/WHEEL", wheel_text.encode(), 0o644))
    record = [_record_line(name, data) for name, data, _ in members]
    record.append(dist_info + "/RECORD,,")
    members.append((dist_info + "/RECORD", ("\n".join(record) + "\n").encode(), 0o644))
    name = _wheel_name()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w",
                         zipfile.ZIP_DEFLATED) as wheel:
        for archive_name, data, mode in members:
            info = zipfile.ZipInfo(archive_name, FIXED_DATE)
            info.external_attr = (mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


def _read(path):
    with open(path, "rb") as handle:
        return handle.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    dist_info = os.path.join(metadata_directory, _dist_info_name())
    os.makedirs(dist_info, exist_ok=True)
    with open(os.path.join(dist_info, "METADATA"), "w", encoding="utf-8") as handle:
        handle.write(_metadata())
    return _dist_info_name()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    members = [(name, _read(path), os.stat(path).st_mode) for path, name in _package_files()]
    return _write_wheel(wheel_directory, members)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = (ROOT + "\n").encode()
    return _write_wheel(wheel_directory, [("tessera_editable.pth", pth, 0o644)])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (project["name"], project["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) \
            as archive:
        paths = [os.path.join(ROOT, "pyproject.toml"), os.path.join(ROOT, "README.md"),
                 os.path.join(ROOT, "build_backend", "tessera_build.py")]
        paths += [path for path, _ in _package_files()]
        for path in paths:
            if os.path.exists(path):
                archive.add(path, arcname=base + "/" + os.path.relpath(path, ROOT))
        pkg_info = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                    % (project["name"], project["version"])).encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg_info)
        archive.addfile(info, io.BytesIO(pkg_info))
    return name
