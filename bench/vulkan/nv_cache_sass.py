#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Machine code of the compute pipelines inside an NVIDIA Vulkan pipeline cache.

NVIDIA's driver (580 series) stores each pipeline in its VkPipelineCache data
as a zstd frame; decompressed, the frame is an "NVDANVVM" blob whose 32-bit
words at bytes 0x4c and 0x50 give the size of the raw sm_XY instruction
stream and its offset counted from byte 8. This writes each stream as NAME.K.raw and, where
nvdisasm is found, its disassembly as NAME.K.sass (nvdisasm -b SM90 by
default), then prints per-blob counts of the instructions that matter for the
GEMM (tensor-core MMA, ldmatrix, register transposes, shared/global memory,
barriers).

usage: nv_cache_sass.py OUTDIR CACHEFILE... (needs the zstd command; layout
       learnt from the H100's 580.159.04 driver, not documented by NVIDIA)
"""
import os, re, shutil, struct, subprocess, sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
OPS = ["HMMA", "LDSM", "MOVM", "LDS", "STS", "LDG", "STG", "BAR", "SHFL"]


def frames(data):
    i = data.find(ZSTD_MAGIC)
    while i >= 0:
        # zstd writes the first frame and then fails on what follows it: fine.
        r = subprocess.run(["zstd", "-d", "-c", "-q"], input=data[i:], capture_output=True)
        if r.stdout:
            yield i, r.stdout
        i = data.find(ZSTD_MAGIC, i + 4)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, arch = sys.argv[1], os.environ.get("SASS_ARCH", "SM90")
    os.makedirs(out, exist_ok=True)
    dis = shutil.which("nvdisasm") or ("/usr/local/cuda/bin/nvdisasm"
                                       if os.path.exists("/usr/local/cuda/bin/nvdisasm") else None)
    for path in sys.argv[2:]:
        data = open(path, "rb").read()
        name = os.path.basename(path).split(".")[0]
        for k, (at, blob) in enumerate(frames(data)):
            if not blob.startswith(b"NVDANVVM") or len(blob) < 0x58:
                continue
            size, off = struct.unpack_from("<II", blob, 0x4C)
            code = blob[off + 8: off + 8 + size]
            raw = os.path.join(out, "%s.%d.raw" % (name, k))
            open(raw, "wb").write(code)
            line = "%s.%d (frame at %d): %d bytes of code" % (name, k, at, len(code))
            if dis:
                text = subprocess.run([dis, "-b", arch, raw], capture_output=True,
                                      text=True).stdout
                open(raw[:-4] + ".sass", "w").write(text)
                counts = {op: len(re.findall(r"\s%s[ .]" % op, text)) for op in OPS}
                line += ", " + " ".join("%s %d" % kv for kv in counts.items())
            print(line)


if __name__ == "__main__":
    main()
